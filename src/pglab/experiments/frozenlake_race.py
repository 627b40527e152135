"""frozenlake-race: five REINFORCE weightings trained on the calm FrozenLake, 20 seeds each (d2l-14.6 §14.6.4).

The five variants differ only in the weight of each step's score: the episode's return, the
reward-to-go, the centred reward-to-go, the normalised reward-to-go, and the reward-to-go minus
a learned value table. Plain SGD at a shared step size keeps the differences in step size
visible; each update yields the batch success rate, the size of the parameter step and the mean
policy entropy (the loop is ``pglab.trainers.tabular.race_run``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.reporting.plots import median_band, new_figure, outside_legend, reference_line
from pglab.reporting.result import Result
from pglab.runner import run_seeds
from pglab.runtime.options import SettingsError
from pglab.stats import bootstrap_se, compare_seeds, paired_mean_ratio, standard_error
from pglab.trainers.tabular import VARIANTS, RaceJob, race_run

BOOK_TABLE = {  # d2l-14.6 §14.6.4.1: updates to 90% (median, fastest, slowest) and mean |step| over 40 updates
    "return": (60.0, 26, 92, 0.20),
    "reward-to-go": (40.0, 22, 95, 0.38),
    "centred": (58.0, 43, 108, 0.15),
    "normalised": (30.0, 8, 72, 0.76),
    "learned baseline": (40.5, 22, 84, 0.32),
}


@dataclass
class Config:
    seeds: int = 20
    """Training runs per variant (RNG seeds first_seed .. first_seed + seeds - 1)."""
    first_seed: int = 0
    """First RNG seed of the runs."""
    backend: str = "serial"
    """run_seeds backend: serial, process or ray."""
    updates: int = 150
    """Policy updates per run."""
    batch_episodes: int = 4
    """Episodes per update (small, to expose the variance)."""
    alpha: float = 16.0
    """Plain SGD step size of the policy table."""
    alpha_v: float = 0.1
    """Step size of the value table (every run keeps it; only 'learned baseline' uses it)."""
    gamma: float = 0.95
    """Discount."""
    variants: tuple[str, ...] = VARIANTS
    """Weightings to race."""
    smooth: int = 10
    """Window (updates) of the trailing mean behind updates-to-90% and the success figure."""
    target: float = 0.9
    """Success rate that counts as solved."""
    step_window: int = 40
    """Updates over which the mean |step| is taken."""
    bootstrap: int = 2000
    """Bootstrap resamples over seeds for the standard errors of medians and ratios."""
    bootstrap_seed: int = 0
    """RNG seed of the numpy Generator behind the bootstrap."""

    QUICK: ClassVar[dict] = {"seeds": 8, "updates": 100}
    MIN_SEEDS: ClassVar[int] = 3

    def __post_init__(self) -> None:
        unknown = set(self.variants) - set(VARIANTS)
        if unknown or "normalised" not in self.variants or "centred" not in self.variants:
            raise SettingsError(f"variants must be drawn from {VARIANTS} and include 'normalised' and 'centred'; "
                                f"got {self.variants}")


def trailing_mean(curves: np.ndarray, window: int) -> np.ndarray:
    """Mean over each window of ``window`` consecutive updates; curves [..., U] -> [..., U - window + 1]."""
    cumulative = np.cumsum(np.pad(curves, [(0, 0)] * (curves.ndim - 1) + [(1, 0)]), axis=-1)
    return (cumulative[..., window:] - cumulative[..., :-window]) / window


def updates_to_target(success: np.ndarray, window: int, target: float) -> np.ndarray:
    """Updates before the first window whose mean success reaches target (U if none); [seeds, U] -> [seeds]."""
    hit = trailing_mean(success, window) >= target
    return np.where(hit.any(-1), hit.argmax(-1), success.shape[-1])


def race_figures(runs: dict[str, dict[str, np.ndarray]], config: Config) -> dict:
    """Success rate (trailing mean) and entropy per update: median over runs with the interquartile band."""
    success, ax = new_figure(figsize=(8, 4.2))
    for k, (variant, run_) in enumerate(runs.items()):
        curve = trailing_mean(run_["success"], config.smooth)
        median_band(ax, np.arange(config.smooth, config.smooth + curve.shape[1]), curve, f"C{k}", variant)
    reference_line(ax, config.target, f"target {config.target:g}")
    ax.set_xlabel("update (policy steps, 4 episodes each)")
    ax.set_ylabel(f"batch success rate ({config.smooth}-update mean)")
    ax.set_title(f"FrozenLake race: median and interquartile range over {config.seeds} runs")
    outside_legend(ax, title="weighting")

    entropy, ax = new_figure(figsize=(8, 4.2))
    for k, (variant, run_) in enumerate(runs.items()):
        median_band(ax, np.arange(1, run_["entropy"].shape[1] + 1), run_["entropy"], f"C{k}", variant)
    reference_line(ax, math.log(4), "ln 4 (uniform policy)", ls="--")
    ax.set_xlabel("update (policy steps, 4 episodes each)")
    ax.set_ylabel("mean policy entropy (nats)")
    ax.set_title(f"Entropy spent while learning: median and interquartile range over {config.seeds} runs")
    outside_legend(ax, title="weighting")
    return {"success_rate": success, "entropy": entropy}


def check_step_ratio(result: Result, claim: str, ratio: float, se: float, book: float, seeds: int) -> None:
    """Normalised's steps against another weighting's, on a log scale (se of the log: se / ratio): at least half
    the book's growth (ratio >= sqrt(book)). Not claimed equal to the book's: the standard error over a few runs of
    a heavy-tailed step norm falls short of the spread between first seeds (a QUICK sweep failed it at 1 of 2)."""
    se_log = max(se / ratio, 1e-12)   # 0 only when every resample gives the same ratio: known to roundoff
    result.check_z(f"{claim}: at least half the book's {book:.2f}x on a log scale", math.log(ratio),
                   0.5 * math.log(book), se_log, f"log of our {seeds}-run ratio {ratio:.3g} (delta-method se of the "
                   f"log {se_log:.2g}) against log sqrt({book:.3g})", side="at_least")


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"{len(config.variants)} weightings x {config.seeds} seeds x {config.updates} updates of REINFORCE on the "
        f"calm 4x4 FrozenLake (no time limit), plain SGD at alpha = {config.alpha:g}, "
        f"{config.batch_episodes} episodes per update, value step {config.alpha_v:g}. Updates-to-90% counts the "
        f"updates before the first {config.smooth}-update window whose mean batch success reaches "
        f"{config.target:g}. Standard errors come from a bootstrap over seeds (the step ratios': the delta method "
        "over paired runs).")
    seeds = range(config.first_seed, config.first_seed + config.seeds)
    jobs = [RaceJob(variant, seed) for variant in config.variants for seed in seeds]
    curves = run_seeds(race_run, jobs, backend=config.backend, description="race runs", updates=config.updates,
                       batch_episodes=config.batch_episodes, alpha=config.alpha,
                       alpha_v=config.alpha_v, gamma=config.gamma)
    runs = {v: {k: c[i * config.seeds:(i + 1) * config.seeds] for k, c in curves.items()}
            for i, v in enumerate(config.variants)}
    rng = np.random.default_rng(config.bootstrap_seed)
    window = min(config.step_window, config.updates)
    reach, steps, rows = {}, {}, []
    for variant, run_ in runs.items():
        reach[variant] = updates_to_target(run_["success"], config.smooth, config.target)
        steps[variant] = run_["step"][:, :window].mean(1)  # per run
        book_row = BOOK_TABLE[variant]
        rows.append({
            "variant": variant,
            "median updates to 90%": float(np.median(reach[variant])), "book median": book_row[0],
            "fastest": int(reach[variant].min()), "book fastest": book_row[1],
            "slowest": int(reach[variant].max()), "book slowest": book_row[2],
            f"mean step norm, first {window}": float(steps[variant].mean()), "book mean step norm": book_row[3],
            "final entropy (median)": float(np.median(run_["entropy"][:, -1])),
        })
    result.tables["race"] = rows

    medians = {v: float(np.median(r)) for v, r in reach.items()}
    runner_up = min((v for v in medians if v != "normalised"), key=medians.get)
    gap = medians[runner_up] - medians["normalised"]
    pair = np.stack([reach["normalised"], reach[runner_up]], 1)
    # a median of whole updates moves in halves: that resolution keeps the se above 0 where every run ties
    gap_se = math.hypot(bootstrap_se(lambda p: np.median(p[:, 1]) - np.median(p[:, 0]), pair, config.bootstrap, rng),
                        0.5 / math.sqrt(3))
    book_gap = min(row[0] for v, row in BOOK_TABLE.items() if v != "normalised") - BOOK_TABLE["normalised"][0]
    result.check_z(f"median updates-to-90%: runner-up ({runner_up}) minus normalised, at least half the book's gap",
                   gap, book_gap / 2, gap_se, f"normal z, bootstrap se over runs = {gap_se:.3g}; the book's gap "
                   f"{book_gap:g} updates (normalised fastest)", side="at_least")
    ratios, ratio_ses = {}, {}
    for other in ("centred", "reward-to-go"):
        if other not in steps:
            continue
        ratio, se = paired_mean_ratio(steps["normalised"], steps[other])
        book = BOOK_TABLE["normalised"][3] / BOOK_TABLE[other][3]
        ratios[other], ratio_ses[other] = ratio, se
        check_step_ratio(result, f"mean step norm over the first {window} updates: normalised / {other}", ratio, se,
                         book, config.seeds)
    compare_seeds(result, f"updates to {config.target:g}", reach, [(runner_up, "normalised")])
    compare_seeds(result, f"mean step norm, first {window}", steps, [("normalised", other) for other in ratios])
    centred, se = float(steps["centred"].mean()), float(standard_error(torch.from_numpy(steps["centred"])))
    result.check_z(f"centred: mean step norm over the first {window} updates vs d2l-14.6", centred,
                   BOOK_TABLE["centred"][3], math.sqrt(2) * se,
                   f"normal z of the difference of our {config.seeds}-run mean and the book's, its se taken equal to "
                   f"ours (se = {se:.2g} over runs)")
    result.metrics.update({f"median_to90_{v}": m for v, m in medians.items()})
    result.metrics.update({f"fastest_to90_{v}": int(r.min()) for v, r in reach.items()})
    result.metrics.update({f"slowest_to90_{v}": int(r.max()) for v, r in reach.items()})
    result.metrics.update({f"step_norm_{v}": float(norms.mean()) for v, norms in steps.items()})
    result.metrics.update({"median_gap_runner_up": gap, "median_gap_se": gap_se, "step_norm_se_centred": se})
    result.metrics.update({f"step_ratio_normalised_over_{v}": r for v, r in ratios.items()})
    result.metrics.update({f"step_ratio_se_normalised_over_{v}": r for v, r in ratio_ses.items()})
    result.figures.update(race_figures(runs, config))
