"""bandit-variance: the score-function estimator on a Gaussian bandit, checked against closed forms.

Reproduces llm-ch6 §6.4-6.7 (four arms, means 5..8, noise 1) and course-ch7's worked
example (three noiseless arms 1, 2, 4) and exercise 7.6 (two arms at p = 0.9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from pglab.envs.bandit import GaussianBandit
from pglab.estimators import optimal_constant_baseline, softmax_score, squared_deviations, total_variance
from pglab.plots import new_figure
from pglab.result import Result
from pglab.stats import standard_error

BOOK_SWEEP = {0.0: 33.028, 3.0: 10.542, 5.0: 3.050, 6.0: 1.555, 6.5: 1.369, 7.0: 1.559, 8.0: 3.063,
              10.0: 10.572, 12.0: 24.081}


@dataclass
class Config:
    means: tuple[float, ...] = (5.0, 6.0, 7.0, 8.0)
    """Mean rating of each arm (llm-ch6's four candidate replies)."""
    sd: float = 1.0
    """Standard deviation of the rating noise."""
    samples: int = 200_000
    """Monte Carlo samples per measurement."""
    baselines: tuple[float, ...] = tuple(BOOK_SWEEP)
    """Constant baselines swept at theta = 0."""
    lr: float = 0.1
    """Step size of the one step taken by hand."""
    sigmas: float = 3.0
    """Monte Carlo claims must hold within this many standard errors."""
    seed: int = 0
    """Seed of the torch.Generator behind every draw."""
    skewed_theta: tuple[float, ...] = field(default=(0.0, 0.0, 0.0, 2.0))
    """A policy that already prefers the best arm."""

    QUICK: ClassVar[dict] = {"samples": 50_000}


def mc_estimates(bandit: GaussianBandit, theta: torch.Tensor, baseline: float, n: int,
                 gen: torch.Generator) -> torch.Tensor:
    """n single-sample REINFORCE estimates (r - b)(e_a - pi) at theta [K] -> [n, K]."""
    return bandit.sample_estimates(theta, baseline, n, gen)[1]


def variance_with_se(estimates: torch.Tensor) -> tuple[float, float]:
    """Total variance of [n, K] estimates and its standard error (from the per-sample squared deviations)."""
    return float(total_variance(estimates)), float(standard_error(squared_deviations(estimates)))


def one_step_table(bandit: GaussianBandit, lr: float) -> list[dict]:
    """llm-ch6 §6.6: theta = 0, arm 3 sampled, rating 7.3; the step with and without b = V."""
    theta = torch.zeros(bandit.n_arms, dtype=torch.float64)
    action, reward = 2, 7.3
    score = softmax_score(theta, torch.tensor(action))
    value = float(bandit.exact_value(theta))
    return [
        {"quantity": "pi", "ours": bandit.policy(theta).tolist(), "book": [0.25, 0.25, 0.25, 0.25]},
        {"quantity": "score e_a - pi", "ours": score.tolist(), "book": [-0.25, -0.25, 0.75, -0.25]},
        {"quantity": "r * score", "ours": (reward * score).tolist(), "book": [-1.825, -1.825, 5.475, -1.825]},
        {"quantity": "baseline V", "ours": value, "book": 6.5},
        {"quantity": "(r - V) * score", "ours": ((reward - value) * score).tolist(), "book": [-0.2, -0.2, 0.6, -0.2]},
        {"quantity": "exact gradient", "ours": bandit.exact_gradient(theta).tolist(),
         "book": [-0.375, -0.125, 0.125, 0.375]},
        {"quantity": "pi after step, no baseline", "ours": bandit.policy(theta + lr * reward * score).tolist(),
         "book": [0.197, 0.197, 0.4089, 0.197]},
        {"quantity": "pi after step, b = V", "ours": bandit.policy(theta + lr * (reward - value) * score).tolist(),
         "book": [0.2449, 0.2449, 0.2653, 0.2449]},
    ]


def worked_example_rows(result: Result) -> list[dict]:
    """course-ch7: the 3-armed noiseless bandit (rewards 1, 2, 4, shifted by c = 10) and exercise 7.6."""
    theta3 = torch.zeros(3, dtype=torch.float64)
    rows = []
    for c, book_spread in ((0.0, (4.15, 0.52)), (10.0, (102.0, 0.52))):
        bandit = GaussianBandit([1.0 + c, 2.0 + c, 4.0 + c], sd=0.0)
        value = bandit.exact_value(theta3)
        for name, b, seed in (("b = 0", 0.0, book_spread[0]), ("b = J", value, book_spread[1])):
            spread = float(bandit.exact_total_variance(theta3, b))
            rows.append({"case": f"3 arms, c = {c:g}, {name}", "exact": spread, "book": seed})
            result.check_close(f"course-ch7 spread, c = {c:g}, {name}", spread, seed, 0.005 * max(1.0, seed),
                               "the seed prints 2-3 significant digits")
    gradient = GaussianBandit([1.0, 2.0, 4.0], sd=0.0).exact_gradient(theta3)
    for k, (ours, seed) in enumerate(zip(gradient.tolist(), (-4 / 9, -1 / 9, 5 / 9))):
        result.check_close(f"course-ch7 exact gradient, arm {k + 1}", ours, seed, 1e-12, "closed form")

    two_arm = GaussianBandit([1.0, 0.0], sd=0.0)
    theta2 = torch.tensor([math.log(0.9 / 0.1), 0.0], dtype=torch.float64)
    value, b_star = float(two_arm.exact_value(theta2)), float(two_arm.optimal_baseline(theta2))
    rows.append({"case": "exercise 7.6: J", "exact": value, "book": 0.9})
    rows.append({"case": "exercise 7.6: b*", "exact": b_star, "book": 0.1})
    result.check_close("exercise 7.6 J", value, 0.9, 1e-9, "closed form")
    result.check_close("exercise 7.6 b*", b_star, 0.1, 1e-9, "closed form")
    for name, b, seed, tol in (("b = 0", 0.0, 0.0018, 1e-9), ("b = J", value, 0.115, 5e-4),
                               ("b = b*", b_star, 0.0, 1e-9)):
        var = float(two_arm.exact_total_variance(theta2, b))
        rows.append({"case": f"exercise 7.6: variance, {name}", "exact": var, "book": seed})
        result.check_close(f"exercise 7.6 variance, {name}", var, seed, tol, "half a unit of the book's last digit")
    return rows


def variance_figure(bandit: GaussianBandit, sweep: list[dict], value: float, b_star: float):
    theta = torch.zeros(bandit.n_arms, dtype=torch.float64)
    grid = torch.linspace(0.0, 12.0, 241, dtype=torch.float64)
    exact = bandit.exact_total_variance(theta.expand(len(grid), -1), grid)
    fig, ax = new_figure(figsize=(6.5, 4))
    ax.plot(grid, exact, label="exact", color="C0")
    ax.errorbar([r["b"] for r in sweep], [r["monte_carlo"] for r in sweep], yerr=[3 * r["se"] for r in sweep],
                fmt="o", color="C1", label="Monte Carlo (3 se)")
    ax.axvline(value, color="C2", ls="--", label=f"J = {value:.3g}")
    ax.axvline(b_star, color="C3", ls=":", label=f"b* = {b_star:.3g}")
    ax.set_yscale("log")
    ax.set_xlabel("constant baseline b")
    ax.set_ylabel("total variance of one estimate")
    ax.set_title("REINFORCE on the 4-armed bandit at theta = 0")
    ax.legend()
    fig.tight_layout()
    return fig


def run(config: Config, result: Result) -> None:
    result.summary = (
        "REINFORCE on a Gaussian bandit under a softmax policy. Every Monte Carlo number sits beside its "
        "closed form (`GaussianBandit.exact_*`) and the book's printed value; Monte Carlo claims hold "
        f"within {config.sigmas:g} standard errors computed from the samples.")
    gen = torch.Generator().manual_seed(config.seed)
    bandit = GaussianBandit(config.means, config.sd)
    theta = torch.zeros(bandit.n_arms, dtype=torch.float64)
    exact_grad = bandit.exact_gradient(theta)
    n, k = config.samples, config.sigmas

    result.tables["one_step"] = one_step_table(bandit, config.lr)
    for row in result.tables["one_step"]:
        gap = (torch.tensor(row["ours"]) - torch.tensor(row["book"])).abs().max()
        result.check(f"one step by hand: {row['quantity']}", float(gap), bool(gap <= 5e-4),
                     "within 5e-4 of the seed", "the seed prints 3-4 decimals")

    actions = bandit.sample_actions(theta, gen, n)
    scores = softmax_score(theta, actions)
    mean_score, se_score = scores.mean(0), standard_error(scores)
    result.check("mean score is zero", float(mean_score.abs().max()),
                 bool((mean_score.abs() <= k * se_score).all()), f"|mean| <= {k:g} se per arm",
                 f"se = {float(se_score.max()):.2g}")
    monte_carlo = []
    for label, b in (("no baseline", 0.0), ("b = 6.5", 6.5)):
        est = mc_estimates(bandit, theta, b, n, gen)
        mean, se = est.mean(0), standard_error(est)
        result.check(f"mean estimate = exact gradient, {label}", float((mean - exact_grad).abs().max()),
                     bool(((mean - exact_grad).abs() <= k * se).all()), f"every arm within {k:g} se",
                     f"se = {float(se.max()):.3g}")
        monte_carlo.append({"estimate": label, "mean": mean.tolist(), "exact": exact_grad.tolist()})
    result.tables["monte_carlo_mean"] = monte_carlo

    sweep = []
    for b in config.baselines:
        var, se = variance_with_se(mc_estimates(bandit, theta, b, n, gen))
        exact = float(bandit.exact_total_variance(theta, b))
        sweep.append({"b": b, "monte_carlo": var, "se": se, "exact": exact, "book": BOOK_SWEEP.get(b, math.nan)})
        result.check_close(f"total variance at b = {b:g}: Monte Carlo vs exact", var, exact, k * se,
                           f"{k:g} standard errors of the sample variance")
    result.tables["baseline_sweep"] = sweep

    b_star_exact = float(bandit.optimal_baseline(theta))
    actions = bandit.sample_actions(theta, gen, n)
    rewards = bandit.sample_rewards(actions, gen)
    b_star_mc = float(optimal_constant_baseline(rewards, softmax_score(theta, actions)))
    se_b_star = float(standard_error(rewards))  # |score|^2 is the same for every arm at theta = 0
    result.check_close("b* Monte Carlo vs exact", b_star_mc, b_star_exact, k * se_b_star,
                       f"{k:g} se of the weighted mean reward")
    value = float(bandit.exact_value(theta))

    skewed = torch.tensor(config.skewed_theta, dtype=torch.float64)
    skewed_value = float(bandit.exact_value(skewed))
    summary_rows = [
        {"quantity": "J at theta = 0", "ours": value, "book": 6.5},
        {"quantity": "b* at theta = 0 (exact)", "ours": b_star_exact, "book": 6.497},
        {"quantity": "b* at theta = 0 (Monte Carlo)", "ours": b_star_mc, "book": 6.497},
        {"quantity": "variance at b* (exact)", "ours": float(bandit.exact_total_variance(theta, b_star_exact)),
         "book": 1.369},
        {"quantity": "skewed theta: pi(best)", "ours": float(bandit.policy(skewed)[-1]), "book": 0.711},
        {"quantity": "skewed theta: V", "ours": skewed_value, "book": 7.42},
        {"quantity": "skewed theta: variance, no baseline", "ours": float(bandit.exact_total_variance(skewed, 0.0)),
         "book": 19.5},
        {"quantity": "skewed theta: variance, b = V",
         "ours": float(bandit.exact_total_variance(skewed, skewed_value)), "book": 1.29},
    ]
    result.tables["optimal_baseline_and_skewed_policy"] = summary_rows
    for row in summary_rows[4:]:
        result.check_close(row["quantity"], row["ours"], row["book"], 0.006 * abs(row["book"]),
                           "the seed prints 3 significant digits")
    result.tables["seed_001_worked_example"] = worked_example_rows(result)

    result.metrics.update({"J": value, "b_star": b_star_exact, "variance_no_baseline": sweep[0]["exact"],
                           "variance_at_b_star": float(bandit.exact_total_variance(theta, b_star_exact))})
    result.figures["variance_vs_baseline"] = variance_figure(bandit, sweep, value, b_star_exact)
