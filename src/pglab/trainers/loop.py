"""The one loop of every token trainer, and its run folder: JSON-lines logs, atomic checkpoints, resume.

:func:`run_loop` is the skeleton TinyAgent's, the HF agents' and train-lm's training share: resume
from the run folder, one JSON line per step, held-out evaluations at the chosen steps, checkpoints,
an early stop, a progress bar. What differs is passed in as a :class:`Trainer` of short functions
(TRL's seam): one training step, one evaluation, and the state a checkpoint keeps.

Every trainer writes through ``RunDir``. A checkpoint is written to a temporary file in the
same folder, flushed to disk, renamed over the old one, and the folder entry is flushed too, so a
crash leaves either the old checkpoint or the new one, never half of one. Every random draw of a
step comes from :func:`step_generator` (seed, step, stream), so a resumed run needs no saved RNG
state to draw exactly the numbers an uninterrupted run draws.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pglab.runtime.options import SettingsError
from pglab.runtime.progress import Counter as ProgressBar

CHECKPOINT = "checkpoint.pt"

TASKS, EVAL = 0, -1
"""Streams of :func:`step_generator`: prompt or task draws (shared by every rank), evaluation; 1 + rank samples."""


def step_generator(seed: int, step: int, stream: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator of one (seed, step, stream) draw; streams TASKS, EVAL, or 1 + rank for sampling."""
    return torch.Generator(device=device).manual_seed(((seed * 1_000_003 + step) * 1009 + stream + 1) % 2**63)


