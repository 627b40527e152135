"""The catalogue's one-line summaries (pglab reproduce --list) state the sizes the experiments' Configs run."""

import re

import pytest

from pglab.experiments import experiment_names, get_experiment

SIZES = {"seeds": "seeds", "runs": "seeds", "REINFORCE steps": "steps"}
"""A number the summaries state, before these words -> the Config field that holds it."""


@pytest.mark.parametrize("name", experiment_names())
def test_the_summary_states_the_configs_seeds_and_steps(name):
    experiment = get_experiment(name)
    config = experiment.config_cls()
    stated = re.findall(rf"(\d+) ({'|'.join(SIZES)})\b", experiment.summary)
    for number, words in stated:
        assert int(number) == getattr(config, SIZES[words]), (experiment.summary, SIZES[words])


def test_tinyagent_reinforce_says_five_seeds():
    assert "over 5 seeds" in get_experiment("tinyagent-reinforce").summary
    assert get_experiment("tinyagent-reinforce").config_cls().seeds == 5
