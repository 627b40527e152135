"""Closed-form score functions d log pi / d theta for the two textbook policies."""

from __future__ import annotations

import torch

from pglab.estimators._validate import check_finite, tensor


def softmax_score(theta: torch.Tensor, actions: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Score of a softmax policy pi = softmax(theta / tau): (onehot(a) - pi) / tau.

    theta [..., K] (or [K], shared by all actions), actions [...] of ints -> scores [..., K].
    """
    if not temperature > 0 or temperature == float("inf"):
        raise ValueError(f"temperature must be positive and finite, got {temperature}")
    theta, actions = tensor("theta", theta), tensor("actions", actions)
    check_finite("theta", theta)
    if theta.dim() == 0:
        raise ValueError("theta must have an arm axis: pass [K] or [..., K]")
    k = theta.shape[-1]
    if actions.is_floating_point() or actions.dtype == torch.bool or ((actions < 0) | (actions >= k)).any():
        raise ValueError(f"actions must be integer arm indices in [0, {k}), got {str(actions.tolist())[:80]}")
    pi = torch.softmax(theta / temperature, -1)
    onehot = torch.nn.functional.one_hot(actions, k).to(pi.dtype)
    return (onehot - pi) / temperature


def gaussian_score(mu: torch.Tensor, log_sigma: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Score of N(mu, sigma^2) in (mu, log sigma): ((a - mu) / sigma^2, (a - mu)^2 / sigma^2 - 1).

    mu, log_sigma, actions broadcastable [...] -> scores [..., 2].
    """
    values = {"mu": mu, "log_sigma": log_sigma, "actions": actions}
    for name, value in values.items():
        values[name] = tensor(name, value)
        check_finite(name, values[name])
    try:
        mu, log_sigma, actions = torch.broadcast_tensors(*values.values())
    except RuntimeError:
        raise ValueError(f"mu, log_sigma and actions must broadcast, got shapes "
                         f"{[tuple(v.shape) for v in values.values()]}") from None
    var = torch.exp(2 * log_sigma)
    z2 = (actions - mu).pow(2) / var
    return torch.stack([(actions - mu) / var, z2 - 1.0], -1)
