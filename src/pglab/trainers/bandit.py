"""REINFORCE on a Gaussian bandit, many runs at once: the vectorised trainer, its baselines, and a plain replay.

Every run starts at theta = 0 (or at a given ``start``) and takes one pull per step; all runs advance
together in one tensor operation per step ([runs, K] theta). The running baseline is the average of every reward
the run has seen *before* the current pull (0 before the first), so it never depends on the
action it weighs: the rule of ``EMABaseline(0.0, decay=None)`` read before ``update``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pglab.envs.bandit import GaussianBandit
from pglab.estimators import EMABaseline, softmax_score
from pglab.reporting.result import Result
from pglab.runtime.threads import single_torch_thread
from pglab.stats import check_book_counts, printed_counts

BASELINES = ("none", "running", "value")
"""No baseline; the running average of past rewards; the exact value J(theta) of the current policy."""

@dataclass
class Trajectory:
    """What `train_bandit` returns: thetas [steps + 1, runs, K] (theta = 0 first), actions and rewards [steps, runs]."""

    thetas: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor


def _check_baseline(baseline: str) -> None:
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; pass one of {', '.join(BASELINES)}")


def baseline_values(bandit: GaussianBandit, baseline: str, theta: torch.Tensor, reward_sum: torch.Tensor,
                    seen: int) -> torch.Tensor:
    """b for every run: theta [runs, K], reward_sum [runs] of the ``seen`` earlier rewards -> [runs]."""
    if baseline == "none":
        return torch.zeros_like(reward_sum)
    if baseline == "value":
        return bandit.exact_value(theta)
    return reward_sum / max(seen, 1)


def train_bandit(bandit: GaussianBandit, baseline: str, runs: int, steps: int, lr: float,
                 generator: torch.Generator, *, start: torch.Tensor | None = None) -> Trajectory:
    """REINFORCE from theta = ``start`` [K] (0 when None), one pull per step, all runs in one tensor op per step;
    -> thetas [steps+1, runs, K]."""
    _check_baseline(baseline)
    if runs < 1 or steps < 1:
        raise ValueError(f"runs and steps must be >= 1, got runs={runs}, steps={steps}")
    theta = torch.zeros(runs, bandit.n_arms, dtype=torch.float64)
    if start is not None:
        start = torch.as_tensor(start, dtype=torch.float64)
        if start.shape != (bandit.n_arms,) or not torch.isfinite(start).all():
            raise ValueError(f"start must be {bandit.n_arms} finite logits, got {start.tolist()}")
        theta = theta + start
    reward_sum = torch.zeros(runs, dtype=torch.float64)
    thetas, actions, rewards = [theta], [], []
    with single_torch_thread():
        for t in range(steps):
            action = bandit.sample_actions(theta, generator)[:, 0]
            reward = bandit.sample_rewards(action, generator)
            b = baseline_values(bandit, baseline, theta, reward_sum, t)
            theta = theta + lr * (reward - b)[:, None] * softmax_score(theta, action)
            reward_sum = reward_sum + reward
            thetas.append(theta)
            actions.append(action)
            rewards.append(reward)
    return Trajectory(torch.stack(thetas), torch.stack(actions), torch.stack(rewards))


def committed_arm(pi: torch.Tensor, threshold: float) -> torch.Tensor:
    """Index of the arm whose probability exceeds ``threshold``, -1 if none; pi [..., K] -> [...] (threshold >= 0.5)."""
    top, arm = pi.max(-1)
    return torch.where(top > threshold, arm, torch.full_like(arm, -1))


def replay_run(bandit: GaussianBandit, baseline: str, actions: torch.Tensor, rewards: torch.Tensor,
               lr: float) -> torch.Tensor:
    """The plain one-run loop `train_bandit` is checked and timed against; actions, rewards [T] -> thetas [T+1, K]."""
    _check_baseline(baseline)
    theta = torch.zeros(bandit.n_arms, dtype=torch.float64)
    running = EMABaseline(0.0, decay=None)
    thetas = [theta]
    for action, reward in zip(actions.tolist(), rewards.tolist()):
        if baseline == "none":
            b = 0.0
        elif baseline == "value":
            b = float(bandit.exact_value(theta))
        else:
            b = running.value
        theta = theta + lr * (reward - b) * softmax_score(theta, torch.tensor(action))
        running.update(reward)
        thetas.append(theta)
    return torch.stack(thetas)


BOOK_WRONG_SEEN, BOOK_DEMO_RUNS = {"no baseline": (3, 4, 5), "running-average baseline": (0,)}, 12
"""course-ch7's race demo: without a baseline, other random seeds give 3 to 5 runs of 12 committed to a wrong arm;
with a running-average baseline, none."""


def check_race_counts(result: Result, label: str, rates: dict[str, float], runs: int) -> None:
    """The book's race-demo counts of wrong commitments for each method (name -> our rate over ``runs``), each a
    binomial claim (:func:`pglab.stats.check_book_counts`); bandit-race and bandit-lab both state them through it."""
    for method, rate in rates.items():
        counts = BOOK_WRONG_SEEN[method]
        check_book_counts(result, f"{label}{method}: the book's {printed_counts(counts)} of {BOOK_DEMO_RUNS} committed "
                          "to a wrong arm, at our rate", counts, BOOK_DEMO_RUNS, rate, runs)
