"""One module per book experiment, found through the lazy catalogue in :mod:`pglab.experiments.registry`.

Use :func:`run_experiment` (or ``pglab reproduce NAME``) to run one by name.
"""

from __future__ import annotations

from typing import Any

from pglab.experiments.registry import CATALOGUE, Experiment, experiment_names, get_experiment
from pglab.reporting.result import Result


def run_experiment(name: str, quick: bool = False, **overrides: Any) -> Result:
    """Run the experiment ``name`` with its defaults (or QUICK size) and ``overrides``."""
    return get_experiment(name).run(quick=quick, **overrides)


__all__ = ["CATALOGUE", "Experiment", "experiment_names", "get_experiment", "run_experiment"]
