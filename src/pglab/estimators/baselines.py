"""Baselines: numbers subtracted from the reward that leave the gradient unbiased and cut its variance.

Group functions work along ``dim`` (the samples of one prompt or task); everything else is batch.
"""

from __future__ import annotations

import torch

from pglab.estimators._validate import check_dim, check_eps, check_finite, check_mode, tensor


def _group_size(rewards: torch.Tensor, dim: int, minimum: int, what: str) -> int:
    check_finite("rewards", rewards)
    if rewards.dim() == 0:
        raise ValueError("rewards must have a group axis: pass shape [..., n] with n samples per group")
    n = rewards.shape[check_dim("rewards", rewards, dim)]
    if n < minimum:
        raise ValueError(f"{what} needs groups of at least {minimum} samples along dim={dim}, got {n}; "
                         "sample more completions per prompt or use a batch baseline")
    return n


def leave_one_out(rewards: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """RLOO advantage r_i - mean_{j != i} r_j; rewards [..., n, ...] -> same shape (n >= 2).

    Computed as the mean of the pairwise differences r_i - r_j, so adding a constant to every
    reward leaves the result bit-identical whenever the shifted rewards are exactly representable.
    Equals n / (n - 1) times the centred reward.
    """
    rewards = tensor("rewards", rewards)
    n = _group_size(rewards, dim, 2, "leave_one_out")
    r = rewards.movedim(dim, -1)
    diffs = r.unsqueeze(-1) - r.unsqueeze(-2)            # [..., n, n]: r_i - r_j
    return (diffs.sum(-1) / (n - 1)).movedim(-1, dim)


def group_normalize(
    rewards: torch.Tensor,
    dim: int = -1,
    *,
    scale: str = "group",
    unbiased: bool = False,
    eps: float = 1e-8,
) -> torch.Tensor:
    """GRPO advantage (r - group mean) / (std + eps); rewards [..., n, ...] -> same shape.

    scale="group" divides by each group's std, "batch" by the std of all rewards, "none" only
    centres (Dr. GRPO). ``unbiased`` picks the sample (n - 1) instead of the population std.
    A group of equal rewards gets exactly 0, for every scale.
    """
    check_mode(scale, ("group", "batch", "none"), "scale")
    check_eps(eps)
    rewards = tensor("rewards", rewards)
    _group_size(rewards, dim, 2, "group_normalize")      # a group of one has no spread and no advantage
    # Centre the differences from each group's first reward: a group of equal rewards gives exactly 0
    # (r - mean(r) can leave a rounding residue, which the division by std + eps would magnify).
    shifted = rewards - rewards.narrow(dim, 0, 1)
    centred = shifted - shifted.mean(dim, keepdim=True)
    if scale == "none":
        return centred
    if scale == "group":
        std = shifted.std(dim, keepdim=True, correction=1 if unbiased else 0)
    else:
        if unbiased and rewards.numel() < 2:
            raise ValueError("scale='batch' with unbiased=True needs at least 2 rewards")
        std = rewards.std(correction=1 if unbiased else 0)
    return centred / (std + eps)


def normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / (std + eps) over all elements, population std; x [...] -> same shape."""
    x = tensor("x", x)
    check_finite("x", x)
    check_eps(eps)
    if x.numel() == 0:
        raise ValueError("x is empty: there is nothing to normalise")
    return (x - x.mean()) / (x.std(correction=0) + eps)


def optimal_constant_baseline(rewards: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Variance-minimising constant b* = sum r |g|^2 / sum |g|^2; rewards [N], scores [N, P] -> scalar."""
    rewards, scores = tensor("rewards", rewards), tensor("scores", scores)
    check_finite("rewards", rewards)
    if rewards.dim() != 1 or scores.dim() != 2 or scores.shape[0] != rewards.shape[0]:
        raise ValueError(f"pass rewards [N] and scores [N, P]; got {tuple(rewards.shape)} and {tuple(scores.shape)}")
    weight = scores.pow(2).sum(-1)
    if weight.sum() == 0:
        raise ValueError("every score is zero: b* is undefined (any baseline gives zero variance)")
    return (rewards * weight).sum() / weight.sum()


class EMABaseline:
    """A running baseline: value <- decay * value + (1 - decay) * batch_mean after each batch.

    ``decay=None`` gives the plain running average of every batch mean seen so far (Williams'
    reinforcement comparison), where ``init`` counts as the first observation only until one arrives.
    Use ``value`` *before* calling ``update`` with the current batch, so the baseline does not
    depend on the actions it multiplies.
    """

    def __init__(self, init: float = 0.0, decay: float | None = 0.9):
        if decay is not None and not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1) or None for a running average, got {decay}")
        self.value = float(init)
        self.decay = decay
        self.count = 0

    def update(self, batch_mean: float | torch.Tensor) -> float:
        """Fold in one batch mean and return the new value."""
        x = float(batch_mean)
        if x != x or x in (float("inf"), float("-inf")):
            raise ValueError(f"batch_mean must be finite, got {x}")
        self.count += 1
        if self.decay is None:
            self.value += (x - self.value) / self.count
        else:
            self.value = self.decay * self.value + (1.0 - self.decay) * x
        return self.value
