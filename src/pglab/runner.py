"""run_seeds: run one training function for many seeds, serially, in processes, or on Ray.

``train(job, **kwargs)`` is a generator that yields one curve point per update: a number, an
array, or a dict of those. A job is an RNG seed or any picklable spec that holds one (a dataclass
such as ``RaceJob(variant, seed)``). ``run_seeds`` collects every seed's points and stacks them to
[seeds, updates, ...] (a dict of such arrays when the points are dicts). The same seeds give the
same numbers on every backend: each seed runs alone, its randomness comes only from its seed, and
each worker uses one torch thread.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np

from pglab.runtime.options import SettingsError
from pglab.runtime.progress import Counter
from pglab.runtime.threads import single_torch_thread

BACKENDS = ("serial", "process", "ray")


def _collect(train: Callable[..., Iterator[Any]], seed: Any, kwargs: dict[str, Any]) -> list[Any]:
    with single_torch_thread():
        return list(train(seed, **kwargs))


def _stack(curves: list[list[Any]]) -> np.ndarray | dict[str, np.ndarray]:
    lengths = {len(c) for c in curves}
    if len(lengths) != 1:
        raise ValueError(f"every seed must yield the same number of points, got lengths {sorted(lengths)}")
    first = curves[0][0] if curves[0] else None
    if isinstance(first, dict):
        return {k: np.asarray([[np.asarray(p[k]) for p in c] for c in curves]) for k in first}
    return np.asarray([[np.asarray(p) for p in c] for c in curves])


def _run_ray(train, seeds, kwargs, counter: Counter, workers: int) -> list[list[Any]]:
    # Ray otherwise addresses its own services through the machine's network address; with this
    # setting (read when ray is first imported) every service listens and talks on 127.0.0.1 only.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise SettingsError("backend='ray' needs Ray: pip install 'pglab[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        # Workers see the caller's import path, so a train function from a script's folder resolves.
        path = os.pathsep.join(p for p in sys.path if p)
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        remote = ray.remote(num_cpus=1)(_collect)
        refs = {remote.remote(train, seed, kwargs): i for i, seed in enumerate(seeds)}
        curves: list[list[Any]] = [[] for _ in seeds]
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            curves[refs[done[0]]] = ray.get(done[0])
            counter.advance()
        return curves
    finally:
        if started_here:
            ray.shutdown()


def run_seeds(
    train: Callable[..., Iterator[Any]],
    seeds: Sequence[Any],
    *,
    backend: str = "serial",
    workers: int | None = None,
    description: str = "seeds",
    **kwargs: Any,
) -> np.ndarray | dict[str, np.ndarray]:
    """Run ``train(job, **kwargs)`` for every job (a seed or a picklable job spec); stack to [jobs, updates, ...].

    backend "process" uses a spawned process pool, "ray" a local Ray instance started on demand
    (the ``ray`` extra); ``train`` must then be a module-level function. ``workers`` defaults to
    the number of CPUs. A progress bar counts finished seeds.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; pass one of {', '.join(BACKENDS)}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds is empty: pass at least one seed")
    workers = workers or os.cpu_count() or 1
    with Counter(description, total=len(seeds)) as counter:
        if backend == "serial":
            curves = []
            for seed in seeds:
                curves.append(_collect(train, seed, kwargs))
                counter.advance()
        elif backend == "process":
            curves = [[] for _ in seeds]
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=min(workers, len(seeds)), mp_context=context) as pool:
                futures = {pool.submit(_collect, train, seed, kwargs): i for i, seed in enumerate(seeds)}
                for future in as_completed(futures):
                    curves[futures[future]] = future.result()
                    counter.advance()
        else:
            curves = _run_ray(train, seeds, kwargs, counter, workers)
    return _stack(curves)
