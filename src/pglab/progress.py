"""Progress bars for long work: rich on an interactive terminal, silent in CI logs and pipes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress_enabled() -> bool:
    """True when stderr is a terminal and we are not in CI (or PGLAB_PROGRESS=1 forces it)."""
    forced = os.environ.get("PGLAB_PROGRESS")
    if forced is not None:
        return forced not in ("", "0")
    return sys.stderr.isatty() and not os.environ.get("CI")


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Yield from ``items`` while drawing a progress bar (when enabled)."""
    if not progress_enabled():
        yield from items
        return
    from rich.progress import track as rich_track

    yield from rich_track(items, description=description, total=total, transient=True)


class Counter:
    """A manually advanced progress bar: ``with Counter("seeds", total=20) as c: c.advance()``."""

    def __init__(self, description: str, total: int):
        self.description, self.total = description, total
        self._progress = None
        self._task = None

    def __enter__(self) -> Counter:
        if progress_enabled():
            from rich.progress import Progress

            self._progress = Progress(transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total)
        return self

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
