"""tokenworld-training: REINFORCE, leave-one-out and GAE with a learned critic in the token world (llm-ch6 §6.10).

Every seed trains its own tabular policy (one logit per state, P(A) = 0.5 at the start) and, for
GAE, its own tabular critic (0 at the start, trained on the lambda-returns). All seeds advance
together: one update draws a [seeds, episodes, T] batch of replies. The success probability
after each update is exact (``TokenWorld.exact_values`` of the current policy), so the curves
carry no evaluation noise. Each method is run with the same generator seed, with and without a
constant added to every reply's reward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.tokenworld import TokenWorld
from pglab.plots import new_figure
from pglab.result import Result
from pglab.threads import single_torch_thread
from pglab.trainers.tokenworld import train_tokenworld

MILESTONES = (10, 25, 50, 150)
"""Updates after which the seed reports the mean success probability."""
SPREAD_AT = 25
"""Update at which the seed compares the spread between seeds."""


def _book(at: tuple[float, ...], median: int, sd: float, below: float | None = None) -> dict:
    return {**dict(zip(MILESTONES, at, strict=True)), "median": median, "sd": sd, "below": below}


BOOK_PLAIN = {  # llm-ch6 §6.10: success at the milestones, median updates to 0.9, sd over seeds at 25
    "no baseline": _book((0.476, 0.668, 0.839, 0.963), 72, 0.016),
    "leave-one-out": _book((0.476, 0.668, 0.842, 0.962), 71, 0.009),
    "GAE lambda 0": _book((0.388, 0.512, 0.759, 0.959), 85, 0.008),
    "GAE lambda 0.5": _book((0.414, 0.586, 0.808, 0.961), 78, 0.009),
    "GAE lambda 0.95": _book((0.468, 0.660, 0.839, 0.962), 72, 0.010),
    "GAE lambda 1": _book((0.476, 0.667, 0.842, 0.962), 71, 0.010),
}
BOOK_SHIFTED = {  # the same with +5 on every reward, and the share of seeds below 0.5 at the end
    "no baseline": _book((0.462, 0.607, 0.749, 0.954), 75, 0.194, 0.0),
    "leave-one-out": _book((0.476, 0.668, 0.842, 0.962), 71, 0.009, 0.0),
    "GAE lambda 0.95": _book((0.467, 0.651, 0.833, 0.961), 73, 0.069, 0.0),
}


@dataclass
class Config:
    seeds: int = 100
    """Independent training runs, all advanced together in one batch."""
    updates: int = 150
    """Policy updates per run (at least 25, where the spread is compared)."""
    episodes: int = 16
    """Replies sampled per update (the leave-one-out group)."""
    lr: float = 0.5
    """SGD step size of the policy logits (gradient: sum over tokens, mean over replies)."""
    critic_lr: float = 1.0
    """SGD step size of the tabular critic on 0.5 (V - lambda-return)^2 (sum over tokens, mean over replies)."""
    lambdas: tuple[float, ...] = (0.0, 0.5, 0.95, 1.0)
    """GAE lambdas (gamma = 1), each with its own learned critic."""
    shift: float = 5.0
    """Constant added to every reply's reward in the shifted runs."""
    init_p_a: float = 0.5
    """P(A) in every state at the start."""
    target: float = 0.9
    """Success probability whose first crossing is counted (median over seeds)."""
    sigmas: float = 3.0
    """Comparisons between methods must hold by this many standard errors."""
    seed: int = 0
    """Seed of the torch.Generator behind every reply; every method and shift starts from it."""

    QUICK: ClassVar[dict] = {"seeds": 40, "updates": 50}
    MIN_SEEDS: ClassVar[int] = 2


def method_names(lambdas: tuple[float, ...]) -> dict[str, float | None]:
    """Method name -> GAE lambda (None for the critic-free methods)."""
    return {"no baseline": None, "leave-one-out": None, **{f"GAE lambda {lam:g}": lam for lam in lambdas}}


def first_crossing(curve: np.ndarray, target: float) -> np.ndarray:
    """Updates until each seed first reaches ``target`` (inf if never); curve [updates + 1, S] -> [S]."""
    reached = curve >= target
    return np.where(reached.any(0), reached.argmax(0), np.inf)


def summary_row(method: str, curve: np.ndarray, config: Config, seed: dict | None) -> dict:
    """Mean success at the milestones, median updates to the target, spread at SPREAD_AT, beside the seed."""
    seed = seed or {}
    row: dict = {"method": method}
    for u in (m for m in MILESTONES if m <= config.updates):
        row[f"success@{u}"] = float(curve[u].mean())
        row[f"seed@{u}"] = seed.get(u, "")
    row[f"median updates to {config.target:g}"] = float(np.median(first_crossing(curve, config.target)))
    row["book median"] = seed.get("median", "")
    row[f"sd@{SPREAD_AT}"] = float(curve[SPREAD_AT].std(ddof=1))
    row[f"seed sd@{SPREAD_AT}"] = seed.get("sd", "")
    row["below 0.5 at the end"] = float((curve[-1] < 0.5).mean())
    if seed.get("below") is not None:
        row["seed below 0.5"] = seed["below"]
    return row


def spread_ratio(big: np.ndarray, small: np.ndarray) -> tuple[float, float]:
    """Ratio of the sd over seeds of two [S] samples and its standard error (normal approximation)."""
    n = len(big)
    ratio = float(big.std(ddof=1) / small.std(ddof=1))
    return ratio, ratio / math.sqrt(n - 1)      # each sd has relative se 1 / sqrt(2 (n - 1))


