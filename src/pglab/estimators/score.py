"""Closed-form score functions d log pi / d theta for the two textbook policies."""

from __future__ import annotations

import torch


def softmax_score(theta: torch.Tensor, actions: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Score of a softmax policy pi = softmax(theta / tau): (onehot(a) - pi) / tau.

    theta [..., K] (or [K], shared by all actions), actions [...] of ints -> scores [..., K].
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    k = theta.shape[-1]
    actions = torch.as_tensor(actions)
    if actions.dtype.is_floating_point or ((actions < 0) | (actions >= k)).any():
        raise ValueError(f"actions must be integer arm indices in [0, {k}), got {actions}")
    pi = torch.softmax(theta / temperature, -1)
    onehot = torch.nn.functional.one_hot(actions, k).to(pi.dtype)
    return (onehot - pi) / temperature


def gaussian_score(mu: torch.Tensor, log_sigma: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Score of N(mu, sigma^2) in (mu, log sigma): ((a - mu) / sigma^2, (a - mu)^2 / sigma^2 - 1).

    mu, log_sigma, actions broadcastable [...] -> scores [..., 2].
    """
    as_tensor = lambda v: v if torch.is_tensor(v) else torch.tensor(v, dtype=torch.get_default_dtype())  # noqa: E731
    mu, log_sigma, actions = torch.broadcast_tensors(as_tensor(mu), as_tensor(log_sigma), as_tensor(actions))
    var = torch.exp(2 * log_sigma)
    z2 = (actions - mu).pow(2) / var
    return torch.stack([(actions - mu) / var, z2 - 1.0], -1)
