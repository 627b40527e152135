"""One module per chapter experiment; each registers a function Config -> Result.

Use :func:`run_experiment` (or ``pglab reproduce NAME``) to run one by name.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from pglab.experiments.registry import Experiment, experiment_names, get_experiment
from pglab.result import Result

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")


def run_experiment(name: str, quick: bool = False, **overrides: Any) -> Result:
    """Run the experiment ``name`` with its defaults (or QUICK size) and ``overrides``."""
    return get_experiment(name).run(quick=quick, **overrides)


__all__ = ["Experiment", "experiment_names", "get_experiment", "run_experiment"]
