"""loo-enumeration: leave-one-out is exactly unbiased, centring shrinks by (n-1)/n (d2l-14.6 §14.6.3.2).

On the two-state, two-action problem every trajectory, and every batch of n trajectories, can
be enumerated with its probability. The expectation of each batch estimator is then a finite
sum, compared with the exact gradient (itself checked against autograd through the linear solve).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.tabular import enumerate_trajectories, table_score, two_state_problem
from pglab.estimators import group_normalize, leave_one_out
from pglab.result import Result

EXACT = 1e-12
"""Tolerance of an identity computed by finite sums in float64."""


@dataclass
class Config:
    rewards: tuple[tuple[float, float], tuple[float, float]] = ((0.3, 1.0), (0.6, 0.1))
    """Reward table r[s, a] of the two decision states (the book's)."""
    batch_sizes: tuple[int, ...] = (2, 3)
    """Batch sizes n whose every batch is enumerated (4^n batches)."""
    seed: int = 0
    """Seed of the numpy Generator that draws the generic policy table theta [2, 2]."""

    QUICK: ClassVar[dict] = {}


def batch_expectations(probs: torch.Tensor, returns: torch.Tensor, scores: torch.Tensor,
                       n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """E over all K^n batches of the leave-one-out and the centred estimates; scores [K, S, A] -> two [S, A]."""
    batches = torch.tensor(list(itertools.product(range(len(probs)), repeat=n)))   # [K^n, n]
    weight = probs[batches].prod(-1)                                                  # [K^n]
    batch_returns = returns[batches]                                                  # [K^n, n]
    batch_scores = scores[batches]                                                    # [K^n, n, S, A]

    def expectation(advantages: torch.Tensor) -> torch.Tensor:
        per_batch = (advantages[..., None, None] * batch_scores).mean(1)
        return (weight[:, None, None] * per_batch).sum(0)

    return expectation(leave_one_out(batch_returns)), expectation(group_normalize(batch_returns, scale="none"))


def run(config: Config, result: Result) -> None:
    result.summary = (
        "Two states visited in order, two actions each, reward r[s, a]; theta is a generic 2 x 2 table. "
        "Trajectory scores come from the closed-form softmax score (no autograd); every expectation is an exact "
        f"finite sum over all batches, compared to within {EXACT:g}.")
    mdp = two_state_problem(config.rewards)
    table = np.random.default_rng(config.seed).standard_normal((2, 2))
    theta = torch.cat([torch.tensor(table), torch.zeros(1, 2, dtype=torch.float64)])  # the terminal row is unused
    probs, returns, counts = enumerate_trajectories(mdp, mdp.policy(theta))
    scores = table_score(theta, counts)
    exact = (probs[:, None, None] * returns[:, None, None] * scores).sum(0)
    autograd_gap = float((exact - mdp.exact_gradient(theta)).abs().max())
    result.check_close("enumerated gradient = autograd through the linear solve", autograd_gap, 0.0, EXACT,
                       "float64 finite sums")
    result.tables["trajectories"] = [
        {"actions": "".join(str(int(c.argmax())) for c in traj[:2]), "probability": float(p), "return": float(r)}
        for p, r, traj in zip(probs, returns, counts)
    ]
    rows = []
    for n in config.batch_sizes:
        loo, centred = batch_expectations(probs, returns, scores, n)
        loo_gap = float((loo - exact).abs().max())
        centred_gap = float((centred - (n - 1) / n * exact).abs().max())
        for claim, gap in (("E[leave-one-out] = grad J", loo_gap), ("E[centred] = (n-1)/n grad J", centred_gap)):
            rows.append({"n": n, "batches": len(probs) ** n, "claim": claim, "max abs difference": gap,
                         "ours": gap <= EXACT, "book": True if n == 2 else ""})
        result.check_close(f"n = {n}: E[leave-one-out] equals the exact gradient", loo_gap, 0.0, EXACT,
                           "float64 finite sums")
        result.check_close(f"n = {n}: E[centred] equals (n-1)/n of the exact gradient", centred_gap, 0.0, EXACT,
                           "float64 finite sums")
    result.tables["enumeration"] = rows
    result.metrics["grad_norm"] = float(exact.norm())
