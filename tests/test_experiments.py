"""Every experiment at QUICK size: all claims hold, each states its tolerance, the result has tables and figures."""

import dataclasses
import functools
import re
from pathlib import Path

import pytest

from pglab.experiments import experiment_names, get_experiment
from pglab.runtime.threads import single_torch_thread

NO_FIGURE = {"loo-enumeration", "repair-mdp-gradient", "tinyagent-masking", "tinyagent-reward-to-go"}
"""Experiments whose results are tables only."""
SMOKE_ONLY = {
    "hf-agent": "the training claims need 80 steps x 64 episodes; train-agent is tested on its own",
    "tinyagent-reinforce": "the training claims need 80 steps x 64 episodes; the trainer is tested on its own",
    "lm-kl": "the collapse folds, the KL order and the bounded KL need 300 steps of the full default over 3 seeds; "
             "its test holds the k1 claims and checks that every claim is stated",
}
"""Experiments whose claims need the full size: at QUICK size they must run and state claims, not hold them."""


@functools.cache
def quick_result(name: str):
    """The experiment's Result at QUICK size, run once per test session (test_exp_* files share it)."""
    with single_torch_thread():
        return get_experiment(name).run(quick=True)


def check_quick(name: str):
    """The QUICK-size Result of ``name``, after the checks every experiment must pass."""
    result = quick_result(name)
    assert result.checks, "an experiment states at least one claim"
    if name not in SMOKE_ONLY:
        assert result.passed, [c for c in result.checks if not c.passed]
    assert all(c.tolerance.strip() for c in result.checks), [c.claim for c in result.checks if not c.tolerance.strip()]
    assert result.tables and all(result.tables.values())
    assert bool(result.figures) == (name not in NO_FIGURE)
    return result


def checked_elsewhere() -> set[str]:
    """Experiments whose own test file calls check_quick (each QUICK run happens once per session)."""
    here = Path(__file__)
    return {name for path in here.parent.glob("test_*.py") if path != here
            for name in re.findall(r'check_quick\("([\w-]+)"\)', path.read_text())}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(experiment_names()) - checked_elsewhere()))
def test_quick_run_holds_every_claim(name):
    check_quick(name)


@pytest.mark.parametrize("name", experiment_names())
def test_seed_settings_are_validated(name):
    experiment = get_experiment(name)
    fields = {f.name for f in dataclasses.fields(experiment.config_cls)}
    if "seeds" not in fields:
        return
    assert "first_seed" in fields and hasattr(experiment.config_cls, "MIN_SEEDS")
    with pytest.raises(ValueError, match="--seeds >="):
        experiment.config(seeds=experiment.config_cls.MIN_SEEDS - 1)
    with pytest.raises(ValueError, match="--first-seed"):
        experiment.config(first_seed=-1)


def test_sd_over_runs_refuses_one_run():
    with pytest.raises(ValueError, match="--seeds >= 2"):
        get_experiment("tokenworld-training").config(seeds=1)
    with pytest.raises(ValueError, match="--seeds >= 1"):
        get_experiment("bandit-race").config(seeds=0)
