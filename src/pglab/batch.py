"""TokenBatch: the one token-batch type shared by the token agents and the language-model trainer.

A batch holds B sequences of T token positions, left-aligned and right-padded. Each position has
an owner: padding, prompt (text the policy did not write), policy (a sampled action) or tool
(text an environment appended). Log-probabilities are aligned with ``ids``:
``logp[:, t] = log pi(ids[:, t] | ids[:, :t])`` and ``logp[:, 0] = 0``, so ``action_mask`` is 0 at
position 0 and every per-token quantity has the shape of ``ids``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch

PAD, PROMPT, POLICY, TOOL = 0, 1, 2, 3
"""Values of ``TokenBatch.owner``."""
OWNER_NAMES = ("pad", "prompt", "policy", "tool")


@dataclass
class AllowedIds:
    """The ids a constrained policy may write at each position (``pglab.sampling.call_grammar``): ``index`` [B, T]
    long picks a row of ``table`` [S, V] bool, whose row 0 allows every id (an unconstrained position)."""

    index: torch.Tensor
    table: torch.Tensor

    def mask(self, rows: torch.Tensor | slice, start: int, end: int) -> torch.Tensor:
        """[b, end - start, V] bool: the allowed ids of positions start..end - 1 of ``rows``."""
        return self.table[self.index[rows, start:end]]


@dataclass
class TokenBatch:
    """Sequences of token ids with their masks, owners, rewards and optional log-probabilities.

    ids [B, T] long; attention_mask [B, T] (1 on real tokens); action_mask [B, T] (1 on policy
    tokens, 0 at position 0); owner [B, T] long (PAD, PROMPT, POLICY, TOOL); rewards [B] and/or
    token_rewards [B, T]; group [B] long (rows with the same value answer the same prompt or task);
    logp_old and ref_logp [B, T] optional, aligned with ids; rollout_logp [B, T] optional: the sampler's
    log-probs of the tokens when the sampler is not the trained policy (stale parameters, another kernel), read by
    the mismatch corrections; allowed: each position's allowed ids when the sampler was constrained (scored
    renormalised over them); info: one entry per row (the collector's EpisodeLog).
    """

    ids: torch.Tensor
    attention_mask: torch.Tensor
    action_mask: torch.Tensor
    owner: torch.Tensor
    group: torch.Tensor
    rewards: torch.Tensor | None = None
    token_rewards: torch.Tensor | None = None
    logp_old: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    rollout_logp: torch.Tensor | None = None
    allowed: AllowedIds | None = None
    info: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.ids.dim() != 2:
            raise ValueError(f"ids has shape {tuple(self.ids.shape)}; pass [B, T]")
        B, T = self.ids.shape
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, torch.Tensor):
                continue
            expected = (B,) if f.name in ("rewards", "group") else (B, T)
            if tuple(value.shape) != expected:
                raise ValueError(f"{f.name} has shape {tuple(value.shape)}; pass {list(expected)} to match ids")
        if self.rewards is None and self.token_rewards is None:
            raise ValueError("a TokenBatch needs rewards [B] or token_rewards [B, T]")
        if self.action_mask[:, 0].any():
            raise ValueError("action_mask must be 0 at position 0: the first token has no log-probability")
        if self.allowed is not None and tuple(self.allowed.index.shape) != (B, T):
            raise ValueError(f"allowed.index has shape {tuple(self.allowed.index.shape)}; pass [{B}, {T}] to match ids")
        if self.info and len(self.info) != B:
            raise ValueError(f"info has {len(self.info)} entries for {B} rows; pass one per row")

    @property
    def batch_size(self) -> int:
        return self.ids.shape[0]

    def to(self, device: torch.device | str) -> TokenBatch:
        """A copy with every tensor on ``device``."""
        values = {f.name: _map(getattr(self, f.name), lambda t: t.to(device)) for f in fields(self)}
        if self.allowed is not None:
            values["allowed"] = AllowedIds(self.allowed.index.to(device), self.allowed.table.to(device))
        return TokenBatch(**values)

    def select(self, index: torch.Tensor | list[int] | slice) -> TokenBatch:
        """The rows ``index`` (a slice, a list of ints or a bool/long tensor) as a new TokenBatch."""
        if isinstance(index, torch.Tensor) and index.dtype == torch.bool:
            index = index.nonzero().flatten()
        rows = range(self.batch_size)[index] if isinstance(index, slice) else [int(i) for i in index]
        picked = torch.as_tensor(list(rows), dtype=torch.long, device=self.ids.device)
        values = {f.name: _map(getattr(self, f.name), lambda t: t.index_select(0, picked)) for f in fields(self)}
        values["info"] = [self.info[i] for i in rows] if self.info else []
        if self.allowed is not None:
            values["allowed"] = AllowedIds(self.allowed.index.index_select(0, picked), self.allowed.table)
        return TokenBatch(**values)


def _map(value: Any, fn) -> Any:
    return fn(value) if isinstance(value, torch.Tensor) else value
