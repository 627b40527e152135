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
from pglab.estimators import optimal_constant_baseline, softmax_score
from pglab.reporting.plots import log_axis, new_figure, outside_legend, reference_line
from pglab.reporting.result import Result
from pglab.stats import check_printed, standard_error, variance_with_se, worst_of_p

BOOK_SWEEP = {0.0: 33.028, 3.0: 10.542, 5.0: 3.050, 6.0: 1.555, 6.5: 1.369, 7.0: 1.559, 8.0: 3.063,
              10.0: 10.572, 12.0: 24.081}
"""llm-ch6 §6.7: total variance at theta = 0 against the constant baseline b, each from 200,000 samples."""
BOOK_SAMPLES = 200_000
BOOK_ONE_STEP: dict[str, str | tuple[str, ...]] = {  # llm-ch6 §6.6, as printed
    "pi": ("0.25",) * 4, "score e_a - pi": ("-0.25", "-0.25", "0.75", "-0.25"),
    "r * score": ("-1.825", "-1.825", "5.475", "-1.825"), "baseline V": "6.5",
    "(r - V) * score": ("-0.2", "-0.2", "0.6", "-0.2"), "exact gradient": ("-0.375", "-0.125", "0.125", "0.375"),
    "pi after step, no baseline": ("0.197", "0.197", "0.4089", "0.197"),
    "pi after step, b = V": ("0.2449", "0.2449", "0.2653", "0.2449"),
}
BOOK_SKEWED = {"pi(best)": "0.711", "V": "7.42", "variance, no baseline": "19.5", "variance, b = V": "1.29"}
"""llm-ch6 §6.7 at theta = (0, 0, 0, 2)."""
BOOK_SPREADS = {0.0: ("4.15", "0.52"), 10.0: ("102", "0.52")}
"""course-ch7: spread of the single-sample estimate on rewards 1, 2, 4 (+ c), with b = 0 and b = J."""


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
    """Width of the Monte Carlo error bars in the figure, in standard errors."""
    seed: int = 0
    """RNG seed of the torch.Generator behind every draw."""
    skewed_theta: tuple[float, ...] = field(default=(0.0, 0.0, 0.0, 2.0))
    """A policy that already prefers the best arm."""

    QUICK: ClassVar[dict] = {"samples": 50_000}


def mc_estimates(bandit: GaussianBandit, theta: torch.Tensor, baseline: float, n: int,
                 gen: torch.Generator) -> torch.Tensor:
    """n single-sample REINFORCE estimates (r - b)(e_a - pi) at theta [K] -> [n, K]."""
    return bandit.sample_estimates(theta, baseline, n, gen)[1]


def one_step_table(bandit: GaussianBandit, lr: float, result: Result) -> list[dict]:
    """llm-ch6 §6.6: theta = 0, arm 3 sampled, rating 7.3; the step with and without b = V, beside the book."""
    theta = torch.zeros(bandit.n_arms, dtype=torch.float64)
    action, reward = 2, 7.3
    score = softmax_score(theta, torch.tensor(action))
    value = float(bandit.exact_value(theta))
    ours = {"pi": bandit.policy(theta).tolist(), "score e_a - pi": score.tolist(),
            "r * score": (reward * score).tolist(), "baseline V": value,
            "(r - V) * score": ((reward - value) * score).tolist(),
            "exact gradient": bandit.exact_gradient(theta).tolist(),
            "pi after step, no baseline": bandit.policy(theta + lr * reward * score).tolist(),
            "pi after step, b = V": bandit.policy(theta + lr * (reward - value) * score).tolist()}
    rows = []
    for quantity, printed in BOOK_ONE_STEP.items():
        book = float(printed) if isinstance(printed, str) else [float(p) for p in printed]
        rows.append({"quantity": quantity, "ours": ours[quantity], "book": book})
        check_printed(result, f"llm-ch6 §6.6 one step by hand: {quantity}", ours[quantity], printed)
    return rows


