"""A TRL GRPOTrainer run's logged completions as pglab's recorded samples (the rows of ``samples.jsonl``).

With ``log_completions=True`` TRL 1.16's GRPOTrainer writes, at every logging step, the step's completions to
``OUTPUT_DIR/completions/completions_{step:05d}.parquet``: columns step, prompt, completion, one column per reward
function (named after it), any extra logged columns, and advantage. Its metrics (reward, kl, entropy, clip ratios,
grad_norm) are the ``log_history`` of ``trainer_state.json`` (written with each checkpoint, or by
``trainer.save_state()``).

Each completion becomes one row of the same format as :mod:`pglab.trainers.records` writes. Without a model the
text is cut into words (ids absent, no log-probs); with ``model`` (a save_pretrained folder) the prompt and the
completion are tokenized by its tokenizer (separately, as TRL does; the completion's text re-tokenized, which can
differ from the sampled ids where the decode merged tokens) and scored by pglab's own scoring
(:func:`pglab.sampling.scoring.sequence_log_probs` at temperature 1): the log-prob of every token.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch

from pglab.batch import POLICY, PROMPT
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import track
from pglab.trainers.loop import RunDir
from pglab.trainers.records import SAMPLES

COMPLETIONS = "completions"
"""The folder of TRL's completion tables in its output_dir."""
STATE = "trainer_state.json"
FIXED = ("step", "prompt", "completion", "advantage")
"""The columns TRL always writes; every other numeric column is a reward function's."""
DIGITS = 4


def is_trl_run(folder: Path) -> bool:
    """Whether ``folder`` holds TRL's completion tables."""
    return any((folder / COMPLETIONS).glob("completions_*.parquet"))


def completion_table(folder: Path) -> list[dict[str, Any]]:
    """Every logged completion of ``folder``, step by step, as dicts of TRL's columns."""
    try:
        import pandas
    except ImportError as err:
        raise SettingsError(f"reading TRL's completions needs pandas and pyarrow ({err.name} is missing): "
                            "pip install 'pglab[lm]'") from None
    rows = []
    for path in sorted((folder / COMPLETIONS).glob("completions_*.parquet")):
        try:
            rows += pandas.read_parquet(path).to_dict("records")
        except Exception as err:    # pyarrow raises several types for a damaged file
            raise SettingsError(f"{path} is not a parquet table ({type(err).__name__}); pass TRL's output_dir") \
                from None
    return rows


def as_text(message: Any) -> str:
    """A prompt or completion as text: a string, or a conversation's turns as 'role: content' lines."""
    if isinstance(message, str):
        return message
    turns = list(message) if message is not None else []
    return "\n".join(f"{t.get('role', '')}: {t.get('content', '')}" if isinstance(t, dict) else str(t)
                     for t in turns)


def reward_columns(row: dict[str, Any]) -> dict[str, float]:
    """The reward functions' columns of one completion (numbers outside FIXED), NaN (not scored) as None."""
    return {k: (None if math.isnan(float(v)) else round(float(v), DIGITS)) for k, v in row.items()
            if k not in FIXED and isinstance(v, (int, float)) and not isinstance(v, bool)}


def words(text: str) -> list[str]:
    """``text`` cut before each word, whitespace kept with the word that follows it."""
    return re.findall(r"\s*\S+|\s+", text)


def sample_line(row: dict[str, Any], index: int, pieces: tuple[list[str], list[str]],
                ids: list[int] | None = None, logp: list[float] | None = None) -> dict[str, Any]:
    """One completion as a samples.jsonl row: pieces are (prompt tokens' text, completion tokens' text)."""
    prompt, completion = pieces
    rewards = reward_columns(row)
    advantage = round(float(row["advantage"]), DIGITS)
    owner = [PROMPT] * len(prompt) + [POLICY] * len(completion)
    line = {"step": int(row["step"]), "row": index, "group": None,
            "reward": round(sum(v for v in rewards.values() if v is not None), DIGITS), "rewards": rewards,
            "passed": None, "end": None, "advantage": advantage, "truncated": False, "ids": ids,
            "text": prompt + completion, "owner": owner, "adv": [advantage if o == POLICY else 0.0 for o in owner],
            "source": "trl"}
    if logp is not None:
        line["logp"] = [round(v, DIGITS) for v in logp]
    return line


