"""Benchmarks run by ``pglab bench NAME``: each times pglab against a reference measured in the same run.

Every module has ``run(quick=False) -> Result``; its claims are ratios, never absolute times, so
that a busy machine slows both sides alike.
"""

from __future__ import annotations

import importlib

from pglab.reporting.result import Result, provenance

BENCHMARKS: dict[str, str] = {
    "bandit": "vectorised bandit trainer vs a per-run loop; bandit-variance wall time",
    "tabular": "lockstep tabular sampler vs gymnasium's FrozenLake; frozenlake-race wall time",
    "bugfix": "BugFixEnv steps/s warm and cold, and programs graded per second by isolation layer",
    "agent": "TinyAgent episodes with the KV cache vs recomputing every prefix at batch 64; pglab demo wall time",
    "lm-vs-trl": "train-lm vs TRL GRPOTrainer, paired steps at two sizes, and the GEMM-only bound (pglab[bench])",
}
"""name -> one-line summary; the module is pglab.bench.NAME."""


def run_benchmark(name: str, quick: bool = False, **options) -> Result:
    """Run the benchmark ``name`` (``options``: its own settings, e.g. size); ValueError naming the known ones."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; `pglab bench --list` shows: {', '.join(BENCHMARKS)}")
    result = importlib.import_module(f"pglab.bench.{name.replace('-', '_')}").run(quick=quick, **options)
    result.provenance = result.provenance or provenance()
    return result
