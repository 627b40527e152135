"""Every experiment at QUICK size: all claims hold, each states its tolerance, the result has tables and figures."""

import dataclasses

import pytest

from pglab.experiments import experiment_names, get_experiment
from support.experiments import check_quick


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.experiment(name, fallback=True))
                                  for name in experiment_names()])
def test_quick_run_holds_every_claim(name):
    """Each experiment that no test of its own declares (the conftest drops the others' cases)."""
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
