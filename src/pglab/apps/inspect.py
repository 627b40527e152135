"""What ``pglab inspect`` shows of a run folder: its step rows, its warnings and its recorded samples.

A run folder is the ``--out`` of ``pglab demo``, ``train-agent`` or ``train-lm`` (or an imported TRL run, see
:mod:`pglab.apps.trl_import`): its step rows are ``train.jsonl`` (the episode trainers) or ``metrics.jsonl``
(train-lm), its warnings are in ``result.json``, its samples in ``samples.jsonl``
(:mod:`pglab.trainers.records`). Everything here is plain data for the page; a folder that is not a run gives a
one-line SettingsError that names the fix.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pglab.apps.trl_import import import_trl, is_trl_run
from pglab.runtime.options import SettingsError
from pglab.trainers.records import SAMPLES

STEP_LOGS = ("train.jsonl", "metrics.jsonl")
"""The step rows of an episode trainer's run, then of train-lm's."""
RESULT = "result.json"
TIMELINE = ("reward", "pass_rate", "valid_calls", "kl_k1", "entropy", "grad_norm", "clip_ratio", "masked_fraction",
            "is_masked_fraction", "is_truncated_fraction", "zero_adv_groups", "repeat_capped", "skipped",
            "action_tokens", "loss")
"""The step numbers the page draws first, when the rows have them; any other number follows."""
MAX_LINE = 4_000_000
"""Characters of one JSON line read at most: a longer one is not a record of pglab's."""


@dataclass
class InspectedRun:
    """One run folder as the page shows it."""

    name: str
    """The folder's name."""
    folder: Path
    """The folder."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """One row per step: its number and every number the trainer logged (booleans as 0/1)."""
    warnings: list[str] = field(default_factory=list)
    """The run's warnings (result.json's), one line each."""
    samples: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    """The recorded rows of each recorded step."""

    def summary(self) -> dict[str, Any]:
        """The run without its samples: name, folder, steps, the numbers in TIMELINE order, warnings, sample steps."""
        names = {k for row in self.steps for k in row if k != "step"}
        ordered = [k for k in TIMELINE if k in names] + sorted(names - set(TIMELINE))
        return {"name": self.name, "folder": str(self.folder), "steps": self.steps, "metrics": ordered,
                "warnings": self.warnings, "sample_steps": sorted(self.samples)}


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file; a line that is not one raises SettingsError naming the line."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            if len(line) > MAX_LINE:
                raise SettingsError(f"{path}:{number} is over {MAX_LINE} characters; pass a run folder pglab wrote")
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise SettingsError(f"{path}:{number} is not JSON ({err.msg}); pass a run folder pglab wrote") from None
            if not isinstance(row, dict):
                raise SettingsError(f"{path}:{number} is not a JSON object; pass a run folder pglab wrote")
            rows.append(row)
    return rows


def step_numbers(row: dict[str, Any], index: int) -> dict[str, Any]:
    """A step row's finite numbers (booleans as 0/1) and its step (the row's, else its place in the file)."""
    kept = {k: float(v) for k, v in row.items()
            if isinstance(v, (int, float)) and (isinstance(v, bool) or math.isfinite(v))}
    step = row.get("step")
    kept["step"] = step if isinstance(step, int) and not isinstance(step, bool) else index
    return kept


def run_warnings(folder: Path) -> list[str]:
    """result.json's warnings (none when there is no result.json)."""
    path = folder / RESULT
    if not path.is_file():
        return []
    try:
        found = json.loads(path.read_text(encoding="utf-8", errors="replace")).get("warnings", [])
    except (json.JSONDecodeError, AttributeError):
        raise SettingsError(f"{path} is not a JSON object; pass a run folder pglab wrote") from None
    return [str(w) for w in found] if isinstance(found, list) else []


def load_samples(path: Path) -> dict[int, list[dict[str, Any]]]:
    """samples.jsonl's rows by step; a row without an integer step or a list of owners raises SettingsError."""
    found: dict[int, list[dict[str, Any]]] = {}
    for number, row in enumerate(json_lines(path), 1):
        step, owner = row.get("step"), row.get("owner")
        if not isinstance(step, int) or isinstance(step, bool) or not isinstance(owner, list):
            raise SettingsError(f"{path}: row {number} has no integer step and list of owners; pass a file pglab "
                                "wrote")
        found.setdefault(step, []).append(row)
    return found


def load_run(folder: str | Path, model: str | Path | None = None) -> InspectedRun:
    """The run in ``folder``: its step rows, warnings and samples (SettingsError when it is not a run folder).

    A TRL GRPOTrainer output_dir (``completions/*.parquet``) is imported (:func:`pglab.apps.trl_import.import_trl`,
    ``model``: the folder whose tokenizer and weights score the completions)."""
    path = Path(folder)
    if not path.is_dir():
        raise SettingsError(f"{folder} is not a folder; pass a run folder (the --out of demo, train-agent or train-lm)")
    logs = [path / name for name in STEP_LOGS if (path / name).is_file()]
    if not logs and is_trl_run(path):
        rows, samples = import_trl(path, model)
        return InspectedRun(path.resolve().name, path.resolve(), [step_numbers(r, i) for i, r in enumerate(rows)],
                            [], samples)
    if model is not None:
        raise SettingsError(f"--model scores a TRL run's completions; {folder} is pglab's run: drop --model")
    if not logs and not (path / SAMPLES).is_file():
        raise SettingsError(f"{folder} has no {', '.join(STEP_LOGS)} or {SAMPLES}: not a run folder; pass the "
                            "--out of demo, train-agent or train-lm")
    steps = [step_numbers(row, i) for i, row in enumerate(json_lines(logs[0]))] if logs else []
    samples = load_samples(path / SAMPLES) if (path / SAMPLES).is_file() else {}
    return InspectedRun(path.resolve().name, path.resolve(), steps, run_warnings(path), samples)


__all__ = ["InspectedRun", "MAX_LINE", "RESULT", "STEP_LOGS", "TIMELINE", "json_lines", "load_run", "load_samples",
           "run_warnings", "step_numbers"]
