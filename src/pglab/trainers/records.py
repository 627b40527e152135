"""What a token run records of its episodes: a bounded sample of rows per recorded step, every token's numbers.

Every token trainer (TinyAgent's, the HF agents' and train-lm's) writes ``samples.jsonl`` in its run folder: one
JSON line per (step, recorded row), with per-token columns (ids, text, owner, the log-prob the update used, the
sampler's and the reference's, the advantage, the importance ratio, whether the loss clipped or a correction
masked the token). ``pglab inspect`` reads it.

Recording is off the hot path and changes no number of the run: the recorded rows are scored again under
``torch.no_grad`` with the RNG state forked (a few rows, once per recorded step), and the per-token flags come from
the update's own functions (:func:`pglab.trainers.update.token_terms`, ``surrogate_loss``, ``correction``): a
token is clipped where the surrogate passes no gradient to it although its advantage is not 0.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pglab.batch import TokenBatch
from pglab.estimators.advantages import per_token
from pglab.models.policy import TokenPolicy
from pglab.runtime.distributed import unwrap
from pglab.sampling.scoring import sequence_log_probs
from pglab.trainers.loop import RunDir
from pglab.trainers.update import UpdateSpec, correction, reply_advantages, surrogate_loss, token_terms

SAMPLES = "samples.jsonl"
"""The JSON-lines file of the recorded rows in the run folder."""
TokenText = Callable[[Sequence[int]], list[str]]
"""Token ids -> the text of each token (one string per id)."""


@dataclass(frozen=True)
class SampleBound:
    """How much a run records: at most ``total_rows`` lines of at most ``tokens`` positions each."""

    rows: int = 4
    """Rows (episodes or replies) recorded per recorded step, spread evenly over the batch."""
    tokens: int = 512
    """Positions kept per row: the first ones (prompt included); a longer row is cut and marked truncated."""
    total_rows: int = 400
    """Rows over the whole run: every k-th step is recorded, k = ceil(steps x rows / total_rows), and the last."""
    digits: int = 4
    """Decimals kept of every float."""

    def __post_init__(self) -> None:
        for name in ("rows", "tokens", "total_rows", "digits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SampleBound.{name} must be a whole number >= 1, got {value!r}")

    def every(self, steps: int) -> int:
        """Steps between recorded steps of a ``steps``-step run."""
        return max(1, math.ceil(steps * self.rows / self.total_rows))


def local(policy: TokenPolicy) -> TokenPolicy:
    """``policy`` on its bare model: a DDP wrapper's forward would wait for the ranks that do not record."""
    bare = copy.copy(policy)
    bare.module = unwrap(policy.module)
    return bare


