"""bandit-lab: the course chapter's bandit lab: the variance valley, exercises 7.4 and 7.9, and the c = 15 race.

course-ch7 exercise 7.10 (the lab's variance plot), exercise 7.4 (an action-dependent "baseline" is biased),
exercise 7.9 (spreads and the policy near a corner) and exercise 7.9.5 (the race at c = 15 from
near the arm-2 corner). The "spread" of an estimate is its total variance: the trace of the
covariance of one single-pull estimate (r - b)(e_a - pi). Exact numbers come from the closed forms
of ``GaussianBandit``; measured ones from Monte Carlo draws, each with its standard error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.envs.bandit import GaussianBandit
from pglab.estimators import squared_deviations, total_variance
from pglab.reporting.plots import new_figure
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import track
from pglab.stats import check_book_counts, standard_error, worst_of_p
from pglab.trainers.bandit import check_race_counts, committed_arm, train_bandit

BOOK_VALLEY = {"minimum": (1.2, 0.05), "at b = 0": (100.0, 5.0), "b at the minimum": (12.33, 0.005)}
"""course-ch7 exercise 7.10, rewards 1, 2, 4 + 10 with noise 1, as printed: the minimum "about 1.2" at b = J = 12.33,
"about 100" at b = 0; each with half a unit of the precision printed (1.2: a tenth; 100: rounded to tens)."""
BOOK_EX74 = {"expected": (-2 / 3, -1 / 3, 1.0), "bias": (-2 / 9, -2 / 9, 4 / 9)}
"""Exercise 7.4.3: b(a) = (2, 2, 0) at the uniform policy, noiseless rewards 1, 2, 4."""
BOOK_EX79 = {"spread at b = 10": 39.7, "J": 1.4, "grad J": (-0.32, 0.06, 0.26), "|grad J|": 0.42, "b*": 2.72}
"""Exercise 7.9.2-3, noiseless rewards 1, 2, 4: the spread at the uniform policy, b = 10; the policy (0.8, 0.1, 0.1)."""
BOOK_RACE_ESCAPED = {"none": 2, "running": 12}
"""Exercise 7.9.5: of 12 runs at c = 15 from (0.05, 0.9, 0.05), about 2 without a baseline reach arm 3, all 12 with."""
METHODS = {"none": "no baseline", "running": "running-average baseline"}


@dataclass
class Config:
    rewards: tuple[float, float, float] = (1.0, 2.0, 4.0)
    """Mean reward of each arm before the offset (the chapter's worked example)."""
    offset: float = 10.0
    """c added to every reward in the variance valley."""
    sd: float = 1.0
    """Reward noise of the lab's valley and of the race (the exercises' spreads are noiseless)."""
    valley_max: float = 25.0
    """The valley's baselines run from 0 to this."""
    valley_points: int = 11
    """Baselines measured by Monte Carlo, evenly spaced on [0, valley_max] (J and b* are added)."""
    samples: int = 40_000
    """Monte Carlo draws per measured spread and per expected estimate."""
    demo_offset: float = 10.0
    """c of the demo's default race, from the uniform policy (wrong commitments counted)."""
    race_offset: float = 15.0
    """c of the race (exercise 7.9.5)."""
    race_start: tuple[float, float, float] = (0.05, 0.9, 0.05)
    """The policy every race run starts from (near the arm-2 corner)."""
    race_runs: int = 2000
    """Runs per method used to measure the escape rate; the first ``demo_runs`` are the demo's."""
    demo_runs: int = 12
    """Runs per method in the chapter's demo."""
    steps: int = 400
    """Single-pull steps per race run."""
    lr: float = 0.1
    """Step size alpha of the race."""
    commit: float = 0.5
    """A run has escaped to arm 3 when pi_3 exceeds this."""
    sigmas: float = 3.0
    """Width of the figure's error bars on measured spreads, in standard errors."""
    first_seed: int = 0
    """Seed of the torch.Generator behind every draw (``--first-seed``)."""

    QUICK: ClassVar[dict] = {"samples": 10_000, "race_runs": 300, "valley_points": 6}

    def __post_init__(self) -> None:
        if self.race_runs < self.demo_runs:
            raise SettingsError(f"race_runs={self.race_runs} must be >= demo_runs={self.demo_runs}; raise race_runs")
        start = torch.tensor(self.race_start)
        if (start <= 0).any() or abs(float(start.sum()) - 1.0) > 1e-6:
            raise SettingsError(f"race_start must be 3 positive probabilities summing to 1, got {self.race_start}")
        if self.valley_points < 2 or self.samples < 2:
            raise SettingsError("valley_points and samples must be >= 2")


def spread_with_se(bandit: GaussianBandit, theta: torch.Tensor, baseline: float, n: int,
                   generator: torch.Generator) -> tuple[float, float]:
    """Measured total variance of n single-pull estimates at theta [K], and its standard error."""
    estimates = bandit.sample_estimates(theta, baseline, n, generator)[1]
    return float(total_variance(estimates)), float(standard_error(squared_deviations(estimates)))


def valley(config: Config, result: Result, generator: torch.Generator) -> list[dict]:
    """The spread against b at the uniform policy, exact and measured, with the book's three numbers as claims."""
    bandit = GaussianBandit([r + config.offset for r in config.rewards], config.sd)
    theta = torch.zeros(3, dtype=torch.float64)
    value, b_star = float(bandit.exact_value(theta)), float(bandit.optimal_baseline(theta))
    grid = torch.linspace(0.0, config.valley_max, config.valley_points, dtype=torch.float64).tolist()
    rows = []
    for b in track(sorted(set(grid) | {value, b_star}), "variance valley"):
        measured, se = spread_with_se(bandit, theta, b, config.samples, generator)
        rows.append({"b": b, "exact spread": float(bandit.exact_total_variance(theta, b)),
                     "measured spread": measured, "se": se})
    minimum = float(bandit.exact_total_variance(theta, b_star))
    at_zero = float(bandit.exact_total_variance(theta, 0.0))
    closed = {"minimum": minimum, "at b = 0": at_zero, "b at the minimum": b_star}
    for name, (printed, tol) in BOOK_VALLEY.items():
        result.check_close(f"valley: closed-form {name} ({closed[name]:.4g}) vs the book's {printed:g}",
                           closed[name], printed, tol, f"half a unit of the book's printed precision ({tol:g})")
    for row in rows:
        if row["b"] in (0.0, value):
            label = "b = 0" if row["b"] == 0.0 else "b = J"
            result.check_z(f"valley: measured spread at {label} vs exact", row["measured spread"],
                           row["exact spread"], row["se"],
                           f"normal z of the measured total variance (se = {row['se']:.2g}, {config.samples} draws)")
    result.metrics.update({"valley: closed-form minimum spread": minimum, "valley: b*": b_star,
                           "valley: closed-form spread at b = 0": at_zero})
    return rows


def exercise_7_4(config: Config, result: Result, generator: torch.Generator) -> list[dict]:
    """The expected estimate and its bias under action-dependent 'baselines', exact and measured."""
    bandit = GaussianBandit(config.rewards, 0.0)
    theta = torch.zeros(3, dtype=torch.float64)
    gradient = bandit.exact_gradient(theta)
    rows = []
    for label, b in (("b(a) = (2, 2, 0)", (2.0, 2.0, 0.0)), ("b(a) = q(a)", config.rewards)):
        b = torch.tensor(b, dtype=torch.float64)
        exact = bandit.exact_expected_estimate(theta, b)
        estimates = bandit.sample_estimates(theta, b, config.samples, generator)[1]
        mean, se = estimates.mean(0), standard_error(estimates)
        for arm in range(3):
            rows.append({"baseline": label, "component": arm + 1, "exact expected": float(exact[arm]),
                         "measured mean": float(mean[arm]), "se": float(se[arm]),
                         "exact bias": float(exact[arm] - gradient[arm])})
        if label == "b(a) = (2, 2, 0)":
            for arm in range(3):
                result.metrics[f"ex 7.4: expected estimate {arm + 1}"] = float(exact[arm])
                result.metrics[f"ex 7.4: bias {arm + 1}"] = float(exact[arm] - gradient[arm])
                result.check_close(f"ex 7.4: expected estimate, component {arm + 1}", float(exact[arm]),
                                   BOOK_EX74["expected"][arm], 5e-4, "exact; the book's fractions to 3 decimals")
                result.check_close(f"ex 7.4: bias, component {arm + 1}", float(exact[arm] - gradient[arm]),
                                   BOOK_EX74["bias"][arm], 5e-4, "exact; the book's fractions to 3 decimals")
            z = (mean - exact) / se
            result.check_p("ex 7.4: measured mean estimate, largest |error| in se", float(z.abs().max()),
                           worst_of_p(z), "every component's mean = its exact expectation",
                           f"the largest of 3 normal z of a {config.samples}-draw mean, Bonferroni over the components")
    return rows


def exercise_7_9(config: Config, result: Result, generator: torch.Generator) -> list[dict]:
    """Spreads at the uniform policy (noiseless) and the policy (0.8, 0.1, 0.1): exact numbers as claims."""
    bandit = GaussianBandit(config.rewards, 0.0)
    uniform = torch.zeros(3, dtype=torch.float64)
    corner = torch.tensor([0.8, 0.1, 0.1], dtype=torch.float64).log()
    spread_10 = float(bandit.exact_total_variance(uniform, 10.0))
    measured, se = spread_with_se(bandit, uniform, 10.0, config.samples, generator)
    gradient = bandit.exact_gradient(corner)
    numbers = {"spread at b = 10": spread_10, "J": float(bandit.exact_value(corner)),
               "|grad J|": float(gradient.norm()), "b*": float(bandit.optimal_baseline(corner))}
    rows = [{"quantity": "spread at the uniform policy, b = 10", "exact": spread_10, "measured": measured, "se": se,
             "book": BOOK_EX79["spread at b = 10"]}]
    result.check_z("ex 7.9: measured spread at b = 10 vs exact", measured, spread_10, se,
                   f"normal z of the measured total variance (se = {se:.2g})")
    for name in ("spread at b = 10", "J", "|grad J|", "b*"):
        if name != "spread at b = 10":
            rows.append({"quantity": f"{name} at pi = (0.8, 0.1, 0.1)", "exact": numbers[name],
                         "book": BOOK_EX79[name]})
        result.metrics[f"ex 7.9: {name}"] = numbers[name]
        digits = len(f"{BOOK_EX79[name]}".split(".")[1])
        result.check_close(f"ex 7.9: {name}", numbers[name], BOOK_EX79[name], 0.5 * 10**-digits,
                           f"exact; the book's {digits} decimals")
    for arm in range(3):
        rows.append({"quantity": f"grad J component {arm + 1} at pi = (0.8, 0.1, 0.1)",
                     "exact": float(gradient[arm]), "book": BOOK_EX79["grad J"][arm]})
        result.metrics[f"ex 7.9: grad J {arm + 1}"] = float(gradient[arm])
        result.check_close(f"ex 7.9: grad J component {arm + 1}", float(gradient[arm]), BOOK_EX79["grad J"][arm],
                           5e-3, "exact; the book's 2 decimals")
    return rows


def race(config: Config, result: Result) -> tuple[list[dict], dict[str, torch.Tensor]]:
    """The c = 15 race from near the arm-2 corner: escapes to arm 3 per method; -> rows, share escaped [steps+1]."""
    bandit = GaussianBandit([r + config.race_offset for r in config.rewards], config.sd)
    start = torch.tensor(config.race_start, dtype=torch.float64).log()
    best = int(bandit.means.argmax())
    rows, shares = [], {}
    for baseline in track(METHODS, "race"):
        trajectory = train_bandit(bandit, baseline, config.race_runs, config.steps, config.lr,
                                  torch.Generator().manual_seed(config.first_seed), start=start)
        escaped = committed_arm(bandit.policy(trajectory.thetas), config.commit) == best   # [steps+1, runs]
        shares[baseline] = escaped.double().mean(1)
        rate = float(shares[baseline][-1])
        demo = int(escaped[-1, :config.demo_runs].sum())
        count = config.demo_runs * rate
        rows.append({"method": METHODS[baseline], f"demo: escaped of {config.demo_runs}": demo,
                     f"expected escaped of {config.demo_runs}": count,
                     f"book: escaped of {config.demo_runs}": BOOK_RACE_ESCAPED[baseline],
                     "all runs: escape rate": rate, "all runs: se": math.sqrt(rate * (1 - rate) / config.race_runs)})
        result.metrics[f"race: {METHODS[baseline]}: escape rate"] = rate
        book = BOOK_RACE_ESCAPED[baseline]
        check_book_counts(result, f"race: {METHODS[baseline]}: the book's {book} of {config.demo_runs} escaped, at our "
                          "rate", (book,), config.demo_runs, rate, config.race_runs)
    return rows, shares


def demo_race_wrong(config: Config, result: Result) -> list[dict]:
    """The demo's default race (c = 10 from the uniform policy): runs of 12 committed to a wrong arm, as a rate,
    claimed against the book's counts by bandit-race's own claim (:func:`check_race_counts`)."""
    bandit = GaussianBandit([r + config.demo_offset for r in config.rewards], config.sd)
    best, n, k = int(bandit.means.argmax()), config.race_runs, config.demo_runs
    rows, rates = [], {}
    for baseline in METHODS:
        trajectory = train_bandit(bandit, baseline, n, config.steps, config.lr,
                                  torch.Generator().manual_seed(config.first_seed))
        arm = committed_arm(bandit.policy(trajectory.thetas[-1]), config.commit)
        rate = rates[METHODS[baseline]] = float(((arm >= 0) & (arm != best)).double().mean())
        rows.append({"method": METHODS[baseline], f"expected wrong of {k}": k * rate,
                     "se": k * math.sqrt(rate * (1 - rate) / n), "all runs: wrong rate": rate})
    check_race_counts(result, f"demo race (c = {config.demo_offset:g}): ", rates, n)
    return rows


def valley_figure(bandit: GaussianBandit, rows: list[dict], value: float, b_star: float):
    """Spread against b on a log scale: the exact curve, measured points with 3-se bars, J and b* marked."""
    fig, ax = new_figure(figsize=(7, 4.2))
    b = torch.tensor([r["b"] for r in rows])
    fine = torch.linspace(0.0, float(b.max()), 200, dtype=torch.float64)
    ax.plot(fine, bandit.exact_total_variance(torch.zeros(3, dtype=torch.float64), fine), color="C0", label="exact")
    ax.errorbar(b, [r["measured spread"] for r in rows], yerr=[3 * r["se"] for r in rows], fmt="o", color="C1",
                ms=4, label="measured (3 se bars)")
    ax.axvline(value, color="C2", ls="--", label=f"J = {value:.2f}")
    ax.axvline(b_star, color="C3", ls=":", label=f"b* = {b_star:.2f}")
    ax.set_yscale("log")
    ax.set_xlabel("baseline b (reward units)")
    ax.set_ylabel("spread: total variance of one estimate")
    ax.set_title(f"The variance valley: means {tuple(bandit.means.tolist())}, noise {bandit.sd:g}, uniform policy")
    ax.legend(loc="lower left")
    return fig


def race_figure(shares: dict[str, torch.Tensor], config: Config):
    """Share of runs committed to arm 3 against step, one line per method."""
    fig, ax = new_figure(figsize=(7, 4.2))
    for color, (baseline, share) in zip(("C1", "C0"), shares.items()):
        ax.plot(torch.arange(len(share)), share, color=color, label=METHODS[baseline])
    ax.set_xlabel("step (one pull each)")
    ax.set_ylabel(f"share of runs with pi_3 > {config.commit:g}")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Race at c = {config.race_offset:g} from pi = {config.race_start}, {config.race_runs} runs each")
    ax.legend(loc="center right")
    return fig


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"The course chapter's bandit lab. The spread is the total variance of one single-pull estimate "
        f"(r - b)(e_a - pi). Valley: rewards {config.rewards} + {config.offset:g}, noise {config.sd:g}, uniform "
        f"policy, {config.samples} draws per measured point. Exercises 7.4 and 7.9 use noiseless rewards. Race: "
        f"c = {config.race_offset:g}, noise {config.sd:g}, lr {config.lr:g}, {config.steps} steps from "
        f"{config.race_start}, {config.race_runs} runs per method (the first {config.demo_runs} are the demo's).")
    generator = torch.Generator().manual_seed(config.first_seed)
    valley_rows = valley(config, result, generator)
    result.tables["valley"] = valley_rows
    result.tables["exercise_7_4"] = exercise_7_4(config, result, generator)
    result.tables["exercise_7_9"] = exercise_7_9(config, result, generator)
    race_rows, shares = race(config, result)
    result.tables["race"] = race_rows
    result.tables["demo_race_wrong"] = demo_race_wrong(config, result)
    bandit = GaussianBandit([r + config.offset for r in config.rewards], config.sd)
    value = float(bandit.exact_value(torch.zeros(3, dtype=torch.float64)))
    result.figures["variance_valley"] = valley_figure(bandit, valley_rows, value, result.metrics["valley: b*"])
    result.figures["race_escapes"] = race_figure(shares, config)
