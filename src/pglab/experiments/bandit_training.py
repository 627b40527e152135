"""bandit-training: REINFORCE on llm-ch6's 4-armed bandit over 200 runs, without and with a baseline.

Reproduces llm-ch6 §6.7 ("200 seeds x 400 steps"). Every run starts at theta = 0 and takes
one pull per step; all runs advance together in one tensor operation per step ([runs, K] theta),
drawing from one generator. Arms are numbered from 1 in tables, as the book numbers its replies
(arm 4 is the best).

The running baseline is the average of every reward this run has seen *before* the current pull:
0 before the first pull, then updated after each step, so it never depends on the action it weighs
(the same rule as ``EMABaseline(0.0, decay=None)`` read before ``update``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.envs.bandit import GaussianBandit
from pglab.reporting.plots import median_band, new_figure, outside_legend
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.stats import binomial_se, check_book_counts, compare_seeds, standard_error
from pglab.trainers.bandit import BASELINES, train_bandit

BOOK_MEAN_J = {"none": (7.352, 7.512, 7.655), "running": (7.637, 7.873, 7.951), "value": (7.648, 7.874, 7.951)}
BOOK_BAND = {"none": (6.984, 7.983), "running": (7.935, 7.964), "value": (7.933, 7.965)}
BOOK_BEST_ABOVE_HALF = {"none": 0.72, "running": 1.0, "value": 1.0}
BOOK_BEST_BELOW_TENTH = {"none": 0.24, "running": 0.0, "value": 0.0}
BOOK_FINAL_COUNTS = {"none": {2: 7, 3: 48, 4: 145}, "running": {4: 200}, "value": {4: 200}}
BOOK_RUNS = 200
"""llm-ch6 §6.7: runs ("seeds") behind every number above."""


@dataclass
class Config:
    means: tuple[float, ...] = (5.0, 6.0, 7.0, 8.0)
    """Mean rating of each arm (llm-ch6's four candidate replies; the last is the best)."""
    sd: float = 1.0
    """Standard deviation of the rating noise."""
    seeds: int = 200
    """Independent training runs, advanced together as rows of one [seeds, K] theta."""
    first_seed: int = 0
    """RNG seed of the one torch.Generator all runs draw from; every baseline starts from it (common random
    numbers). A different first seed gives a new, independent set of runs."""
    steps: int = 400
    """Updates per run, one pull each."""
    lr: float = 0.05
    """Step size of theta <- theta + lr (r - b)(e_a - pi)."""
    checkpoints: tuple[int, ...] = (100, 200, 400)
    """Steps at which mean J is reported (the book's 100, 200, 400)."""

    QUICK: ClassVar[dict] = {"seeds": 60}
    MIN_SEEDS: ClassVar[int] = 2
    """Standard errors over runs need two runs."""

    def __post_init__(self) -> None:
        if max(self.checkpoints) > self.steps:
            raise SettingsError(f"checkpoints {self.checkpoints} go past steps={self.steps}; lower them or raise steps")


def check_share(result: Result, claim: str, ours: float, runs: int, book: float) -> None:
    """Our share over ``runs`` runs against the book's over BOOK_RUNS: the normal z of the difference of two
    binomial shares (pooled se); equal shares of 0 or 1 agree exactly (p = 1)."""
    pooled = (ours * runs + book * BOOK_RUNS) / (runs + BOOK_RUNS)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / runs + 1.0 / BOOK_RUNS))
    tolerance = f"normal z of the difference of our {runs}-run share and the book's {BOOK_RUNS}-run one (pooled se)"
    if se > 0:
        result.check_z(claim, ours, book, se, tolerance)
    else:
        result.check_p(claim, ours, 1.0, f"= {book:g}", tolerance)


