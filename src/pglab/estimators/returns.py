"""Returns along the time axis: the backward scan, reward-to-go, and GAE.

Mask convention (SPEC): ``mask[..., t] = 1`` where token t was sampled by the policy. Mask-0
positions (prompt, template, tool output) are not time steps: discounting and bootstrapping pass
over them and their output is 0. A reward placed on a mask-0 position is credited, undiscounted, to
the nearest policy position before it; before the first policy position it is ignored.
``dones[..., t] = 1`` ends an episode after position t (terminal: nothing flows back across it).
``truncated[..., t] = 1`` also ends the episode after t, but the episode was cut (a time limit, a
vector environment's autoreset), not finished: ``next_values[..., t]``, the value of the state it was
cut in, is discounted once onto the last policy position of the episode, as the rest of the return.
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
    x, mask, dones = _prepare(x, mask, dones, "x")
    return _scan(x, factor, mask, dones)


def _scan(x, factor, mask, ends, cut_values=None) -> torch.Tensor:
    """The backward scan on validated tensors; ``ends`` [..., T] stops it after t, where it restarts
    from ``cut_values`` [..., T] (0 at terminal ends and at positions that end nothing)."""
    factor = torch.as_tensor(factor, dtype=x.dtype).expand_as(x)
    out = torch.zeros_like(x)
    carry = torch.zeros_like(x[..., 0])      # y at the next policy position of this episode
    pending = torch.zeros_like(x[..., 0])    # x on mask-0 positions since that policy position
    for t in range(x.shape[-1] - 1, -1, -1):
        live = 1.0 - ends[..., t]
        carry, pending = carry * live, pending * live
        if cut_values is not None:
            carry = carry + cut_values[..., t]
        m = mask[..., t]
        y = x[..., t] + pending + factor[..., t] * carry
        out[..., t] = m * y
        carry = torch.where(m.bool(), y, carry)
        pending = torch.where(m.bool(), torch.zeros_like(pending), pending + x[..., t])
    return out


def _cuts(like: torch.Tensor, dones: torch.Tensor, truncated, next_values, bootstrap=None):
    """Validate the truncation arguments -> (ends, cut_values), both [..., T].

    ends = dones + truncated (every episode end); cut_values = truncated * next_values (the value a
    cut episode bootstraps from, 0 elsewhere). ``bootstrap`` [...] cuts each row after its last
    position, unless that position already ends an episode.
    """
    if (truncated is None) != (next_values is None):
        given, missing = ("truncated", "next_values") if next_values is None else ("next_values", "truncated")
        raise ValueError(f"{given} was passed without {missing}; pass both (truncated[..., t] = 1 where the "
                         f"episode was cut after t, next_values[..., t] = V of the state it was cut in)")
    if truncated is None:
        truncated, next_values = torch.zeros_like(like), torch.zeros_like(like)
    else:
        truncated = as_mask("truncated", truncated, "rewards", like)
        check_same_shape("next_values", next_values, "rewards", like)
        check_finite("next_values", next_values)
        next_values = next_values.to(like.dtype)
        both = (truncated * dones).nonzero()
        if len(both):
            raise ValueError(f"position {both[0].tolist()} is both done and truncated; an episode either "
                             f"terminates (dones) or is cut (truncated): set one of them to 0")
    if bootstrap is not None:
        bootstrap = torch.as_tensor(bootstrap, dtype=like.dtype)
        if bootstrap.shape != like.shape[:-1]:
            raise ValueError(
                f"bootstrap has shape {tuple(bootstrap.shape)}; "
                f"pass one value per row, shape {tuple(like.shape[:-1])}"
            )
        check_finite("bootstrap", bootstrap)
        open_end = 1.0 - dones[..., -1] - truncated[..., -1]
        truncated, next_values = truncated.clone(), next_values.clone()
        truncated[..., -1] += open_end
        next_values[..., -1] = torch.where(open_end.bool(), bootstrap, next_values[..., -1])
    return dones + truncated, truncated * next_values


def discounted_returns(
    rewards: torch.Tensor,
    gamma: float = 1.0,
    *,
    mask: torch.Tensor | None = None,
    dones: torch.Tensor | None = None,
    truncated: torch.Tensor | None = None,
    next_values: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reward-to-go G_t = r_t + gamma * G_{t+1}; rewards, mask, dones, truncated, next_values [..., T] -> G [..., T].

    A cut episode (``truncated[..., t] = 1``) continues past its cut with the value
    ``next_values[..., t]``: its last return is r + gamma * next_value.
    """
    if not 0.0 <= float(gamma) <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    rewards, mask, dones = _prepare(rewards, mask, dones, "rewards")
    ends, cut_values = _cuts(rewards, dones, truncated, next_values)
    return _scan(rewards, gamma, mask, ends, cut_values)


def next_policy_values(
    values: torch.Tensor,
    mask: torch.Tensor,
    ends: torch.Tensor,
    cut_values: torch.Tensor,
) -> torch.Tensor:
    """V(s_{t+1}) for every position: the value at the next policy position of the same episode.

    values, mask, ends, cut_values [..., T]: ``ends`` marks every episode end, ``cut_values`` the
    value after a cut one (0 after a terminal end). -> [..., T]
    """
    nxt = torch.zeros_like(values)
    carry = torch.zeros_like(values[..., 0])
    for t in range(values.shape[-1] - 1, -1, -1):
        carry = carry * (1.0 - ends[..., t]) + cut_values[..., t]
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
    truncated: torch.Tensor | None = None,
    next_values: torch.Tensor | None = None,
    bootstrap: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation; rewards, values, mask, dones, truncated, next_values [..., T]
    -> (advantages, returns) [..., T].

    delta_t = r_t + gamma V(s_{t+1}) - V(s_t) and A_t = delta_t + gamma lam A_{t+1} over the policy
    positions of an episode; ``returns = A + V`` (the lambda-return, the critic's target), 0 on
    mask-0 positions. An episode ends after t at ``dones`` (terminal: V(s_{t+1}) = 0) or at
    ``truncated`` (cut: V(s_{t+1}) = ``next_values[..., t]``). ``bootstrap`` [...] is the shorthand for
    a cut after each row's last position (ignored on rows whose last position already ends an episode).
    lam = 0 gives the TD errors, lam = 1 gives G_t - V(s_t).
    """
    for name, v in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v}")
    rewards, mask, dones = _prepare(rewards, mask, dones, "rewards")
    check_same_shape("values", values, "rewards", rewards)
    check_finite("values", values)
    values = values.to(rewards.dtype)
    ends, cut_values = _cuts(rewards, dones, truncated, next_values, bootstrap)
    nxt = next_policy_values(values, mask, ends, cut_values)
    # Rewards on mask-0 positions stay in place: the scan credits them to the previous policy position.
    deltas = torch.where(mask.bool(), rewards + gamma * nxt - values, rewards)
    advantages = _scan(deltas, gamma * lam, mask, ends)
    return advantages, (advantages + values) * mask