def worked_example_rows(result: Result) -> list[dict]:
    """course-ch7: the 3-armed noiseless bandit (rewards 1, 2, 4, shifted by c = 10) and exercise 7.6."""
    theta3 = torch.zeros(3, dtype=torch.float64)
    rows = []
    for c, printed in BOOK_SPREADS.items():
        bandit = GaussianBandit([1.0 + c, 2.0 + c, 4.0 + c], sd=0.0)
        for name, b, book in (("b = 0", 0.0, printed[0]), ("b = J", bandit.exact_value(theta3), printed[1])):
            spread = float(bandit.exact_total_variance(theta3, b))
            rows.append({"case": f"3 arms, c = {c:g}, {name}", "exact": spread, "book": float(book)})
            check_printed(result, f"course-ch7 spread, c = {c:g}, {name}", spread, book)
    two_arm = GaussianBandit([1.0, 0.0], sd=0.0)
    theta2 = torch.tensor([math.log(0.9 / 0.1), 0.0], dtype=torch.float64)
    value, b_star = float(two_arm.exact_value(theta2)), float(two_arm.optimal_baseline(theta2))
    rows.append({"case": "exercise 7.6: J", "exact": value, "book": 0.9})
    rows.append({"case": "exercise 7.6: b*", "exact": b_star, "book": 0.1})
    for name, b, book in (("b = 0", 0.0, "0.0018"), ("b = J", value, "0.115")):
        var = float(two_arm.exact_total_variance(theta2, b))
        rows.append({"case": f"exercise 7.6: variance, {name}", "exact": var, "book": float(book)})
        check_printed(result, f"course-ch7 exercise 7.6 variance, {name}", var, book)
    rows.append({"case": "exercise 7.6: variance, b = b*", "exact": float(two_arm.exact_total_variance(theta2, b_star)),
                 "book": 0.0})
    return rows


def variance_figure(bandit: GaussianBandit, sweep: list[dict], skewed: torch.Tensor, sigmas: float):
    """Exact total variance against the baseline b at theta = 0 (with Monte Carlo points) and at a skewed theta."""
    fig, axes = new_figure(1, 2, figsize=(10, 4), sharey=True)
    grid = torch.linspace(0.0, 12.0, 241, dtype=torch.float64)
    uniform = torch.zeros(bandit.n_arms, dtype=torch.float64)
    for ax, theta, title in ((axes[0], uniform, "uniform policy, theta = 0"),
                             (axes[1], skewed, f"skewed policy, pi(arm 4) = {float(bandit.policy(skewed)[-1]):.3f}")):
        ax.plot(grid, bandit.exact_total_variance(theta.expand(len(grid), -1), grid), color="C0", label="exact")
        value, b_star = float(bandit.exact_value(theta)), float(bandit.optimal_baseline(theta))
        if abs(value - b_star) < 1e-9:
            reference_line(ax, value, f"J = b* = {value:.3g} (equal at the uniform policy)", vertical=True,
                           color="C3", ls="--")
        else:
            reference_line(ax, value, f"J = {value:.3g}", vertical=True, color="C2", ls="--")
            reference_line(ax, b_star, f"b* = {b_star:.3g}", vertical=True, color="C3", ls=":")
        ax.set_title(title)
        ax.set_xlabel("constant baseline b (reward units)")
        log_axis(ax, [1, 2, 5, 10, 20, 50])
    axes[0].errorbar([r["b"] for r in sweep], [r["monte_carlo"] for r in sweep],
                     yerr=[sigmas * r["se"] for r in sweep], fmt="o", ms=4, color="C1",
                     label=f"Monte Carlo (+- {sigmas:g} se)")
    axes[0].set_ylabel("total variance of one estimate (reward^2)")
    for ax in axes:
        outside_legend(ax, below=True)
    fig.suptitle("REINFORCE on the 4-armed bandit (means 5-8, noise sd 1): variance against the baseline")
    return fig