def summary_rows(baseline: str, values: torch.Tensor, best_prob: torch.Tensor, config: Config,
                 result: Result) -> list[dict]:
    """llm-ch6's statistics for one baseline, ours beside the book's; values [steps+1, runs], best_prob [runs]."""
    n = values.shape[1]
    rows = []
    for step, book_value in zip(config.checkpoints, BOOK_MEAN_J[baseline]):
        mean, se = float(values[step].mean()), float(standard_error(values[step]))
        rows.append({"baseline": baseline, "quantity": f"mean J at step {step}", "ours": mean, "se": se,
                     "book": book_value})
        result.metrics[f"{baseline}: mean J at step {step}"] = mean
        result.metrics[f"{baseline}: se of mean J at step {step} vs the book"] = math.sqrt(2) * se
        result.check_z(f"{baseline}: mean J at step {step} vs llm-ch6 §6.7", mean, book_value, math.sqrt(2) * se,
                       f"normal z of the difference of our {n}-run mean and the book's, its se taken equal to ours "
                       f"(se = {se:.2g} over runs)")
    low, q1, q3, high = torch.quantile(values[-1], torch.tensor([0.1, 0.25, 0.75, 0.9], dtype=values.dtype)).tolist()
    result.metrics.update({f"{baseline}: 10th pct of J at step {config.steps}": low,
                           f"{baseline}: 90th pct of J at step {config.steps}": high,
                           f"{baseline}: interquartile width of J at step {config.steps}": q3 - q1})
    rows.append({"baseline": baseline, "quantity": f"10th pct of J at step {config.steps}", "ours": low,
                 "book": BOOK_BAND[baseline][0]})
    rows.append({"baseline": baseline, "quantity": f"90th pct of J at step {config.steps}", "ours": high,
                 "book": BOOK_BAND[baseline][1]})
    for label, name, share, book_share in (
            ("P(best) > 0.5", "above 0.5", (best_prob > 0.5), BOOK_BEST_ABOVE_HALF[baseline]),
            ("P(best) < 0.1", "below 0.1", (best_prob < 0.1), BOOK_BEST_BELOW_TENTH[baseline])):
        p = float(share.double().mean())
        result.metrics[f"{baseline}: share of runs with P(best) {name}"] = p
        se = binomial_se(p, n)
        rows.append({"baseline": baseline, "quantity": f"share of runs with {label}", "ours": p, "se": se,
                     "book": book_share})
        if baseline == "none":
            check_share(result, f"none: share of runs with {label} vs llm-ch6 §6.7", p, n, book_share)
    return rows


def training_figure(values: dict[str, torch.Tensor]):
    """Median J per step with the interquartile band over runs, one colour per baseline; values [steps+1, runs]."""
    fig, ax = new_figure(figsize=(8, 4.2))
    for color, (baseline, v) in zip(("C1", "C0", "C2"), values.items()):
        median_band(ax, torch.arange(v.shape[0]).numpy(), v.T.numpy(), color, f"{baseline}: median, IQR band",
                    ls="--" if baseline == "value" else "-")
    ax.set_xlabel("step (one pull each)")
    ax.set_ylabel("J = expected rating of the policy (rating units)")
    ax.set_title(f"REINFORCE on the 4-armed bandit, {next(iter(values.values())).shape[1]} runs per baseline")
    outside_legend(ax, title="baseline")
    return fig


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"{config.seeds} REINFORCE runs per baseline on the Gaussian bandit with means {config.means}, one pull "
        f"per step, lr {config.lr:g}, from theta = 0. J is the exact value of each run's policy. The running "
        "baseline is the average of the rewards seen before the current pull (0 at the first). Comparisons "
        "with the book are normal z tests of the difference (standard errors over runs), judged together.")
    bandit = GaussianBandit(config.means, config.sd)
    best = int(bandit.means.argmax())
    rows, count_rows, values = [], [], {}
    for baseline in BASELINES:
        trajectory = train_bandit(bandit, baseline, config.seeds, config.steps, config.lr,
                                  torch.Generator().manual_seed(config.first_seed))
        values[baseline] = bandit.exact_value(trajectory.thetas)
        final_pi = bandit.policy(trajectory.thetas[-1])
        rows += summary_rows(baseline, values[baseline], final_pi[:, best], config, result)
        counts = torch.bincount(final_pi.argmax(-1), minlength=bandit.n_arms).tolist()
        for arm, count in enumerate(counts, start=1):
            count_rows.append({"baseline": baseline, "most likely arm at the end": arm, "ours": count,
                               "book": BOOK_FINAL_COUNTS[baseline].get(arm, 0)})
            result.metrics[f"{baseline}: runs ending most likely on arm {arm}"] = count
        on_best = counts[best] / config.seeds
        result.metrics[f"{baseline}: share ending on the best arm"] = on_best
        result.metrics[f"{baseline}: mean J at step {config.steps}"] = float(values[baseline][-1].mean())
        book_best = BOOK_FINAL_COUNTS[baseline].get(best + 1, 0) / BOOK_RUNS
        if baseline == "none":
            result.metrics["none: share ending on a worse arm"] = 1.0 - on_best
            check_share(result, "none: share of runs ending on a worse arm vs llm-ch6 §6.7", 1.0 - on_best,
                        config.seeds, 1.0 - book_best)
        else:
            check_book_counts(result, f"{baseline}: the book's {BOOK_RUNS} of {BOOK_RUNS} runs ending on the best "
                              "arm, at our rate", (BOOK_RUNS,), BOOK_RUNS, on_best, config.seeds)
    result.tables["training_summary"] = rows
    result.tables["final_most_likely_arm"] = count_rows
    compare_seeds(result, f"J at step {config.steps}", {b: v[-1] for b, v in values.items()},
                  [("running", "none"), ("value", "none"), ("value", "running")])
    result.figures["mean_J_with_band"] = training_figure(values)