def scored_line(row: dict[str, Any], index: int, model: Any, tokenizer: Any) -> dict[str, Any]:
    """One completion tokenized by ``tokenizer`` and scored by ``model`` (pglab's scoring) as a samples row."""
    from pglab.models.policy import HFPolicy
    from pglab.sampling.scoring import sequence_log_probs

    prompt = row["prompt"]
    if not isinstance(prompt, str) and getattr(tokenizer, "chat_template", None):
        prompt_ids = list(tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=True))
    else:
        prompt_ids = tokenizer(as_text(prompt))["input_ids"]
    completion_ids = tokenizer(as_text(row["completion"]), add_special_tokens=False)["input_ids"]
    ids = prompt_ids + completion_ids
    with torch.no_grad():
        logp = sequence_log_probs(HFPolicy(model), torch.tensor([ids]), start=1)[0]
    logp = torch.where(torch.arange(len(ids)) >= len(prompt_ids), logp, 0.0).tolist()
    text = [tokenizer.decode([i]) for i in ids]
    return sample_line(row, index, (text[:len(prompt_ids)], text[len(prompt_ids):]), ids, logp)


def log_history(folder: Path) -> list[dict[str, Any]]:
    """TRL's logged metrics: the log_history of trainer_state.json in ``folder``, else of its latest checkpoint."""
    found = [folder / STATE] + sorted(folder.glob(f"checkpoint-*/{STATE}"),
                                      key=lambda p: int(p.parent.name.split("-")[-1]) if p.parent.name.split("-")[
                                          -1].isdigit() else -1, reverse=True)
    for path in found:
        if path.is_file():
            try:
                history = json.loads(path.read_text()).get("log_history", [])
            except (json.JSONDecodeError, AttributeError):
                raise SettingsError(f"{path} is not TRL's trainer state (JSON); pass TRL's output_dir") from None
            return [h for h in history if isinstance(h, dict) and "step" in h]
    return []


def import_trl(folder: str | Path, model: str | Path | None = None) -> tuple[list[dict], dict[int, list[dict]]]:
    """TRL's run in ``folder`` -> (its step rows: log_history, else each step's mean reward; samples by step).

    ``model``: a save_pretrained folder (the trained model, or the one TRL started from) that tokenizes and scores
    each completion."""
    path = Path(folder)
    table = completion_table(path)
    if model is not None:
        from pglab.models.hf import load_causal_lm

        net, tokenizer = load_causal_lm(str(model), progress=False)
        net.eval()
        lines = [scored_line(row, i, net, tokenizer)
                 for i, row in track(enumerate(table), "scoring TRL's completions", total=len(table))]
    else:
        lines = [sample_line(row, i, (words(as_text(row["prompt"])), words(as_text(row["completion"]))))
                 for i, row in enumerate(table)]
    samples: dict[int, list[dict]] = {}
    for line in lines:
        samples.setdefault(line["step"], []).append(line)
    steps = log_history(path) or [{"step": step, "reward": sum(r["reward"] for r in rows) / len(rows)}
                                  for step, rows in sorted(samples.items())]
    return steps, samples


def write_samples(samples: dict[int, list[dict]], out: str | Path) -> Path:
    """Write ``samples`` (by step) as ``out/samples.jsonl``, step by step -> its path."""
    folder = RunDir(out)
    folder.write_lines(SAMPLES, [line for step in sorted(samples) for line in samples[step]])
    return folder / SAMPLES


__all__ = ["COMPLETIONS", "FIXED", "STATE", "as_text", "completion_table", "import_trl", "is_trl_run",
           "log_history", "reward_columns", "sample_line", "scored_line", "words", "write_samples"]