def check_resume(saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise ValueError naming every setting in which ``current`` differs from the checkpoint's ``saved``."""
    def shown(settings: Mapping[str, Any], key: str) -> str:
        return repr(settings[key]) if key in settings else "not set"

    changed = [f"{k} ({shown(saved, k)} in the checkpoint, {shown(current, k)} now)"
               for k in sorted(set(saved) | set(current)) if saved.get(k, ...) != current.get(k, ...)]
    if changed:
        raise SettingsError(f"cannot resume: {'; '.join(changed)} differ; pass the checkpoint's settings "
                            "or a new output folder")


def fsync_folder(folder: Path) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


class RunDir:
    """The output folder of one run (``path=None``: nothing is written; ``writer=False`` on ranks > 0)."""

    def __init__(self, path: str | Path | None, *, writer: bool = True):
        self.path = Path(path) if path is not None else None
        self.writer = writer and self.path is not None
        if self.writer:
            self.path.mkdir(parents=True, exist_ok=True)

    def __truediv__(self, name: str) -> Path:
        if self.path is None:
            raise ValueError("this run writes no files: pass an output folder")
        return self.path / name

    def has_checkpoint(self) -> bool:
        return self.path is not None and (self.path / CHECKPOINT).exists()

    def checkpoint_step(self) -> int | None:
        """The step the checkpoint was written after, None when there is none."""
        if not self.has_checkpoint():
            return None
        return int(torch.load(self.path / CHECKPOINT, map_location="cpu", weights_only=True)["step"])

    def save_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Write ``state`` atomically: a temporary file in the same folder, fsync, rename, fsync the folder."""
        if not self.writer:
            return
        path = self.path / CHECKPOINT
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        with open(tmp, "wb") as f:
            torch.save(dict(state), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_folder(self.path)

    def load_checkpoint(self, settings: Mapping[str, Any], map_location: Any = "cpu") -> dict[str, Any]:
        """The checkpoint (tensors, numbers, strings and containers only), after checking its settings."""
        if not self.has_checkpoint():
            raise SettingsError(f"nothing to resume: no {CHECKPOINT} in {self.path}; pass the folder of a stopped run")
        state = torch.load(self.path / CHECKPOINT, map_location=map_location, weights_only=True)
        check_resume(state["settings"], settings)
        return state

    def write_lines(self, name: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Replace the JSON-lines file ``name`` with ``rows`` (one JSON object a line)."""
        if self.writer:
            (self.path / name).write_text("".join(json.dumps(dict(r)) + "\n" for r in rows))

    def append_line(self, name: str, row: Mapping[str, Any]) -> None:
        """Append one JSON object as a line to ``name``."""
        if self.writer:
            with open(self.path / name, "a") as f:
                f.write(json.dumps(dict(row)) + "\n")

    def write_json(self, name: str, value: Any) -> None:
        if self.writer:
            (self.path / name).write_text(json.dumps(value, indent=1))


@dataclass(frozen=True)
class RunSettings:
    """Where a run keeps its files, and how it starts and stops."""

    out: str | Path | None = None
    """The run folder: JSON lines, checkpoints (None: nothing is written)."""
    resume: bool = False
    """Continue the stopped run in ``out`` from its checkpoint."""
    stop_at: int | None = None
    """End after this many steps, checkpointed, as an interruption would (None: run every step)."""
    checkpoint_every: int = 10
    """Steps between checkpoints (0: none but the last); one is also written at the end and at stop_at."""
    progress: bool = True
    """Show a progress bar (rank 0, on a terminal)."""


@dataclass(frozen=True)
class Schedule:
    """What the loop does when: its steps, evaluations and files."""

    steps: int
    """Training steps of the whole run."""
    eval_steps: frozenset[int]
    """Completed step counts after which the held-out evaluation runs (0: before the first step)."""
    log: str
    """The JSON-lines file of the steps' rows."""
    eval_log: str | None = None
    """The JSON-lines file of the evaluations (None: they are kept in the checkpoint and returned only)."""
    label: str = "train"
    """The progress bar's title."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Values a resumed run must share with its checkpoint."""
    map_location: Any = "cpu"
    """Where a resumed checkpoint's tensors are loaded."""


@dataclass
class LoopRun:
    """What the loop has done: one row per step, the evaluations, where it started."""

    history: list[dict[str, Any]] = field(default_factory=list)
    """One row per training step, as logged."""
    evals: list[dict[str, Any]] = field(default_factory=list)
    """One record per held-out evaluation (each with its ``step``)."""
    resumed_from: int = 0
    """The step the run started from (0, or the checkpoint's)."""
    seconds: float = 0.0
    """Wall seconds of this process's loop."""


@dataclass
class Trainer:
    """The short functions a token trainer passes to :func:`run_loop`."""

    step: Callable[[int, LoopRun], dict[str, Any]]
    """Training step i (0-based) -> its row (the loop adds ``seconds``)."""
    evaluate: Callable[[int], dict[str, Any] | None]
    """The held-out evaluation after that many completed steps -> its record (None: this process does not)."""
    state: Callable[[], dict[str, Any]]
    """What a checkpoint keeps of the trainer (model, optimiser, baseline, ...)."""
    restore: Callable[[Mapping[str, Any]], None]
    """Load what ``state`` gave back from a checkpoint."""
    status: Callable[[dict[str, Any], LoopRun], str] = lambda row, run: ""
    """The progress bar's line after a step."""
    on_row: Callable[[dict[str, Any]], None] = lambda row: None
    """Called with each step's complete row (a console table, TensorBoard)."""


def run_loop(trainer: Trainer, schedule: Schedule, run_settings: RunSettings, *, rank: int = 0) -> LoopRun:
    """Train from step 0, or from the checkpoint in the run folder, to ``schedule.steps`` (or ``stop_at``).

    Each step's row is appended to ``schedule.log``; after each step whose count is in
    ``eval_steps`` the evaluation runs (its record appended to ``eval_log``), then a checkpoint is
    written every ``checkpoint_every`` steps, at the end and at ``stop_at``. Only ``rank`` 0 writes.
    """
    folder = RunDir(run_settings.out, writer=rank == 0)
    run = LoopRun()
    if run_settings.resume:
        state = folder.load_checkpoint(schedule.settings, map_location=schedule.map_location)
        trainer.restore(state)
        run = LoopRun(state["history"], state["evals"], state["step"])
    folder.write_lines(schedule.log, run.history)
    if schedule.eval_log:
        folder.write_lines(schedule.eval_log, run.evals)

    def evaluate(done: int) -> None:
        record = trainer.evaluate(done)
        if record is not None:
            run.evals.append(record)
            if schedule.eval_log:
                folder.append_line(schedule.eval_log, record)

    began = time.perf_counter()
    stop = schedule.steps if run_settings.stop_at is None else min(schedule.steps, run_settings.stop_at)
    with ProgressBar(schedule.label, schedule.steps, completed=run.resumed_from,
                     show=run_settings.progress and rank == 0) as bar:
        if run.resumed_from == 0 and 0 in schedule.eval_steps:
            evaluate(0)
        for step in range(run.resumed_from, stop):
            tick = time.perf_counter()
            row = trainer.step(step, run)
            row["seconds"] = time.perf_counter() - tick
            run.history.append(row)
            trainer.on_row(row)
            folder.append_line(schedule.log, row)
            bar.advance(status=trainer.status(row, run))
            done = step + 1
            if done in schedule.eval_steps:
                evaluate(done)
            every = run_settings.checkpoint_every
            if done == stop or (every and done % every == 0):
                folder.save_checkpoint({"settings": dict(schedule.settings), "step": done, **trainer.state(),
                                        "history": run.history, "evals": run.evals})
    run.seconds = time.perf_counter() - began
    return run


def eval_steps(steps: int, every: int, *more: int) -> frozenset[int]:
    """0, every ``every``-th step count (0: none between), the last, and ``more``."""
    return frozenset({0, steps, *(range(every, steps, every) if every else ()), *more})


__all__ = ["CHECKPOINT", "EVAL", "TASKS", "LoopRun", "RunDir", "RunSettings", "Schedule", "Trainer", "check_resume",
           "eval_steps", "run_loop", "step_generator"]
