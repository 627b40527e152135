"""From per-token terms to a scalar loss, and one guarded optimizer step.

The aggregation mode sets the weight of every policy token in the gradient (L_n = policy tokens
of trajectory n, B = trajectories, C = ``norm_const``):

====================  ===================  ====================
mode                  weight of a token    total of trajectory n
====================  ===================  ====================
token_mean            1 / sum_k L_k        L_n / sum_k L_k
seq_mean_token_sum    1 / B                L_n / B
seq_mean_token_mean   1 / (B L_n)          1 / B
constant              1 / C                L_n / C
====================  ===================  ====================

Only ``seq_mean_token_sum`` is the estimator as derived; the others rescale it.
"""

from __future__ import annotations

import math

import torch

from pglab.estimators._validate import as_mask, check_finite, check_mode

MODES = ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "constant")


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of x over mask-1 entries; x, mask [B, T] -> scalar (dim=None) or reduced along dim.

    Along ``dim``, a slice with no mask-1 entry has mean 0 (it contributes nothing).
    """
    mask = as_mask("mask", mask, "x", x)
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
) -> torch.Tensor:
    """Reduce per-token terms [B, T] under mask [B, T] to a scalar; ``mode`` sets each token's weight."""
    check_mode(mode, MODES, "aggregation mode")
    if per_token.dim() != 2:
        raise ValueError(f"per_token must be [B, T], got shape {tuple(per_token.shape)}")
    if mode == "token_mean":
        return masked_mean(per_token, mask)
    mask = as_mask("mask", mask, "per_token", per_token)
    if mode == "seq_mean_token_sum":
        return (per_token * mask).sum(-1).mean()
    if mode == "seq_mean_token_mean":
        return masked_mean(per_token, mask, dim=-1).mean()
    if norm_const is None or not norm_const > 0:
        raise ValueError("mode='constant' needs a positive norm_const, e.g. batch_size * max_policy_tokens")
    return (per_token * mask).sum() / norm_const


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
    check_finite("advantages", advantages)
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


def policy_gradient_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    *,
    max_grad_norm: float | None = 1.0,
    skip_zero_grad: bool = True,
) -> dict:
    """Backward, clip the global gradient norm, and step, unless the gradient carries no signal.

    Returns dict(loss, grad_norm (before clipping), skipped, reason). The step is skipped (the
    parameters stay bit-identical, no optimizer state moves) when the gradient is not finite
    (reason "non-finite gradient") or, with ``skip_zero_grad``, exactly zero (reason "zero
    gradient": e.g. a batch whose advantages are all 0, where Adam's momentum would still move).
    """
    optimizer.zero_grad(set_to_none=False)
    loss.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    grads = [p.grad for p in params]
    grad_norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))) if grads else 0.0
    reason = None
    if not math.isfinite(grad_norm):
        reason = "non-finite gradient"
    elif grad_norm == 0.0 and skip_zero_grad:
        reason = "zero gradient"
    if reason is None:
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()
    else:
        optimizer.zero_grad(set_to_none=False)
    loss_value = float(loss.detach())
    return {"loss": loss_value, "grad_norm": grad_norm, "skipped": reason is not None, "reason": reason}


__all__ = ["MODES", "masked_mean", "aggregate_loss", "reinforce_loss", "policy_gradient_step"]
