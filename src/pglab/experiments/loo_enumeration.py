"""loo-enumeration: leave-one-out is exactly unbiased, centring shrinks by (n-1)/n (d2l-14.6 §14.6.3.2).

On the two-state, two-action problem every trajectory, and every batch of n trajectories, can
be enumerated with its probability. The expectation of each batch estimator is then a finite
sum, compared with the exact gradient (itself equal to autograd through the linear solve). These
are identities, tested in tests/experiments/test_identities.py; the report tables them, and its claims check
that sampled batches agree with the enumeration within their standard errors.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.tabular import enumerate_trajectories, table_score, two_state_problem
from pglab.estimators import group_normalize, leave_one_out
from pglab.reporting.result import Result
from pglab.stats import standard_error, worst_of_p


@dataclass
class Config:
    rewards: tuple[tuple[float, float], tuple[float, float]] = ((0.3, 1.0), (0.6, 0.1))
    """Reward table r[s, a] of the two decision states (the book's)."""
    batch_sizes: tuple[int, ...] = (2, 3)
    """Batch sizes n whose every batch is enumerated (4^n batches)."""
    seed: int = 0
    """RNG seed of the numpy Generator that draws the generic policy table theta [2, 2]."""
    sampled_batches: int = 20_000
    """Batches drawn (per batch size) to compare sampled estimates with the enumeration."""
    sample_seed: int = 0
    """RNG seed of the torch.Generator behind the sampled batches."""

    QUICK: ClassVar[dict] = {"sampled_batches": 5_000}


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


def estimates(returns: torch.Tensor, scores: torch.Tensor, batches: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Leave-one-out and centred estimates of each batch; batches [B, n] trajectory indices -> two [B, S, A]."""
    batch_returns, batch_scores = returns[batches], scores[batches]

    def estimate(advantages: torch.Tensor) -> torch.Tensor:
        return (advantages[..., None, None] * batch_scores).mean(1)

    return estimate(leave_one_out(batch_returns)), estimate(group_normalize(batch_returns, scale="none"))


def run(config: Config, result: Result) -> None:
    result.summary = (
        "Two states visited in order, two actions each, reward r[s, a]; theta is a generic 2 x 2 table. "
        "Trajectory scores come from the closed-form softmax score (no autograd); every expectation is an exact "
        "finite sum over all batches (an identity, tested in tests/experiments/test_identities.py). The claims compare "
        f"{config.sampled_batches:,} sampled batches per size with the enumeration.")
    mdp = two_state_problem(config.rewards)
    table = np.random.default_rng(config.seed).standard_normal((2, 2))
    theta = torch.cat([torch.tensor(table), torch.zeros(1, 2, dtype=torch.float64)])  # the terminal row is unused
    probs, returns, counts = enumerate_trajectories(mdp, mdp.policy(theta))
    scores = table_score(theta, counts)
    exact = (probs[:, None, None] * returns[:, None, None] * scores).sum(0)
    result.tables["trajectories"] = [
        {"actions": "".join(str(int(c.argmax())) for c in traj[:2]), "probability": float(p), "return": float(r)}
        for p, r, traj in zip(probs, returns, counts)
    ]
    generator = torch.Generator().manual_seed(config.sample_seed)
    rows, largest_se = [], {}
    for n in config.batch_sizes:
        loo, centred = batch_expectations(probs, returns, scores, n)
        sampled = estimates(returns, scores, torch.multinomial(probs, config.sampled_batches * n, replacement=True,
                                                               generator=generator).view(-1, n))
        for claim, expected, enumerated, draws in (("E[leave-one-out] = grad J", exact, loo, sampled[0]),
                                                   ("E[centred] = (n-1)/n grad J", (n - 1) / n * exact, centred,
                                                    sampled[1])):
            gap, se = (draws.mean(0) - expected).abs(), standard_error(draws)
            rows.append({"n": n, "batches": len(probs) ** n, "claim": claim,
                         "max abs difference (enumeration)": float((enumerated - expected).abs().max()),
                         "max abs difference (sampled)": float(gap.max()), "book": True if n == 2 else ""})
            live = se > 0   # the terminal row of theta has no score: every estimate is 0 there
            z = gap[live] / se[live]
            worst = float(z.max())
            largest_se[n] = max(worst, largest_se.get(n, 0.0))
            result.check_p(f"n = {n}: sampled {claim} (largest |mean - target| / se over [S, A])", worst,
                           worst_of_p(z), "every entry's mean = its target",
                           f"the largest of {len(z)} normal z of the mean of {config.sampled_batches:,} sampled "
                           f"batches (se <= {float(se.max()):.2g}), Bonferroni over the entries")
    result.tables["enumeration"] = rows
    result.metrics["grad_norm"] = float(exact.norm())
    result.metrics.update({f"largest_se_n{n}": v for n, v in largest_se.items()})
