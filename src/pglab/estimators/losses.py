"""From per-token terms to a scalar loss.

The aggregation mode sets the weight of every policy token in the gradient (L_n = policy tokens
of trajectory n, B = trajectories, C = ``norm_const``):

=======================  ===================  ====================
mode                     weight of a token    total of trajectory n
=======================  ===================  ====================
token_mean               1 / sum_k L_k        L_n / sum_k L_k
seq_mean_token_sum       1 / B                L_n / B
seq_mean_token_mean      1 / (B L_n)          1 / B
constant                 1 / C                L_n / C
token_sum                1                    L_n
seq_mean_token_sum_norm  1 / (B C)            L_n / (B C)
prompt_mean              1 / (P L_g)          L_n / (P L_g)
=======================  ===================  ====================

Only ``seq_mean_token_sum`` is the estimator as derived; the others rescale it. In
``seq_mean_token_sum_norm`` (Dr. GRPO's) C is ``norm_const``, by default T, the padded length; verl's mode of
that name leaves out the 1 / B (it is ``constant`` with C = T). ``prompt_mean`` averages over the P prompts
(``group`` [B] names each reply's prompt) the token mean of each prompt's replies, L_g policy tokens in all.
"""

from __future__ import annotations

import torch

from pglab.estimators._validate import as_mask, check_dim, check_finite, check_mode, tensor

MODES = ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "constant")
"""The modes every trainer takes (UpdateSpec, train-lm's --aggregation)."""
EXTRA_MODES = ("token_sum", "seq_mean_token_sum_norm", "prompt_mean")
"""Modes of aggregate_loss alone: pg_update's split over micro-batches and ranks knows only MODES."""


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of x over mask-1 entries; x, mask [B, T] -> scalar (dim=None) or reduced along dim.

    Along ``dim``, a slice with no mask-1 entry has mean 0 (it contributes nothing).
    """
    x = tensor("x", x)
    mask = as_mask("mask", tensor("mask", mask), "x", x)
    if dim is not None:
        dim = check_dim("x", x, dim)
    if dim is None:
        count = mask.sum()
        if count == 0:
            raise ValueError("mask has no 1 entry: there is no policy token to average over")
        return (x * mask).sum() / count
    return (x * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def aggregate_loss(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token_mean",
    norm_const: float | None = None,
    *,
    group: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce per-token terms [B, T] under mask [B, T] to a scalar; ``mode`` sets each token's weight.

    ``group`` [B] (prompt ids) is read by ``prompt_mean`` alone.
    """
    check_mode(mode, MODES + EXTRA_MODES, "aggregation mode")
    per_token, mask = tensor("per_token", per_token), tensor("mask", mask)
    if per_token.dim() != 2:
        raise ValueError(f"per_token must be [B, T], got shape {tuple(per_token.shape)}")
    if mode == "token_mean":
        return masked_mean(per_token, mask)
    mask = as_mask("mask", mask, "per_token", per_token)
    if mode == "seq_mean_token_sum":
        return (per_token * mask).sum(-1).mean()
    if mode == "seq_mean_token_mean":
        return masked_mean(per_token, mask, dim=-1).mean()
    if mode in EXTRA_MODES:
        return reduce_extra_mode(per_token, mask, mode, norm_const, group)
    if norm_const is None or not norm_const > 0:
        raise ValueError("mode='constant' needs a positive norm_const, e.g. batch_size * max_policy_tokens")
    return (per_token * mask).sum() / norm_const


def reduce_extra_mode(per_token: torch.Tensor, mask: torch.Tensor, mode: str, norm_const: float | None,
                      group: torch.Tensor | None) -> torch.Tensor:
    """The EXTRA_MODES reductions of per_token, mask [B, T] (mask already 0/1) to a scalar; see the module's table."""
    if mode == "token_sum":
        return (per_token * mask).sum()
    if mode == "seq_mean_token_sum_norm":
        if norm_const is not None and not norm_const > 0:
            raise ValueError("mode='seq_mean_token_sum_norm' needs a positive norm_const (the longest reply allowed), "
                             "or None for the padded length T")
        return (per_token * mask).sum(-1).mean() / (norm_const or per_token.shape[-1])
    if group is None:
        raise ValueError("mode='prompt_mean' needs group [B], the prompt id of each row (e.g. batch.group)")
    group = tensor("group", group)
    if group.shape != per_token.shape[:1]:
        raise ValueError(f"group must be [B] with B={per_token.shape[0]}, got shape {tuple(group.shape)}")
    index = torch.unique(group, return_inverse=True)[1].to(per_token.device)
    prompts = torch.zeros(int(index.max()) + 1, dtype=per_token.dtype, device=per_token.device)
    sums = prompts.index_add(0, index, (per_token * mask).sum(-1))
    tokens = prompts.index_add(0, index, mask.sum(-1))
    return (sums / tokens.clamp(min=1)).mean()


def reinforce_loss(
    logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token_mean",
    norm_const: float | None = None,
) -> torch.Tensor:
    """Surrogate -A * log pi on policy tokens; logp, mask [B, T], advantages [B] or [B, T] -> scalar.

    The advantages are detached: they are constants in the derivation, and a gradient through
    them (a baseline read off the model's own outputs) biases the estimator.
    """
    logp, advantages = tensor("logp", logp), tensor("advantages", advantages)
    check_finite("advantages", advantages)
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, T], got shape {tuple(logp.shape)}")
    if advantages.dim() == 1:
        if advantages.shape[0] != logp.shape[0]:
            raise ValueError(f"advantages has shape {tuple(advantages.shape)} but logp has B={logp.shape[0]}; "
                             "pass one advantage per row")
        advantages = advantages[:, None]
    elif advantages.shape != logp.shape:
        raise ValueError(
            f"advantages has shape {tuple(advantages.shape)}; pass [B] or [B, T] like logp {tuple(logp.shape)}"
        )
    return aggregate_loss(-advantages.detach() * logp, mask, mode, norm_const)


__all__ = ["EXTRA_MODES", "MODES", "masked_mean", "aggregate_loss", "reinforce_loss"]
