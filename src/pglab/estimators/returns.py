"""Returns along the time axis: the backward scan, reward-to-go, and GAE.

Mask convention (SPEC): ``mask[..., t] = 1`` where token t was sampled by the policy. Mask-0
positions (prompt, template, tool output) are not time steps: discounting and bootstrapping pass
over them and their output is 0. A reward placed on a mask-0 position is credited, undiscounted, to
the nearest policy position before it; before the first policy position it is ignored.
``dones[..., t] = 1`` ends an episode after position t (terminal: nothing flows back across it).
"""

from __future__ import annotations

import torch

from pglab.estimators._validate import as_mask, check_finite, check_same_shape


def _prepare(x: torch.Tensor, mask, dones, x_name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if x.dim() == 0:
        raise ValueError(f"{x_name} must have a time axis: pass a tensor of shape [..., T]")
    check_finite(x_name, x)
    x = x if x.is_floating_point() else x.to(torch.get_default_dtype())
    mask = as_mask("mask", mask, x_name, x)
    dones = as_mask("dones", dones, x_name, x) if dones is not None else torch.zeros_like(x)
    return x, mask, dones


def backward_scan(
    x: torch.Tensor,
    factor: float | torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    dones: torch.Tensor | None = None,
) -> torch.Tensor:
    """y_t = x_t + factor * y_{t+1} along the last dim; x, mask, dones [..., T] -> y [..., T].

    ``factor`` is a float or a tensor broadcastable to ``x`` (a per-position factor). Mask-0
    positions are skipped (their x is credited to the previous policy position, their y is 0);
    a done at t stops the scan from carrying anything from t+1 back to t.
    """
    return _scan(x, factor, mask, dones, "x")


def _scan(x, factor, mask, dones, x_name: str) -> torch.Tensor:
    x, mask, dones = _prepare(x, mask, dones, x_name)
    factor = torch.as_tensor(factor, dtype=x.dtype).expand_as(x)
    out = torch.zeros_like(x)
    carry = torch.zeros_like(x[..., 0])      # y at the next policy position of this episode
    pending = torch.zeros_like(x[..., 0])    # x on mask-0 positions since that policy position
    for t in range(x.shape[-1] - 1, -1, -1):
        live = 1.0 - dones[..., t]
        carry, pending = carry * live, pending * live
        m = mask[..., t]
        y = x[..., t] + pending + factor[..., t] * carry
        out[..., t] = m * y
        carry = torch.where(m.bool(), y, carry)
        pending = torch.where(m.bool(), torch.zeros_like(pending), pending + x[..., t])
    return out


def discounted_returns(
    rewards: torch.Tensor,
    gamma: float = 1.0,
    *,
    mask: torch.Tensor | None = None,
    dones: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reward-to-go G_t = r_t + gamma * G_{t+1}; rewards, mask, dones [..., T] -> G [..., T]."""
    if not 0.0 <= float(gamma) <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    return _scan(rewards, gamma, mask, dones, "rewards")


def next_policy_values(
    values: torch.Tensor,
    mask: torch.Tensor,
    dones: torch.Tensor,
    bootstrap: torch.Tensor | None = None,
) -> torch.Tensor:
    """V(s_{t+1}) for every position: the value at the next policy position of the same episode.

    values, mask, dones [..., T]; bootstrap [...] is the value after the last position of a
    truncated row (0 when None: the row ends in a terminal state). -> [..., T]
    """
    nxt = torch.zeros_like(values)
    carry = torch.zeros_like(values[..., 0]) if bootstrap is None else bootstrap.to(values.dtype).clone()
    for t in range(values.shape[-1] - 1, -1, -1):
        carry = carry * (1.0 - dones[..., t])
        nxt[..., t] = carry
        carry = torch.where(mask[..., t].bool(), values[..., t], carry)
    return nxt


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    gamma: float,
    lam: float,
    *,
    mask: torch.Tensor | None = None,
    dones: torch.Tensor | None = None,
    bootstrap: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation; rewards, values, mask, dones [..., T] -> (advantages, returns).

    delta_t = r_t + gamma V(s_{t+1}) - V(s_t) and A_t = delta_t + gamma lam A_{t+1} over policy
    positions; ``returns = A + V`` (the lambda-return, the critic's target), 0 on mask-0 positions.
    A row ends terminally unless ``bootstrap`` [...] gives the value of the state after it.
    lam = 0 gives the TD errors, lam = 1 gives G_t - V(s_t).
    """
    for name, v in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v}")
    rewards, mask, dones = _prepare(rewards, mask, dones, "rewards")
    check_same_shape("values", values, "rewards", rewards)
    check_finite("values", values)
    values = values.to(rewards.dtype)
    if bootstrap is not None:
        bootstrap = torch.as_tensor(bootstrap, dtype=rewards.dtype)
        if bootstrap.shape != rewards.shape[:-1]:
            raise ValueError(
                f"bootstrap has shape {tuple(bootstrap.shape)}; "
                f"pass one value per row, shape {tuple(rewards.shape[:-1])}"
            )
        check_finite("bootstrap", bootstrap)
    nxt = next_policy_values(values, mask, dones, bootstrap)
    # Rewards on mask-0 positions stay in place: the scan credits them to the previous policy position.
    deltas = torch.where(mask.bool(), rewards + gamma * nxt - values, rewards)
    advantages = _scan(deltas, gamma * lam, mask, dones, "rewards")
    return advantages, (advantages + values) * mask
