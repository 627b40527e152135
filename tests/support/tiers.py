"""The test tiers, and the guard that keeps the unit tier free of other processes.

unit (the default): in-process only. integration: starts processes (a subprocess, BugFixEnv's sandbox, a
torch.distributed process group, a browser, a process pool), or soaks a server. experiment: runs an experiment, a
benchmark or a training run.
"""

import _posixsubprocess
import contextlib
import os
import subprocess

import pytest

TIERS = ("unit", "integration", "experiment")
FIX = "mark it @pytest.mark.integration (or @pytest.mark.experiment if it runs an experiment or a training run)"


def tier_of(item: pytest.Item) -> str:
    """The one tier an item is marked with, unit when none; two tiers on one item are a usage error."""
    marked = sorted({m.name for m in item.iter_markers() if m.name in TIERS})
    if len(marked) > 1:
        raise pytest.UsageError(f"{item.nodeid} is marked {' and '.join(marked)}: keep exactly one tier")
    return marked[0] if marked else "unit"


def _process_starters() -> list[tuple[object, str, str]]:
    """(owner, attribute, what it starts) of every function through which a test can start another process."""
    found = [(subprocess.Popen, "_execute_child", "a subprocess"),
             (_posixsubprocess, "fork_exec", "a spawned process"),
             (os, "fork", "a forked process"), (os, "forkpty", "a forked process"),
             (os, "posix_spawn", "a spawned process"), (os, "posix_spawnp", "a spawned process"),
             (os, "system", "a shell")]
    with contextlib.suppress(ImportError):
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d

        found += [(dist, "init_process_group", "a torch.distributed process group"),
                  (c10d, "init_process_group", "a torch.distributed process group")]
    return [(owner, name, what) for owner, name, what in found if hasattr(owner, name)]


def _refusing(violations: list[str], what: str):
    def refuse(*args, **kwargs):
        violations.append(f"a unit test started {what}: {FIX}")
        raise ProcessStartedInUnitTest(violations[-1])

    return refuse


class ProcessStartedInUnitTest(Exception):
    """Raised where a unit test starts a process; the conftest fails the test from the recorded line even where
    the code under test catches this (an Exception, not a BaseException: pytest's fixture set-up must see it)."""


@contextlib.contextmanager
def no_processes(violations: list[str]):
    """While inside: every process start appends one line to ``violations`` and raises."""
    starters = _process_starters()
    saved = [getattr(owner, name) for owner, name, _ in starters]
    for owner, name, what in starters:
        setattr(owner, name, _refusing(violations, what))
    try:
        yield
    finally:
        for (owner, name, _), original in zip(starters, saved):
            setattr(owner, name, original)


def unguarded() -> contextlib.AbstractContextManager:
    """The guard of the integration and experiment tiers: none."""
    return contextlib.nullcontext()
