"""The process trees of the BugFixEnv sandbox's workers, read from /proc."""

import glob
import os

from pglab.envs.bugfix import Sandbox
from pglab.envs.bugfix.sandbox import _probe


def descendants(pid: int | None = None) -> list[int]:
    """Every live descendant of a process, from /proc."""
    found = []
    for path in glob.glob(f"/proc/{pid or os.getpid()}/task/*/children"):
        try:
            with open(path) as f:
                children = [int(child) for child in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):  # the thread or process ended after the glob listed it
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def worker_trees(sandbox: Sandbox) -> set[int]:
    """The live workers and their descendants; asserts that each worker is idle: its own processes only
    (bwrap's two processes and the worker, or the worker; its zygote; then the program forked in advance: P, and I
    where programs get their own PID namespace)."""
    trees = set()
    program = 3 if _probe(sandbox.isolation)["namespaces"] else 2
    for worker in filter(None, sandbox._workers):
        tree = [worker.proc.pid, *descendants(worker.proc.pid)]
        extra = len(tree) - (3 if sandbox.isolation == "bwrap" else 1)
        assert 2 <= extra <= program, f"left behind: {tree}"  # I may not be forked yet
        trees.update(tree)
    return trees
