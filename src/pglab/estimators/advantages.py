"""Advantages for token policies: one dispatcher, one set of names, for every trainer.

The baseline acts on each reply's (or episode's) score, never on a reward-to-go position by
position: two replies with equal scores get exactly zero advantage whatever their lengths.
Per-token rewards (the KL penalty of llm-ch6 §6.12, a format penalty on one call's tokens) are
added after, as reward-to-go over the policy positions, with no baseline.

Kinds (TRL's names where TRL has one):
  reinforce  score - b, with b a running baseline the caller keeps (``EMABaseline``)
  rloo       leave-one-out within each group of ``group_size`` consecutive rows (llm-ch6 §6.11)
  grpo       group-normalised: (score - group mean) / (std + eps), std over the group, the batch or none
  dr_grpo    centred only (Dr. GRPO)
"""

from __future__ import annotations

import torch

from pglab.estimators._validate import check_mode, tensor
from pglab.estimators.baselines import group_normalize, leave_one_out
from pglab.estimators.returns import discounted_returns

KINDS = ("reinforce", "rloo", "grpo", "dr_grpo")
SCALES = ("group", "batch", "none")


def uses_groups(kind: str) -> bool:
    """Whether ``kind`` compares the replies to one prompt (every kind but ``reinforce``)."""
    check_mode(kind, KINDS, "advantage")
    return kind != "reinforce"


def check_groups(kind: str, rows: int, group_size: int) -> None:
    """Raise ValueError unless ``kind`` can be formed over ``rows`` rows in groups of ``group_size``."""
    if not uses_groups(kind):
        return
    if group_size < 2:
        raise ValueError(f"advantage {kind!r} compares the replies to one prompt: pass group_size >= 2, "
                         f"got {group_size}")
    if rows % group_size:
        raise ValueError(f"{rows} rows do not split into groups of {group_size}: sample group_size replies "
                         "per prompt, in consecutive rows")


def advantages(scores: torch.Tensor, kind: str, group_size: int = 1, *, baseline: float = 0.0,
               scale: str = "group", unbiased: bool = False, eps: float = 1e-8) -> torch.Tensor:
    """Per-reply advantages; scores [B] (groups of ``group_size`` consecutive rows) -> [B].

    ``baseline`` is subtracted for ``reinforce``; ``scale``, ``unbiased`` and ``eps`` set GRPO's
    divisor (the book's default: population std, eps 1e-8; TRL's: ``unbiased=True, eps=1e-4``).
    """
    scores = tensor("scores", scores)
    if scores.dim() != 1:
        raise ValueError(f"scores has shape {tuple(scores.shape)}; pass one score per row, [B]")
    check_groups(kind, scores.shape[0], group_size)
    check_mode(scale, SCALES, "scale")
    if kind == "reinforce":
        return scores - baseline
    groups = scores.reshape(-1, group_size)
    if kind == "rloo":
        grouped = leave_one_out(groups)
    else:
        grouped = group_normalize(groups, scale=scale if kind == "grpo" else "none", unbiased=unbiased, eps=eps)
    return grouped.reshape(-1)


def per_token(reply_advantages: torch.Tensor, mask: torch.Tensor, *, token_rewards: torch.Tensor | None = None,
              gamma: float = 1.0) -> torch.Tensor:
    """reply_advantages [B] at every policy position of mask [B, T], plus the reward-to-go of token_rewards.

    -> [B, T], 0 off the policy positions.
    """
    mask = tensor("mask", mask)
    if mask.dim() != 2 or mask.shape[0] != reply_advantages.shape[0]:
        raise ValueError(f"mask has shape {tuple(mask.shape)}; pass [B, T] with B = {reply_advantages.shape[0]} rows")
    out = reply_advantages.to(mask.dtype if mask.is_floating_point() else reply_advantages.dtype)[:, None] * mask
    if token_rewards is not None:
        out = out + discounted_returns(token_rewards, gamma, mask=mask)
    return out


def token_advantages(scores: torch.Tensor, mask: torch.Tensor, kind: str, group_size: int = 1, *,
                     token_rewards: torch.Tensor | None = None, gamma: float = 1.0, **options) -> torch.Tensor:
    """Per-token advantages; scores [B], mask [B, T] -> [B, T], 0 off the policy positions.

    The reply's advantage (:func:`advantages` of ``scores``, with ``options``) at every policy
    position, plus the reward-to-go of ``token_rewards`` [B, T] (discount ``gamma``) when given.
    """
    return per_token(advantages(scores, kind, group_size, **options), mask, token_rewards=token_rewards, gamma=gamma)


def zero_advantage_share(adv: torch.Tensor, group_size: int) -> float:
    """Share of groups whose advantages are all exactly 0 (they carry no gradient); adv [B] or [B, T]."""
    adv = tensor("adv", adv)
    if adv.shape[0] % group_size:
        raise ValueError(f"{adv.shape[0]} rows do not split into groups of {group_size}")
    per_group = adv.reshape(adv.shape[0] // group_size, -1).abs().amax(-1)
    return float((per_group == 0).double().mean())


__all__ = ["KINDS", "SCALES", "advantages", "check_groups", "per_token", "token_advantages", "uses_groups",
           "zero_advantage_share"]