def run(config: Config, result: Result) -> None:
    result.summary = (
        "REINFORCE on a Gaussian bandit under a softmax policy. Every Monte Carlo number sits beside its "
        "closed form (`GaussianBandit.exact_*`) and the book's printed value; Monte Carlo claims are normal z tests "
        "with standard errors computed from the samples (judged together at the family-wise rate), comparisons of a "
        "closed form with the book within half a unit of the book's last printed digit.")
    gen = torch.Generator().manual_seed(config.seed)
    bandit = GaussianBandit(config.means, config.sd)
    theta = torch.zeros(bandit.n_arms, dtype=torch.float64)
    exact_grad = bandit.exact_gradient(theta)
    n, k = config.samples, config.sigmas

    result.tables["one_step"] = one_step_table(bandit, config.lr, result)
    monte_carlo = []
    for label, b in (("no baseline", 0.0), ("b = 6.5", 6.5)):
        est = mc_estimates(bandit, theta, b, n, gen)
        mean, se = est.mean(0), standard_error(est)
        z = (mean - exact_grad) / se
        result.check_p(f"mean estimate = exact gradient, {label}", float((mean - exact_grad).abs().max()),
                       worst_of_p(z), "every arm's mean = its exact gradient",
                       f"the largest of {len(z)} per-arm normal z (se up to {float(se.max()):.3g}), Bonferroni over "
                       "the arms")
        monte_carlo.append({"estimate": label, "mean": mean.tolist(), "exact": exact_grad.tolist()})
    result.tables["monte_carlo_mean"] = monte_carlo

    sweep = []
    for b in config.baselines:
        var, se = variance_with_se(mc_estimates(bandit, theta, b, n, gen))
        exact = float(bandit.exact_total_variance(theta, b))
        sweep.append({"b": b, "monte_carlo": var, "se": se, "exact": exact, "book": BOOK_SWEEP.get(b, math.nan)})
        result.metrics[f"exact variance at b = {b:g}"] = exact
        result.check_z(f"total variance at b = {b:g}: Monte Carlo vs exact", var, exact, se,
                       f"normal z of the sample variance, se = {se:.2g} from the samples")
    result.tables["baseline_sweep"] = sweep
    booked = [r for r in sweep if r["b"] in BOOK_SWEEP]
    if booked:
        # The book's numbers are 200,000-sample estimates: their se is ours scaled by sqrt(n / 200,000).
        z = torch.tensor([(r["book"] - r["exact"]) / (r["se"] * math.sqrt(n / BOOK_SAMPLES)) for r in booked])
        result.metrics["book sweep: worst distance from exact in standard errors"] = float(z.abs().max())
        result.check_p("llm-ch6 §6.7 sweep: the book's Monte Carlo variances vs exact (worst |book - exact| / se)",
                       float(z.abs().max()), worst_of_p(z), "each book variance = exact",
                       f"the largest of {len(z)} normal z of a {BOOK_SAMPLES:,}-sample variance (our se scaled to "
                       "the book's sample size), Bonferroni over the baselines")

    b_star_exact = float(bandit.optimal_baseline(theta))
    actions = bandit.sample_actions(theta, gen, n)
    rewards = bandit.sample_rewards(actions, gen)
    b_star_mc = float(optimal_constant_baseline(rewards, softmax_score(theta, actions)))
    se_b_star = float(standard_error(rewards))  # |score|^2 is the same for every arm at theta = 0
    result.check_z("b* Monte Carlo vs exact", b_star_mc, b_star_exact, se_b_star,
                   f"normal z of the weighted mean reward, se = {se_b_star:.2g}")
    value = float(bandit.exact_value(theta))

    skewed = torch.tensor(config.skewed_theta, dtype=torch.float64)
    skewed_value = float(bandit.exact_value(skewed))
    ours_skewed = {"pi(best)": float(bandit.policy(skewed)[-1]), "V": skewed_value,
                   "variance, no baseline": float(bandit.exact_total_variance(skewed, 0.0)),
                   "variance, b = V": float(bandit.exact_total_variance(skewed, skewed_value))}
    summary_rows = [
        {"quantity": "J at theta = 0", "ours": value, "book": 6.5},
        {"quantity": "b* at theta = 0 (exact)", "ours": b_star_exact, "book": 6.497},
        {"quantity": "b* at theta = 0 (Monte Carlo)", "ours": b_star_mc, "book": 6.497},
        {"quantity": "variance at b* (exact)", "ours": float(bandit.exact_total_variance(theta, b_star_exact)),
         "book": 1.369},
    ]
    for quantity, printed in BOOK_SKEWED.items():
        summary_rows.append({"quantity": f"skewed theta: {quantity}", "ours": ours_skewed[quantity],
                             "book": float(printed)})
        check_printed(result, f"llm-ch6 §6.7 skewed theta: {quantity}", ours_skewed[quantity], printed)
    result.tables["optimal_baseline_and_skewed_policy"] = summary_rows
    result.tables["course_ch7_worked_example"] = worked_example_rows(result)

    result.metrics.update({"J": value, "b_star": b_star_exact, "variance_no_baseline": sweep[0]["exact"],
                           "variance_at_b_star": float(bandit.exact_total_variance(theta, b_star_exact))})
    result.metrics.update({f"exact gradient, arm {arm}": g for arm, g in enumerate(exact_grad.tolist(), start=1)})
    result.metrics.update({f"skewed theta: {quantity}": v for quantity, v in ours_skewed.items()})
    result.metrics["skewed theta: b*"] = float(bandit.optimal_baseline(skewed))
    result.metrics.update({row["case"]: row["exact"] for row in result.tables["course_ch7_worked_example"]})
    result.figures["variance_vs_baseline"] = variance_figure(bandit, sweep, skewed, k)
