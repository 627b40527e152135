"""repair-mdp-gradient: the score-function estimator against the exact gradient of the repair MDP (agents-ch6 §6.1-6.4).

A random softmax table theta [7, 4] on the repair MDP (docs/tabular.md). J and grad J are exact
(linear solve, autograd). A 20,000-episode Monte Carlo gradient is the gradient of the surrogate
mean_n R_n log p(tau_n), computed by pglab's reinforce_loss; shifting every return leaves its
expected gradient alone but not its value. 400 batches of 64 episodes then test unbiasedness and
measure the variance for four baselines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.envs.tabular import Episodes, repair_mdp, table_score
from pglab.estimators import cosine, total_variance
from pglab.reporting.result import Result, upper_tail
from pglab.stats import standard_error, variance_gap
from pglab.trainers.tabular import ascent_direction, surrogate_loss

BOOK_SHIFTS = {"0": (-0.8342, 0.9988), "-J": (-0.4056, 0.9992), "+5": (-17.0281, 0.7833)}
BOOK_BASELINES = {"none": (0.033, 0.034, 0.0071), "exact J": (0.028, 0.030, 0.0057),
                  "batch mean": (0.038, 0.030, 0.0056), "constant 1": (0.080, 0.056, 0.0191)}


@dataclass
class Config:
    theta_scale: float = 0.5
    """theta = theta_scale * standard normal [7, 4]: neither uniform nor deterministic."""
    theta_seed: int = 0
    """RNG seed of the generator that draws theta."""
    episodes: int = 20_000
    """Episodes behind the Monte Carlo gradient and the surrogate-shift table."""
    sample_seed: int = 0
    """RNG seed of the generator behind those episodes."""
    big_shift: float = 5.0
    """The large return shift of the surrogate table (beside 0 and -J)."""
    batches: int = 400
    """Independent batches in the unbiasedness table."""
    batch_size: int = 64
    """Episodes per batch."""
    batch_seed: int = 1
    """RNG seed of the generator behind the batches."""

    QUICK: ClassVar[dict] = {}


def trajectory_scores(theta: torch.Tensor, episodes: Episodes) -> torch.Tensor:
    """d log p(tau) / d theta of every episode, from its visit counts; -> [n, S, A]."""
    return table_score(theta, episodes.counts())


def check_within_noise(result: Result, claim: str, error: float, noise: float) -> None:
    """A Monte Carlo mean's relative error against its noise level (sqrt(trace cov / n) / norm of grad J): (error /
    noise)^2 is a chi^2_d / d variable with mean 1, whose tail is heaviest at d = 1, so the p-value of the two-sided
    normal tail at error / noise bounds it from above (the claim fails less often than the family's rate)."""
    result.check_p(claim, error / noise, min(1.0, 2 * upper_tail(error / noise)), "error / noise a chi^2 draw",
                   f"the two-sided normal tail of error / noise = {error:.3g} / {noise:.3g} (the worst case d = 1 of "
                   "chi^2_d / d)")


def relative_noise(per_sample: torch.Tensor, exact: torch.Tensor) -> float:
    """Standard error of the mean of [N, S, A] samples (root of trace of covariance / N) relative to |exact|."""
    return float((total_variance(per_sample.flatten(1)) / len(per_sample)).sqrt() / exact.norm())


def surrogate_value_and_gradient(theta: torch.Tensor, episodes: Episodes,
                                 returns: torch.Tensor) -> tuple[float, torch.Tensor]:
    """The surrogate mean_n returns_n log p(tau_n) and its gradient in theta [S, A] (the Monte Carlo grad J)."""
    weights = returns[episodes.episode]
    value = -float(surrogate_loss(theta, episodes, weights, "seq_mean_token_sum"))
    return value, ascent_direction(theta, episodes, weights, "seq_mean_token_sum")


def monte_carlo_rows(theta, exact, J, episodes: Episodes, config: Config, result: Result) -> tuple[list, list]:
    """agents-ch6 §6.1: J vs mean return, the Monte Carlo gradient, and the surrogate under three shifts."""
    returns = episodes.episode_returns(1.0)
    se = float(standard_error(returns))
    result.check_z("mean return = exact J", float(returns.mean()), J, se,
                   f"normal z of the mean return, se = {se:.2g}")
    scores = trajectory_scores(theta, episodes)
    big = f"+{config.big_shift:g}"
    shifts = {"0": 0.0, "-J": -J, big: config.big_shift}
    measured = {}
    for label, shift in shifts.items():
        value, grad = surrogate_value_and_gradient(theta, episodes, returns + shift)
        measured[label] = {"surrogate value": value, "cosine to exact": cosine(grad, exact),
                           "relative error": float((grad - exact).norm() / exact.norm()),
                           "noise level": relative_noise((returns + shift)[:, None, None] * scores, exact)}
    shift_rows = [{"return shift": label, **m, "book value": BOOK_SHIFTS.get(label, (math.nan,) * 2)[0],
                   "book cosine": BOOK_SHIFTS.get(label, (math.nan,) * 2)[1]} for label, m in measured.items()]
    plain = measured["0"]
    rows = [{"quantity": "J exact", "ours": J, "book": 0.1323},
            {"quantity": "mean return", "ours": float(returns.mean()), "book": 0.1264},
            {"quantity": "relative error of the Monte Carlo gradient", "ours": plain["relative error"], "book": 0.068},
            {"quantity": "noise level (se / norm of grad J)", "ours": plain["noise level"], "book": ""},
            {"quantity": "cosine to the exact gradient", "ours": plain["cosine to exact"], "book": 0.9988}]
    check_within_noise(result, "Monte Carlo gradient: relative error within its noise", plain["relative error"],
                       plain["noise level"])
    per_episode = {label: ((returns + shift)[:, None, None] * scores).flatten(1) for label, shift in shifts.items()}
    for label, claim in (("-J", "shift -J lowers"), (big, f"shift {big} raises")):
        gap, se = variance_gap(per_episode["0"], per_episode[label])
        gap = gap if label == "-J" else -gap
        result.check_z(f"per-episode variance: {claim} it (paired difference)", gap, 0.0, se,
                       f"one-sided normal z of the paired difference over the episodes, se = {se:.2g} (the effect "
                       f"measured: {gap / se:.0f} se)", side="at_least")
    return rows, shift_rows


def unbiasedness_rows(theta, exact, J, config: Config, result: Result) -> list[dict]:
    """agents-ch6 §6.4: 400 batches of 64; the mean over batches vs grad J for four baselines."""
    mdp = repair_mdp()
    episodes = mdp.sample(mdp.policy(theta), config.batches * config.batch_size,
                          torch.Generator().manual_seed(config.batch_seed))
    S, A = theta.shape
    scores = trajectory_scores(theta, episodes).view(config.batches, config.batch_size, S, A)
    returns = episodes.episode_returns(1.0).view(config.batches, config.batch_size)
    per_batch = {}
    rows = []
    for name, b in (("none", 0.0), ("exact J", J), ("batch mean", returns.mean(1, keepdim=True)),
                    ("constant 1", 1.0)):
        per_batch[name] = ((returns - b)[..., None, None] * scores).mean(1)            # [batches, S, A]
        error = float((per_batch[name].mean(0) - exact).norm() / exact.norm())
        noise = relative_noise(per_batch[name], exact)
        variance = float(total_variance(per_batch[name].flatten(1)))
        book = BOOK_BASELINES[name]
        rows.append({"baseline": name, "relative error of the mean": error, "book error": book[0],
                     "noise level": noise, "book noise": book[1], "per-batch variance": variance,
                     "book variance": book[2], "error / noise": error / noise})
        check_within_noise(result, f"baseline {name}: mean of {config.batches} batches = grad J within its noise",
                           error, noise)
    flat = {k: v.flatten(1) for k, v in per_batch.items()}
    diff, se = variance_gap(flat["none"], flat["exact J"])
    result.check_z("per-batch variance: none - exact J", diff, 0.0, se,
                   f"one-sided normal z of the paired difference, se = {se:.2g}; the book: 0.0071 vs 0.0057",
                   side="at_least")
    return rows


def run(config: Config, result: Result) -> None:
    result.summary = (
        "The repair MDP (7 states x 4 actions, start 'unread', terminal 'done', gamma = 1; docs/tabular.md) under "
        "a random softmax table. The book's MDP is a different design (its chapter is not among the book chapters), "
        "so the book columns show the scale to expect, not values to match.")
    mdp = repair_mdp()
    generator = torch.Generator().manual_seed(config.theta_seed)
    theta = config.theta_scale * torch.randn(mdp.n_states, mdp.n_actions, dtype=torch.float64, generator=generator)
    J, exact = float(mdp.exact_value(theta)), mdp.exact_gradient(theta)
    episodes = mdp.sample(mdp.policy(theta), config.episodes, torch.Generator().manual_seed(config.sample_seed))
    result.tables["monte_carlo"], result.tables["surrogate_shift"] = monte_carlo_rows(
        theta, exact, J, episodes, config, result)
    result.tables["unbiasedness"] = unbiasedness_rows(theta, exact, J, config, result)
    monte_carlo = {row["quantity"]: row["ours"] for row in result.tables["monte_carlo"]}
    variance = {row["baseline"]: row["per-batch variance"] for row in result.tables["unbiasedness"]}
    error_over_noise = [row["error / noise"] for row in result.tables["unbiasedness"]]
    result.metrics.update({"J": J, "grad_norm": float(exact.norm()),
                           "mean_episode_length": float(episodes.lengths.double().mean()),
                           "J_uniform": float(mdp.exact_value(torch.zeros_like(theta))),
                           "cosine_to_exact": monte_carlo["cosine to the exact gradient"],
                           "relative_error": monte_carlo["relative error of the Monte Carlo gradient"],
                           "noise_level": monte_carlo["noise level (se / norm of grad J)"],
                           "variance_none": variance["none"],
                           "variance_cut_exact_J": 1 - variance["exact J"] / variance["none"],
                           "variance_ratio_constant_1": variance["constant 1"] / variance["none"],
                           "error_over_noise_lowest": min(error_over_noise),
                           "error_over_noise_highest": max(error_over_noise)})
