"""Every experiment at QUICK size: all claims hold, each states its tolerance, the result has tables and figures."""

import dataclasses
import re
from pathlib import Path

import pytest

from pglab.experiments import experiment_names, get_experiment
from support import ROOT
from support.experiments import check_quick


def checked_elsewhere() -> set[str]:
    """Experiments whose own test file calls check_quick (each QUICK run happens once per session)."""
    here = Path(__file__).resolve()
    return {name for path in (ROOT / "tests").rglob("test_*.py") if path != here
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
