"""One builder at a time for a cached artefact shared by processes (test workers, sweep workers, users' shells)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:                     # Windows: no advisory locks; concurrent builds stay correct, only repeated
    fcntl = None


@contextlib.contextmanager
def building(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock named after ``folder`` (``.NAME.lock`` beside it) while the block runs.

    A process that wants a cached build checks for it inside the block: the first one builds, the others wait for
    it and then find the folder, instead of building the same thing at once. The lock dies with its process.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    with open(folder.parent / f".{folder.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


__all__ = ["building"]
