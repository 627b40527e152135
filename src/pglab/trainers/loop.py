"""A run's output folder: JSON-lines logs, atomic checkpoints, the resume check, and per-step generators.

Every token trainer writes through ``RunDir``. A checkpoint is written to a temporary file in the
same folder, flushed to disk, renamed over the old one, and the folder entry is flushed too, so a
crash leaves either the old checkpoint or the new one, never half of one. Every random draw of a
step comes from :func:`step_generator` (seed, step, stream), so a resumed run needs no saved RNG
state to draw exactly the numbers an uninterrupted run draws.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

CHECKPOINT = "checkpoint.pt"

TASKS, EVAL = 0, -1
"""Streams of :func:`step_generator`: prompt or task draws (shared by every rank), evaluation; 1 + rank samples."""


def step_generator(seed: int, step: int, stream: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator of one (seed, step, stream) draw; streams TASKS, EVAL, or 1 + rank for sampling."""
    return torch.Generator(device=device).manual_seed(((seed * 1_000_003 + step) * 1009 + stream + 1) % 2**63)


def check_resume(saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise ValueError naming every setting in which ``current`` differs from the checkpoint's ``saved``."""
    changed = [f"{k} ({saved.get(k)!r} in the checkpoint, {current.get(k)!r} now)"
               for k in sorted(set(saved) | set(current)) if saved.get(k) != current.get(k)]
    if changed:
        raise ValueError(f"cannot resume: {'; '.join(changed)} differ; pass the checkpoint's settings "
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
            raise ValueError(f"nothing to resume: no {CHECKPOINT} in {self.path}; pass the folder of a stopped run")
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


__all__ = ["CHECKPOINT", "EVAL", "TASKS", "RunDir", "check_resume", "step_generator"]
