"""bandit-race: course-ch7's baseline race, 12 runs on the shifted 3-armed bandit without and with a baseline.

Arms pay 1, 2, 4 plus an offset c = 10 (so 11, 12, 14) with noise sd 1; each run starts at the
uniform policy and takes 400 single-pull steps of size 0.1. Without a baseline every pulled arm is
pushed up (every reward is large and positive), so early luck can lock a run onto a worse arm; the
running-average baseline (0 before the first pull, as in `bandit-training`) removes that push.
Both methods draw from one generator with the same RNG seed. A run is committed to an arm once that arm's
probability exceeds ``commit`` (0.5, the demo's "pi_3 < 0.5 means not yet committed to arm 3").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.envs.bandit import GaussianBandit
from pglab.reporting.plots import new_figure
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.stats import binomial_se, compare_seeds
from pglab.trainers.bandit import check_race_counts, committed_arm, train_bandit

METHODS = {"no baseline": "none", "running-average baseline": "running"}
BOOK_WRONG = {"no baseline": 5, "running-average baseline": 0}
"""course-ch7: runs of 12 committed to a wrong arm after 400 steps."""
CORNERS = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.5, math.sqrt(3.0) / 2.0]], dtype=torch.float64)
"""Arm 1 bottom left, arm 2 bottom right, arm 3 (the best) on top: 'raise arm 3' points up."""


@dataclass
class Config:
    rewards: tuple[float, float, float] = (1.0, 2.0, 4.0)
    """Mean reward of each arm before the offset (course-ch7's worked example)."""
    offset: float = 10.0
    """c added to every reward; it leaves the gradient unchanged and inflates the variance."""
    sd: float = 1.0
    """Standard deviation of the reward noise."""
    lr: float = 0.1
    """Step size alpha."""
    steps: int = 400
    """Single-pull updates per run."""
    seeds: int = 12
    """Runs drawn on the triangle and counted as in the book's demo (the first ``seeds`` of ``rate_runs``)."""
    first_seed: int = 0
    """RNG seed of the one torch.Generator all runs draw from; both methods start from it. A different first
    seed gives a new, independent set of runs."""
    rate_runs: int = 2000
    """Runs per method used to measure the rate of wrong commitments (vectorised, all at once)."""
    commit: float = 0.5
    """A run is committed to an arm when that arm's probability exceeds this."""

    QUICK: ClassVar[dict] = {"rate_runs": 400}
    MIN_SEEDS: ClassVar[int] = 1
    """The demo draws and counts at least one run."""

    def __post_init__(self) -> None:
        if self.rate_runs < self.seeds:
            raise SettingsError(f"rate_runs={self.rate_runs} must be >= seeds={self.seeds}; raise rate_runs")
        if not 0.5 <= self.commit < 1.0:
            raise SettingsError(f"commit must be in [0.5, 1) so that at most one arm is committed to, got "
                                f"{self.commit}")


def barycentric(pi: torch.Tensor) -> torch.Tensor:
    """A distribution over 3 arms as a point of the triangle CORNERS; pi [..., 3] -> [..., 2]."""
    return pi @ CORNERS.to(pi.dtype)


def race_figure(paths: dict[str, torch.Tensor], arms: dict[str, torch.Tensor], best: int):
    """Policy paths on the probability triangle, one panel per method, colored by the arm each run commits to.

    paths: method -> pi [steps + 1, runs, 3]; arms: method -> committed arm [runs] (-1, grey: uncommitted).
    """
    colors = ("C3", "C1", "C0", "grey")  # arm 1, 2, 3, uncommitted (index -1)
    fig, axes = new_figure(1, len(paths), figsize=(5.2 * len(paths), 4.8))
    outline = torch.cat([CORNERS, CORNERS[:1]])
    for ax, (method, pi) in zip(axes, paths.items()):
        ax.plot(outline[:, 0], outline[:, 1], color="black", lw=0.8)
        points = barycentric(pi)
        for run, arm in enumerate(arms[method].tolist()):
            ax.plot(points[:, run, 0], points[:, run, 1], color=colors[arm], lw=0.9, alpha=0.8)
            ax.plot(*points[-1, run], "o", color=colors[arm], ms=4)
        ax.plot(*points[0, 0], "k*", ms=10)
        ax.annotate("start (uniform)", points[0, 0].tolist(), textcoords="offset points", xytext=(8, -4), fontsize=8)
        for arm, (x, y) in enumerate(CORNERS.tolist()):
            ax.annotate(f"arm {arm + 1}{' (best)' if arm == best else ''}", (x, y), textcoords="offset points",
                        ha="center", xytext=(0, 6 if y > 0 else -14), color=colors[arm])
        wrong = int(((arms[method] >= 0) & (arms[method] != best)).sum())
        ax.set_title(f"{method}: {wrong} of {pi.shape[1]} runs committed to a worse arm", fontsize=10)
        ax.set_aspect("equal")
        ax.set_xlim(-0.1, 1.1)
        ax.set_ylim(-0.12, 1.0)
        ax.axis("off")
    fig.suptitle("Policy paths on the probability triangle (colour: the arm a run commits to; grey: none)")
    return fig


def count_row(method: str, arm: torch.Tensor, best: int, shown: int) -> dict:
    """Commitments of one method: arm [runs] committed arm (-1: none); the first ``shown`` runs are the demo's."""
    n = len(arm)
    rate = float(((arm >= 0) & (arm != best)).double().mean())
    demo = arm[:shown]
    return {"method": method, "demo: wrong arm": int(((demo >= 0) & (demo != best)).sum()),
            "demo: wrong arm (book)": BOOK_WRONG[method], "demo: best arm": int((demo == best).sum()),
            "demo: uncommitted": int((demo < 0).sum()), "all runs: wrong rate": rate,
            "all runs: se": binomial_se(rate, n),
            "all runs: uncommitted rate": float((arm < 0).double().mean())}


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"course-ch7's baseline race: arms pay {config.rewards} + {config.offset:g} with noise sd {config.sd:g}, "
        f"lr {config.lr:g}, {config.steps} single-pull steps from the uniform policy. A run is committed to an "
        f"arm when its probability exceeds {config.commit:g}. The first {config.seeds} runs (the demo) are drawn "
        f"and counted; all {config.rate_runs} runs per method measure the rate.")
    bandit = GaussianBandit([r + config.offset for r in config.rewards], config.sd)
    best = int(bandit.means.argmax())
    rows, paths, arms, wrong = [], {}, {}, {}
    for method, baseline in METHODS.items():
        trajectory = train_bandit(bandit, baseline, config.rate_runs, config.steps, config.lr,
                                  torch.Generator().manual_seed(config.first_seed))
        pi = bandit.policy(trajectory.thetas)
        arm = committed_arm(pi[-1], config.commit)
        paths[method], arms[method] = pi[:, :config.seeds], arm[:config.seeds]
        wrong[method] = ((arm >= 0) & (arm != best)).double()
        rows.append(count_row(method, arm, best, config.seeds))
        result.metrics[f"{method}: wrong-commit rate"] = rows[-1]["all runs: wrong rate"]
        result.metrics[f"{method}: demo runs on a worse arm"] = rows[-1]["demo: wrong arm"]
        result.metrics[f"{method}: mean J at step {config.steps}, c not included"] = (
            float(bandit.exact_value(trajectory.thetas[-1]).mean()) - config.offset)
    result.tables["race"] = rows
    compare_seeds(result, "committed to a wrong arm (0 or 1 per run)", wrong,
                  [("no baseline", "running-average baseline")])

    without = rows[0]
    rate = without["all runs: wrong rate"]
    result.metrics.update({
        "no baseline: wrong-commit rate se": without["all runs: se"],
        # a demo of `seeds` runs is one binomial draw at the measured rate
        "no baseline: expected demo runs on a worse arm": config.seeds * rate,
        "no baseline: binomial se of the demo count": math.sqrt(config.seeds * rate * (1.0 - rate))})
    check_race_counts(result, "", {row["method"]: row["all runs: wrong rate"] for row in rows}, config.rate_runs)
    result.figures["paths_on_triangle"] = race_figure(paths, arms, best)
