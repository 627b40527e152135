"""One builder at a time for a cached artefact shared by processes (test workers, sweep workers, users' shells)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
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


def build_once(folder: Path, build: Callable[[Path], None], marker: str, force: bool = False) -> Path:
    """``folder``, built by ``build(tmp)`` unless it holds ``marker`` (a file the build writes last) and not
    ``force``: under :func:`building`, into a temporary folder beside it renamed into place, so a half-built folder
    is never seen and a failed build leaves nothing."""
    with building(folder):
        if (folder / marker).exists() and not force:
            return folder
        tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
        try:
            build(tmp)
            if force and folder.exists():
                shutil.rmtree(folder)
            try:
                os.replace(tmp, folder)
            except OSError:                   # a process without the lock (another machine's share) got there first
                if not (folder / marker).exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


__all__ = ["build_once", "building"]
