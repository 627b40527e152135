"""Benchmarks run by ``pglab bench NAME``: each times pglab against a reference measured in the same run.

Every module has ``run(quick=False) -> Result``; its claims are ratios, never absolute times, so
that a busy machine slows both sides alike.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pglab.reporting.result import Result, provenance
from pglab.runtime.options import SettingsError

BENCHMARKS: dict[str, str] = {
    "bandit": "vectorised bandit trainer vs a per-run loop; bandit-variance wall time",
    "tabular": "lockstep tabular sampler vs gymnasium's FrozenLake; frozenlake-race wall time",
    "bugfix": "BugFixEnv steps/s warm and cold, and programs graded per second by isolation layer",
    "agent": "TinyAgent episodes with the KV cache vs recomputing every prefix at batch 64; pglab demo wall time",
    "lm-vs-trl": "train-lm vs TRL GRPOTrainer, paired steps at two sizes, and the GEMM-only bound (pglab[bench])",
    "agent-vs-trl": "train-agent (--env trl:) vs TRL GRPOTrainer with environment_factory on one tool-use "
                    "environment, paired steps: episodes and tokens per second (pglab[bench])",
    "audit": "pglab audit at the CLI defaults and off-policy (stale:2) against the on-policy audit, in-process and "
             "as a command",
    "conform": "pglab conform trl on the default GRPOConfig: each phase in-process, and the command against "
               "--skip-trainer",
}
"""name -> one-line summary; the module is pglab.bench.NAME."""


def benchmark(name: str) -> Callable[..., Result]:
    """The ``run`` function of benchmark ``name``; SettingsError naming the known ones otherwise."""
    if name not in BENCHMARKS:
        raise SettingsError(f"unknown benchmark {name!r}; `pglab bench --list` shows: {', '.join(BENCHMARKS)}")
    return importlib.import_module(f"pglab.bench.{name.replace('-', '_')}").run


def takes(name: str) -> set[str]:
    """The settings benchmark ``name`` takes besides ``quick`` (lm-vs-trl: size)."""
    return set(inspect.signature(benchmark(name)).parameters) - {"quick"}


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse an option that benchmark ``name`` does not take, naming the benchmarks that do."""
    for key in sorted(set(options) - takes(name)):
        holders = [n for n in BENCHMARKS if key in takes(n)]
        raise SettingsError(f"bench {name} takes no --{key}; drop it (it is a setting of {', '.join(holders)})")


def run_benchmark(name: str, quick: bool = False, **options: Any) -> Result:
    """Run the benchmark ``name`` with its own ``options`` (e.g. size); SettingsError for one it does not take."""
    check_options(name, options)
    result = benchmark(name)(quick=quick, **options)
    result.provenance = result.provenance or provenance()
    return result