def mean_gap(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """mean(a) - mean(b) over seeds and its standard error, seeds treated as independent; [S], [S]."""
    return float(a.mean() - b.mean()), math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))


def check_claims(curves: dict, config: Config, result: Result) -> None:
    """The book's readings of the training comparison, each with its tolerance."""
    plain, shifted = curves[0.0], curves[config.shift]
    k, n = config.sigmas, config.seeds
    same = torch.equal(plain["leave-one-out"], shifted["leave-one-out"])
    gap = float((plain["leave-one-out"] - shifted["leave-one-out"]).abs().max())
    result.check(f"leave-one-out: every success curve identical with and without +{config.shift:g}", gap, same,
                 "== (bit-identical)", "exact: rewards 0/1 and 5/6 are exactly representable, leave_one_out "
                 "takes pairwise differences, and both runs draw the same random numbers")
    ratio, se = spread_ratio(shifted["no baseline"][SPREAD_AT].numpy(), plain["no baseline"][SPREAD_AT].numpy())
    result.metrics["no-baseline spread ratio at 25"] = ratio
    result.check_range(f"no baseline: sd over seeds at update {SPREAD_AT} grows with +{config.shift:g}", ratio,
                       low=5.0, tolerance=f"issue's threshold (seed: 0.194 / 0.016 = 12x); se of the ratio "
                       f"{se:.2g} from {n} seeds (normal approximation)")
    if 0.95 in config.lambdas:
        name = "GAE lambda 0.95"
        ratio, se = spread_ratio(shifted[name][SPREAD_AT].numpy(), plain[name][SPREAD_AT].numpy())
        result.check_range(f"GAE lambda 0.95: sd over seeds at update {SPREAD_AT} grows with +{config.shift:g}",
                           ratio, low=1.0 + k * se, tolerance=f"{k:g} se of the ratio above 1, se = {se:.2g} "
                           "(seed: 0.069 / 0.010)")
    at = {name: plain[name][SPREAD_AT].numpy() for name in plain}
    gae_names = [f"GAE lambda {lam:g}" for lam in sorted(config.lambdas)]
    if "GAE lambda 0" in at:
        diff, se = mean_gap(at["leave-one-out"], at["GAE lambda 0"])
        result.check_range(f"GAE lambda 0 trails leave-one-out at update {SPREAD_AT}", diff, low=k * se,
                           tolerance=f"{k:g} se of the difference, se = {se:.2g} (seed: 0.668 - 0.512)")
    for low, high in zip(gae_names, gae_names[1:], strict=False):
        diff, se = mean_gap(at[high], at[low])
        result.check_range(f"{high} ahead of {low} at update {SPREAD_AT}", diff, low=k * se,
                           tolerance=f"{k:g} se of the difference, se = {se:.2g}")


def curves_figure(curves: dict, shift: float):
    fig, axes = new_figure(1, 3, figsize=(14, 4))
    for i, name in enumerate(curves[0.0]):
        for ax, offset in zip(axes[:2], (0.0, shift), strict=True):
            ax.plot(curves[offset][name].mean(1), color=f"C{i}", label=name)
        for offset, style in ((0.0, "-"), (shift, "--")):
            axes[2].plot(curves[offset][name].std(1, ddof=1), style, color=f"C{i}")
    for ax, title in zip(axes[:2], ("rewards 0 / 1", f"rewards {shift:g} / {1 + shift:g}"), strict=True):
        ax.set_title(f"mean success probability, {title}")
        ax.set_xlabel("update")
    axes[0].legend(fontsize=8)
    axes[2].set_title(f"sd over seeds (solid: 0 / 1, dashed: +{shift:g})")
    axes[2].set_xlabel("update")
    fig.tight_layout()
    return fig


def run(config: Config, result: Result) -> None:
    if config.updates < SPREAD_AT:
        raise ValueError(f"updates={config.updates} is too short: pass at least {SPREAD_AT} (the spread is compared "
                         f"at update {SPREAD_AT})")
    result.summary = (
        f"{config.seeds} seeds x {config.updates} updates x {config.episodes} replies in the 6-token world, from "
        f"P(A) = {config.init_p_a:g} everywhere; success is the exact success probability of each seed's policy. "
        f"Every method runs once on rewards 0 / 1 and once with +{config.shift:g} on every reward, from the same "
        "generator seed.")
    methods = method_names(config.lambdas)
    curves: dict[float, dict[str, torch.Tensor]] = {}
    with single_torch_thread():
        for offset in (0.0, config.shift):
            world = TokenWorld(shift=offset)
            curves[offset] = {name: train_tokenworld(world, name, lam, runs=config.seeds, updates=config.updates,
                                                     episodes=config.episodes, lr=config.lr,
                                                     critic_lr=config.critic_lr, init_p_a=config.init_p_a,
                                                     generator=torch.Generator().manual_seed(config.seed))
                               for name, lam in methods.items()}
    for offset, table, seeds in ((0.0, "training", BOOK_PLAIN), (config.shift, "training_shifted", BOOK_SHIFTED)):
        result.tables[table] = [summary_row(name, curve.numpy(), config, seeds.get(name))
                                for name, curve in curves[offset].items()]
    check_claims(curves, config, result)
    result.figures["curves"] = curves_figure({k: {n: c.numpy() for n, c in v.items()} for k, v in curves.items()},
                                             config.shift)
