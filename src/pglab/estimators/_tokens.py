"""Inputs and masked reductions shared by the token losses, the mismatch corrections and the KL terms.

Every tensor is [B, T] (B replies, T positions) unless noted; mask [B, T] is 1 on the policy's tokens.
Mask-0 positions may hold anything (padding, -inf): every reduction selects the policy tokens with
``torch.where`` rather than multiplying, so nothing there reaches a value or a gradient.
"""

from __future__ import annotations

import math

import torch

from pglab.estimators._validate import as_mask, check_finite, check_same_shape, tensor


def policy_tokens(logp: object, mask: object, name: str = "logp") -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs [B, T] (0 off the policy tokens, gradient kept on them) and mask [B, T] as 0/1 in their dtype."""
    logp = tensor(name, logp)
    if logp.dim() != 2:
        raise ValueError(f"{name} must be [B, T], got shape {tuple(logp.shape)}")
    mask = as_mask("mask", tensor("mask", mask), name, logp)
    return on_tokens(logp, mask), mask


def frozen(name: str, x: object, like: torch.Tensor, like_name: str = "logp") -> torch.Tensor:
    """Log-probs of a policy that is not trained (old, rollout, proximal, reference): [B, T], detached."""
    x = tensor(name, x)
    check_same_shape(name, x, like_name, like)
    return x.detach().to(like.dtype)


def token_advantages(advantages: object, logp: torch.Tensor) -> torch.Tensor:
    """advantages [B] (one per reply) or [B, T] -> [B, T], detached, in logp's dtype."""
    advantages = tensor("advantages", advantages)
    check_finite("advantages", advantages)
    if advantages.dim() == 1 and advantages.shape[0] == logp.shape[0]:
        return advantages.detach().to(logp.dtype)[:, None].expand_as(logp)
    if advantages.shape != logp.shape:
        raise ValueError(f"advantages has shape {tuple(advantages.shape)}; pass [B] or [B, T] like logp "
                         f"{tuple(logp.shape)}")
    return advantages.detach().to(logp.dtype)


def reply_advantages(advantages: object, logp: torch.Tensor) -> torch.Tensor:
    """advantages [B], one per reply, detached, in logp's dtype (for the sequence-level losses)."""
    advantages = tensor("advantages", advantages)
    check_finite("advantages", advantages)
    if advantages.shape != logp.shape[:1]:
        raise ValueError(f"a sequence-level loss needs one advantage per reply, [B] with B={logp.shape[0]}; got "
                         f"shape {tuple(advantages.shape)} (the -token variants take [B, T])")
    return advantages.detach().to(logp.dtype)


def on_tokens(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x [B, T] on the policy tokens, exactly 0 elsewhere."""
    return torch.where(mask > 0, x, 0.0)


def log_ratio(logp: torch.Tensor, other: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log(pi / other) per token [B, T], 0 off the policy tokens."""
    return on_tokens(logp - other, mask)


def reply_lengths(mask: torch.Tensor) -> torch.Tensor:
    """Policy tokens per reply |y_i| [B] (at least 1, so an empty reply divides by 1)."""
    return mask.sum(-1).clamp(min=1)


def reply_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x [B, T] over each reply's policy tokens -> [B] (0 for a reply with none)."""
    return on_tokens(x, mask).sum(-1) / reply_lengths(mask)


def token_average(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x [B, T] over the policy tokens: a detached scalar (0 with no policy token)."""
    return (on_tokens(x, mask).sum() / mask.sum().clamp(min=1)).detach()


def token_share(flags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Share of the policy tokens where flags [B, T] (bool) holds: a detached scalar (0 with no policy token)."""
    return ((flags & (mask > 0)).sum().to(mask.dtype) / mask.sum().clamp(min=1)).detach()


def reply_share(flags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Share of the replies with a policy token where flags [B] (bool) holds: a detached scalar."""
    replies = mask.sum(-1) > 0
    return ((flags & replies).sum().to(mask.dtype) / replies.sum().clamp(min=1)).detach()


def check_at_least(name: str, value: object, bound: float, *, strict: bool = False) -> float:
    """``value`` as a float, when it is a number >= bound (> bound when ``strict``)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    if not ok or value < bound or (strict and value == bound):
        raise ValueError(f"{name} must be a number {'>' if strict else '>='} {bound}, got {value!r}")
    return float(value)


def check_bounds(low: object, high: object) -> tuple[float, float]:
    """Ratio bounds 0 <= low <= high (high may be inf)."""
    low, high = check_at_least("low", low, 0.0), check_at_least("high", high, 0.0)
    if low > high:
        raise ValueError(f"low must not exceed high, got low={low} and high={high}")
    return low, high
