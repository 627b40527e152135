"""One guarded optimizer step, shared by every trainer: clip, and skip steps that carry no signal."""

from __future__ import annotations

import math

import torch


def policy_gradient_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    *,
    max_grad_norm: float | None = 1.0,
    skip_zero_grad: bool = True,
    zero_grad: bool = True,
) -> dict:
    """Backward, clip the global gradient norm, and step, unless the gradient carries no signal.

    Returns dict(loss, grad_norm (before clipping), skipped, reason). The step is skipped (the
    parameters stay bit-identical, no optimizer state moves) when the gradient is not finite
    (reason "non-finite gradient") or, with ``skip_zero_grad``, exactly zero (reason "zero
    gradient": e.g. a batch whose advantages are all 0, where Adam's momentum would still move).
    ``zero_grad=False`` adds this loss's gradient to the ones already accumulated (gradient accumulation).
    """
    if zero_grad:
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
