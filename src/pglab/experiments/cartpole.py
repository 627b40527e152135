"""cartpole: REINFORCE on CartPole-v1 with three weightings: G_0, G_t, and G_t - V(s_t) (course-ch7 exercise 7.10).

The chapter's lab trains the same MLP policy with the same learning rate and the same number of
episodes, weighting each action's score by the whole return G_0, by the reward-to-go G_t, or by
G_t - V(s_t) with a small learned value network; only the variance of the weights differs. The
book's final mean returns over 4 seeds: about 40, 300 (wide spread across seeds) and 500. The
500-step time limit is a truncation: the critic bootstraps there (``pglab.trainers.cartpole``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pglab.reporting.plots import new_figure
from pglab.reporting.result import Result
from pglab.runner import run_seeds
from pglab.runtime.options import SettingsError
from pglab.stats import check_one_more, compare_seeds, rank_sum_p
from pglab.trainers.cartpole import VECTOR_MODES, WEIGHTINGS, CartPoleSettings, train_cartpole

BOOK_FINAL = {"return": 40.0, "reward_to_go": 300.0, "advantage": 500.0}
"""course-ch7 exercise 7.10: typical final mean returns over 4 seeds per weighting."""
BOOK_ROUNDING = 50.0 / math.sqrt(3.0)
"""The book prints its final returns roughly to the hundred (about 40, 300, 500): the sd of a rounding error
uniform on +-50, the standard error of its number."""
LABELS = {"return": "G_0 (whole return)", "reward_to_go": "G_t (reward-to-go)", "advantage": "G_t - V(s_t)"}
COLORS = {"return": "C3", "reward_to_go": "C1", "advantage": "C0"}


@dataclass
class Config:
    seeds: int = 6
    """Training runs per weighting: 6 is the fewest at which the reverse order could fail the family's Holm test
    (a full reversal gives rank-sum p = 1/924; 4 seeds give at best 1/70, above the family's 1%)."""
    first_seed: int = 0
    """Seeds used: first_seed .. first_seed + seeds - 1 (the same for every weighting)."""
    backend: str = "process"
    """run_seeds backend: serial, process or ray (each run uses one torch thread)."""
    weightings: tuple[str, ...] = WEIGHTINGS
    """Weightings to train: return (G_0), reward_to_go (G_t), advantage (G_t - V(s_t))."""
    updates: int = 40
    """Policy updates per run."""
    envs: int = 16
    """Environments in the vector env; one complete episode from each per update."""
    vector: str = "sync"
    """gymnasium vector env: sync (SyncVectorEnv) or async (AsyncVectorEnv, one process per env)."""
    lr: float = 0.01
    """Adam step size of the policy, the same for every weighting."""
    value_lr: float = 0.01
    """Adam step size of the value network (the advantage weighting only)."""
    value_epochs: int = 10
    """Full-batch value steps per update."""
    hidden: int = 32
    """Width of the two hidden layers of the policy and value MLPs."""
    gamma: float = 0.99
    """Discount of the returns that weigh the scores."""
    max_episode_steps: int = 500
    """CartPole-v1's time limit (a truncation)."""
    final_updates: int = 5
    """The final mean return of a run averages its last this many updates (envs episodes each)."""
    book_claim: bool = True
    """Claim each weighting's final return against the book's 40, 300, 500 (off at QUICK size: too few updates)."""

    QUICK: ClassVar[dict] = {"seeds": 5, "backend": "serial", "weightings": ("return", "advantage"), "updates": 14,
                             "envs": 8, "final_updates": 3, "book_claim": False}
    MIN_SEEDS: ClassVar[int] = 3
    """With 2 seeds per weighting no order could be contradicted and a prediction interval is all but unbounded."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weightings) - set(WEIGHTINGS))
        if unknown:
            raise SettingsError(f"unknown weightings {unknown}; pass some of {', '.join(WEIGHTINGS)}")
        if self.vector not in VECTOR_MODES:
            raise SettingsError(f"vector must be one of {', '.join(VECTOR_MODES)}, got {self.vector!r}")
        if not 1 <= self.final_updates <= self.updates:
            raise SettingsError(f"final_updates must be in [1, updates={self.updates}], got {self.final_updates}")


def final_returns(curves: np.ndarray, final_updates: int) -> np.ndarray:
    """Mean return of each run over its last ``final_updates`` updates; curves [seeds, updates] -> [seeds]."""
    return curves[:, -final_updates:].mean(1)


def curves_figure(curves: dict[str, np.ndarray], envs: int, limit: int):
    """Mean episode return per update against episodes: median line and interquartile band over seeds."""
    fig, ax = new_figure(figsize=(7, 4.2))
    for weighting, c in curves.items():
        episodes = envs * np.arange(1, c.shape[1] + 1)
        q25, median, q75 = np.percentile(c, [25, 50, 75], axis=0)
        ax.fill_between(episodes, q25, q75, color=COLORS[weighting], alpha=0.2)
        ax.plot(episodes, median, color=COLORS[weighting], label=f"{LABELS[weighting]}: median, IQR band")
    ax.axhline(limit, color="grey", ls=":", lw=1, label=f"time limit ({limit} steps)")
    ax.set_xlabel("episodes (all weightings see the same number)")
    ax.set_ylabel("mean return per episode (steps balanced)")
    ax.set_ylim(0, limit * 1.08)
    ax.set_title(f"REINFORCE on CartPole-v1, {next(iter(curves.values())).shape[0]} seeds per weighting")
    ax.legend(loc="upper left", fontsize=8)
    return fig


def run(config: Config, result: Result) -> None:
    seeds = range(config.first_seed, config.first_seed + config.seeds)
    curves, finals, timing = {}, {}, []
    start = time.perf_counter()
    for weighting in config.weightings:
        began = time.perf_counter()
        settings = CartPoleSettings(weighting=weighting, updates=config.updates, envs=config.envs, lr=config.lr,
                                    value_lr=config.value_lr, value_epochs=config.value_epochs, hidden=config.hidden,
                                    gamma=config.gamma, max_episode_steps=config.max_episode_steps,
                                    vector=config.vector)
        out = run_seeds(train_cartpole, seeds, backend=config.backend, description=f"cartpole {weighting}",
                        settings=settings)
        curves[weighting] = out["mean_return"]
        finals[weighting] = final_returns(out["mean_return"], config.final_updates)
        steps, seconds = float(out["env_steps"].sum()), float(out["seconds"].sum())
        timing.append({"weighting": LABELS[weighting], "wall s": time.perf_counter() - began, "env steps": steps,
                       "env steps per s (per worker)": steps / seconds})
    wall = time.perf_counter() - start
    load = _load_average()
    result.summary = (
        f"REINFORCE on gymnasium CartPole-v1 ({config.vector} vector env of {config.envs}), MLP {config.hidden}x"
        f"{config.hidden}, Adam lr {config.lr:g} for every weighting, {config.updates} updates x {config.envs} "
        f"episodes = {config.updates * config.envs} episodes per run, gamma {config.gamma:g}, {config.seeds} seeds "
        f"per weighting on the {config.backend} backend. Final return: mean of the last {config.final_updates} "
        f"updates. Wall time {wall:.0f} s ({load}).")
    result.tables["final_return"] = [
        {"weighting": LABELS[w], "median over seeds": float(np.median(f)), "q25": float(np.percentile(f, 25)),
         "q75": float(np.percentile(f, 75)), "per seed": ", ".join(f"{x:.0f}" for x in f), "book": BOOK_FINAL[w]}
        for w, f in finals.items()]
    result.tables["timing"] = timing + [{"weighting": "all", "wall s": wall,
                                         "env steps": sum(t["env steps"] for t in timing)}]
    result.metrics["env steps per second (all workers)"] = result.tables["timing"][-1]["env steps"] / wall
    medians = {w: float(np.median(f)) for w, f in finals.items()}
    for w, m in medians.items():
        result.metrics[f"{w}: median final return"] = m
    ordering_claims(result, finals, config)
    result.figures["learning_curves"] = curves_figure(curves, config.envs, config.max_episode_steps)


def ordering_claims(result: Result, finals: dict[str, np.ndarray], config: Config) -> None:
    """The book's order of the weightings and its final returns; finals: weighting -> final return [seeds].

    Each adjacent pair is claimed not reversed (a one-sided rank-sum test of the reverse order: a small p-value
    says the later weighting falls behind); each weighting's level is claimed against the book's (its number as one
    more of our runs), so a weighting that does not learn fails where the book's learns.
    """
    order = [w for w in WEIGHTINGS if w in finals]
    medians = {w: float(np.median(f)) for w, f in finals.items()}
    compare_seeds(result, "final return", {LABELS[w]: f for w, f in finals.items()},
                  [(LABELS[high], LABELS[low]) for low, high in zip(order[:-1], order[1:])])
    for low, high in zip(order[:-1], order[1:]):
        result.metrics[f"{low} < {high}: rank-sum p"] = rank_sum_p(finals[low], finals[high])
        p = rank_sum_p(finals[high], finals[low])
        result.check_p(f"final return: {LABELS[high]} not below {LABELS[low]} (one-sided rank-sum p of the reverse "
                       "order)", p, p, f"{LABELS[high]} not behind",
                       f"exact Mann-Whitney test that {LABELS[low]} beats {LABELS[high]} over the seeds' final "
                       f"returns ({config.seeds} seeds each). The book's order: about {BOOK_FINAL[low]:g} < "
                       f"{BOOK_FINAL[high]:g}; medians {medians[low]:.0f}, {medians[high]:.0f}; per-seed finals "
                       f"{', '.join(f'{x:.0f}' for x in finals[low])} vs {', '.join(f'{x:.0f}' for x in finals[high])}")
    if config.book_claim:
        for weighting in order:
            check_one_more(result, f"the book's final return of {LABELS[weighting]}, about "
                           f"{BOOK_FINAL[weighting]:g}, as one more of our runs", finals[weighting],
                           BOOK_FINAL[weighting], book_se=BOOK_ROUNDING)


def _load_average() -> str:
    """The machine's 1-minute load average and CPU count, for the report's timing line."""
    import os

    try:
        return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    except OSError:
        return f"{os.cpu_count()} CPUs"
