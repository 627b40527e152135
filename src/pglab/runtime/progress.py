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
    """A manually advanced progress bar: ``with Counter("seeds", total=20) as c: c.advance()``.

    ``completed`` starts the bar part-way (a resumed run); ``advance(status=...)`` shows a line of
    metrics after the bar; ``show=False`` keeps it silent whatever the terminal.
    """

    def __init__(self, description: str, total: int, *, completed: int = 0, show: bool = True):
        self.description, self.total, self.completed, self.show = description, total, completed, show
        self._progress = None
        self._task = None

    def __enter__(self) -> Counter:
        if self.show and progress_enabled():
            from rich.progress import Progress, TextColumn

            self._progress = Progress(*Progress.get_default_columns(), TextColumn("{task.fields[status]}"),
                                      transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total, completed=self.completed,
                                                 status="")
        return self

    def advance(self, n: int = 1, status: str | None = None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=n, **({} if status is None else {"status": status}))

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