def recorded_rows(batch_size: int, rows: int) -> list[int]:
    """``rows`` row indices spread evenly over ``batch_size`` rows (all of them when there are fewer)."""
    if batch_size <= rows:
        return list(range(batch_size))
    return [i * batch_size // rows for i in range(rows)]


def token_quantities(logp: torch.Tensor, rows: TokenBatch, reply_adv: torch.Tensor,
                     spec: UpdateSpec) -> dict[str, torch.Tensor]:
    """The per-token numbers of the update of ``spec`` on ``rows``; logp [B, T] (0 off the policy positions),
    reply_adv [B] -> dict of [B, T]: adv (what the loss weighs each token by), clipped (the surrogate passes no
    gradient to the token though its advantage is not 0), ratio (pi / pi_old, when the loss reads pi_old),
    is_weight and masked (the correction's weight, and where it is 0, when there is a correction)."""
    logp = logp.detach()
    mask, old, _, token_rewards = token_terms(logp, rows, spec)
    adv = per_token(reply_adv.to(logp.dtype), mask, token_rewards=token_rewards)
    with torch.enable_grad():
        leaf = logp.clone().requires_grad_(True)
        per_tok, _ = surrogate_loss(leaf, old, adv, mask, spec)
        (grad,) = torch.autograd.grad(per_tok.sum(), leaf, allow_unused=True)
    grad = torch.zeros_like(logp) if grad is None else grad
    policy = mask.bool()
    found = {"adv": adv, "clipped": policy & (adv != 0) & (grad == 0)}
    if old is not None:
        found["ratio"] = torch.exp(logp - old) * mask
    if spec.is_correction != "none":
        rollout = old if rows.rollout_logp is None else rows.rollout_logp.to(logp.dtype)
        weights, _ = correction(old, rollout, mask, spec)
        found.update(is_weight=weights, masked=policy & (weights == 0))
    return found


def _column(values: torch.Tensor, keep: torch.Tensor, digits: int) -> list:
    """One row's values at the kept positions as JSON numbers (bools as 0/1)."""
    picked = values[keep]
    if picked.dtype == torch.bool:
        return picked.to(torch.int8).tolist()
    if picked.is_floating_point():
        return [round(v, digits) for v in picked.to(torch.float64).tolist()]
    return picked.tolist()


def row_lines(step: int, rows: TokenBatch, index: Sequence[int], columns: dict[str, torch.Tensor],
              reply_adv: torch.Tensor, token_text: TokenText | None, bound: SampleBound) -> list[dict[str, Any]]:
    """The JSON lines of ``rows`` (the batch's rows ``index``): per row its step, place, reward, pass and ending,
    and per kept position (attention 1, the first ``bound.tokens``) every column of ``columns`` [B, T]."""
    lines = []
    for b, row in enumerate(index):
        keep = rows.attention_mask[b].bool()
        real = int(keep.sum())
        keep &= keep.cumsum(0) <= bound.tokens
        ids = rows.ids[b][keep].tolist()
        log = rows.info[b] if rows.info else None
        record = getattr(log, "record", None)
        line = {"step": step, "row": int(row), "group": int(rows.group[b]),
                "reward": round(float(rows.rewards[b]), bound.digits) if rows.rewards is not None else None,
                "passed": record.passed if record is not None else None,
                "end": getattr(log, "end", None), "advantage": round(float(reply_adv[b]), bound.digits),
                "truncated": real > bound.tokens, "ids": ids, "text": token_text(ids) if token_text else None,
                "owner": rows.owner[b][keep].tolist()}
        line.update({name: _column(values[b], keep, bound.digits) for name, values in columns.items()})
        lines.append(line)
    return lines


class SampleRecorder:
    """Writes the recorded rows of a run's steps to ``samples.jsonl`` (``folder`` None: records nothing); a line's
    step is the 0-based step plus ``first_step`` (1 where the run's step rows count from 1, as train-lm's)."""

    def __init__(self, folder: str | Path | None, steps: int, token_text: TokenText | None = None,
                 bound: SampleBound = SampleBound(), first_step: int = 0):
        self.folder = RunDir(folder) if folder is not None else None
        self.path = self.folder / SAMPLES if self.folder is not None else None
        self.steps, self.token_text, self.bound, self.first_step = steps, token_text, bound, first_step
        self.every = bound.every(steps)
        self.started = False

    def due(self, step: int) -> bool:
        """Whether step ``step`` (0-based) is recorded."""
        return self.path is not None and (step % self.every == 0 or step == self.steps - 1)

    def _start(self, step: int) -> None:
        """Drop lines of steps >= ``step`` left by an interrupted run (a resumed run records them again)."""
        self.started = True
        if self.path.exists():
            rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
            self.folder.write_lines(SAMPLES, [row for row in rows if row["step"] < step + self.first_step])

    def record(self, step: int, policy: TokenPolicy, batch: TokenBatch, spec: UpdateSpec, *, baseline: float = 0.0,
               start: int = 1, sampler_logp: torch.Tensor | None = None) -> None:
        """Append the recorded rows of ``batch`` at ``step``, scored by ``policy`` as the coming update scores them.

        sampler_logp [B, T]: the sampler's log-probs when the batch has no rollout_logp (the collector's own)."""
        if not self.due(step):
            return
        if not self.started:
            self._start(step)
        index = recorded_rows(batch.batch_size, self.bound.rows)
        rows = batch.select(index)
        dtype = next(policy.module.parameters()).dtype
        reply_adv = reply_advantages(batch.rewards.to(dtype), spec, baseline)[index]
        devices = [rows.ids.device] if rows.ids.is_cuda else []
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            logp = sequence_log_probs(local(policy), rows, start=start, chunk_tokens=rows.ids.numel())
        logp = torch.where(rows.action_mask.bool(), logp, 0.0)
        mask = rows.action_mask.to(logp.dtype)
        columns = {"logp": logp, **token_quantities(logp, rows, reply_adv.to(logp.dtype), spec)}
        sampler = rows.rollout_logp if rows.rollout_logp is not None else (
            sampler_logp[index].to(logp.device) if sampler_logp is not None else None)
        for name, values in (("sampler_logp", sampler), ("ref_logp", rows.ref_logp)):
            if values is not None:
                columns[name] = values.to(logp.dtype) * mask
        lines = row_lines(step + self.first_step, rows.to("cpu"), index, {k: v.cpu() for k, v in columns.items()},
                          reply_adv.cpu(), self.token_text, self.bound)
        for line in lines:
            self.folder.append_line(SAMPLES, line)


def text_of(decode: Callable[[list[int]], str], separator: str = "") -> TokenText:
    """A TokenText from a tokenizer's decode of a list of ids: each token decoded alone, then ``separator`` (a word
    tokenizer's space between words)."""
    return lambda ids: [decode([int(i)]) + separator for i in ids]


__all__ = ["SAMPLES", "SampleBound", "SampleRecorder", "TokenText", "recorded_rows", "row_lines", "text_of",
           "token_quantities"]
