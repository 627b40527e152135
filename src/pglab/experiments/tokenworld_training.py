"""tokenworld-training: REINFORCE, leave-one-out and GAE with a learned critic in the token world (llm-ch6 §6.10).

Every run trains its own tabular policy (one logit per state, P(A) = 0.5 at the start) and, for
GAE, its own tabular critic (0 at the start, trained on the lambda-returns). All runs advance
together: one update draws a [runs, episodes, T] batch of replies from one generator. The success
probability after each update is exact (``TokenWorld.exact_values`` of the current policy), so the
curves carry no evaluation noise. Each method is run from the same generator state, with and
without a constant added to every reply's reward.

The book does not state its step sizes: ``lr`` = 0.5 and ``critic_lr`` = 1.0 were fitted to its table
(docs/tokenworld.md). The learning-rate table reruns the first 25 updates at other policy step sizes
to show which of the book's readings do not depend on that fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.tokenworld import TokenWorld
from pglab.reporting.plots import new_figure, outside_legend
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.runtime.threads import single_torch_thread
from pglab.stats import bootstrap_se, compare_seeds, mean_gap
from pglab.trainers.tokenworld import train_tokenworld

MILESTONES = (10, 25, 50, 150)
"""Updates after which the book reports the mean success probability."""
SPREAD_AT = 25
"""Update at which the book compares the spread between runs."""
BOOK_RUNS = 100
"""llm-ch6 §6.10 trains 100 runs ("seeds") per method."""
PRINTED_MEDIAN, PRINTED_SD = 0.5, 0.0005
"""Half a unit of the book's last printed digit: medians in whole updates, sds to 3 decimals."""


def _book(at: tuple[float, ...], median: int, sd: float, below: float | None = None) -> dict:
    return {**dict(zip(MILESTONES, at, strict=True)), "median": median, "sd": sd, "below": below}


BOOK_PLAIN = {  # llm-ch6 §6.10: success at the milestones, median updates to 0.9, sd over runs at 25
    "no baseline": _book((0.476, 0.668, 0.839, 0.963), 72, 0.016),
    "leave-one-out": _book((0.476, 0.668, 0.842, 0.962), 71, 0.009),
    "GAE lambda 0": _book((0.388, 0.512, 0.759, 0.959), 85, 0.008),
    "GAE lambda 0.5": _book((0.414, 0.586, 0.808, 0.961), 78, 0.009),
    "GAE lambda 0.95": _book((0.468, 0.660, 0.839, 0.962), 72, 0.010),
    "GAE lambda 1": _book((0.476, 0.667, 0.842, 0.962), 71, 0.010),
}
BOOK_SHIFTED = {  # the same with +5 on every reward, and the share of runs below 0.5 at the end
    "no baseline": _book((0.462, 0.607, 0.749, 0.954), 75, 0.194, 0.0),
    "leave-one-out": _book((0.476, 0.668, 0.842, 0.962), 71, 0.009, 0.0),
    "GAE lambda 0.95": _book((0.467, 0.651, 0.833, 0.961), 73, 0.069, 0.0),
}


@dataclass
class Config:
    seeds: int = 100
    """Independent training runs, all advanced together in one batch."""
    first_seed: int = 0
    """RNG seed of the one torch.Generator behind every reply; every method and shift starts from it. A different
    first seed gives a new, independent set of runs."""
    updates: int = 150
    """Policy updates per run (at least 25, where the spread is compared)."""
    episodes: int = 16
    """Replies sampled per update (the leave-one-out group)."""
    lr: float = 0.5
    """SGD step size of the policy logits (gradient: sum over tokens, mean over replies); fitted to the book's table."""
    critic_lr: float = 1.0
    """SGD step size of the tabular critic on 0.5 (V - lambda-return)^2 (sum over tokens, mean over replies); fitted
    to the book's table."""
    lambdas: tuple[float, ...] = (0.0, 0.5, 0.95, 1.0)
    """GAE lambdas (gamma = 1), each with its own learned critic."""
    shift: float = 5.0
    """Constant added to every reply's reward in the shifted runs."""
    init_p_a: float = 0.5
    """P(A) in every state at the start."""
    target: float = 0.9
    """Success probability whose first crossing is counted (median over runs)."""
    robustness_lrs: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)
    """Policy step sizes of the learning-rate table (first 25 updates, critic_lr unchanged)."""
    bootstrap: int = 1000
    """Bootstrap resamples over runs for the standard error of a median."""
    bootstrap_seed: int = 0
    """RNG seed of the numpy Generator behind the bootstrap."""

    QUICK: ClassVar[dict] = {"seeds": 40, "bootstrap": 300}
    MIN_SEEDS: ClassVar[int] = 2
    """The spread over runs is a standard deviation: it needs two runs."""

    def __post_init__(self) -> None:
        if self.updates < SPREAD_AT:
            raise SettingsError(f"updates={self.updates} is too short: pass at least {SPREAD_AT} (the spread is "
                                f"compared at update {SPREAD_AT})")


def method_names(lambdas: tuple[float, ...]) -> dict[str, float | None]:
    """Method name -> GAE lambda (None for the critic-free methods)."""
    return {"no baseline": None, "leave-one-out": None, **{f"GAE lambda {lam:g}": lam for lam in lambdas}}


def first_crossing(curve: np.ndarray, target: float) -> np.ndarray:
    """Updates until each run first reaches ``target`` (inf if never); curve [updates + 1, S] -> [S]."""
    reached = curve >= target
    return np.where(reached.any(0), reached.argmax(0), np.inf)


def summary_row(method: str, curve: np.ndarray, config: Config, book: dict | None) -> dict:
    """Mean success at the milestones, median updates to the target, spread at SPREAD_AT, beside the book."""
    book = book or {}
    row: dict = {"method": method}
    for u in (m for m in MILESTONES if m <= config.updates):
        row[f"success@{u}"] = float(curve[u].mean())
        row[f"book@{u}"] = book.get(u, "")
    row[f"median updates to {config.target:g}"] = float(np.median(first_crossing(curve, config.target)))
    row["book median"] = book.get("median", "")
    row[f"sd@{SPREAD_AT}"] = float(curve[SPREAD_AT].std(ddof=1))
    row[f"book sd@{SPREAD_AT}"] = book.get("sd", "")
    row["below 0.5 at the end"] = float((curve[-1] < 0.5).mean())
    if book.get("below") is not None:
        row["book below 0.5"] = book["below"]
    return row


def table_metrics(rows: list[dict], label: str, config: Config, result: Result) -> None:
    """Each method's success at the milestones, median updates to the target and sd at SPREAD_AT, as metrics."""
    keys = [f"success@{u}" for u in MILESTONES if u <= config.updates]
    keys += [f"median updates to {config.target:g}", f"sd@{SPREAD_AT}"]
    for row in rows:
        result.metrics.update({f"{row['method']}{label}: {key}": row[key] for key in keys})


def log_sd_se(x: np.ndarray, config: Config, rng: np.random.Generator) -> float:
    """Bootstrap standard error of log sd(x) over runs, x [runs] (heavy tails make the normal approximation short)."""
    return bootstrap_se(lambda v: math.log(float(v.std(ddof=1))), x, config.bootstrap, rng)


def book_claims(curves: dict, config: Config, result: Result) -> None:
    """The book's table: median updates to the target and, for the critic-free methods, the sd over runs at
    SPREAD_AT, each a normal z test of the difference of ours and the book's (its se ours rescaled to its 100 runs,
    and its rounding). A GAE method's sd is compared as a metric only: it depends on how the critic is trained,
    which the book does not state (docs/tokenworld.md: no critic rule and step size we tried reproduces both its
    medians and its GAE spreads)."""
    n = config.seeds
    rng = np.random.default_rng(config.bootstrap_seed)
    scale = (n / BOOK_RUNS) ** 0.5     # the book's se: ours, rescaled from n runs to its 100
    fitted = f"at the step sizes fitted to this table (lr {config.lr:g}, critic_lr {config.critic_lr:g})"
    for offset, books in ((0.0, BOOK_PLAIN), (config.shift, BOOK_SHIFTED)):
        label = "" if offset == 0.0 else f", +{offset:g}"
        for name, book in books.items():
            if name not in curves[offset]:
                continue
            curve = curves[offset][name].numpy()
            reach = first_crossing(curve, config.target)
            median = float(np.median(reach))
            if np.isfinite(median):
                se = bootstrap_se(np.median, reach, config.bootstrap, rng)
                result.check_z(f"{name}{label}: median updates to {config.target:g} vs llm-ch6 §6.10", median,
                               book["median"], math.hypot(se, se * scale, PRINTED_MEDIAN / math.sqrt(3)),
                               f"normal z of the difference of our {n}-run median and the book's {BOOK_RUNS}-run one "
                               f"(bootstrap se {se:.2g}; the book's: ours x sqrt({n}/{BOOK_RUNS}); its rounding to "
                               f"whole updates), {fitted}")
            sd = float(curve[SPREAD_AT].std(ddof=1))
            se_log = log_sd_se(curve[SPREAD_AT], config, rng)
            combined = math.hypot(se_log, se_log * scale, PRINTED_SD / math.sqrt(3) / book["sd"])
            result.metrics[f"{name}{label}: se of log sd@{SPREAD_AT} vs the book"] = combined
            if name.startswith("GAE"):
                result.metrics[f"{name}{label}: log sd@{SPREAD_AT} minus the book's (se)"] = \
                    (math.log(sd) - math.log(book["sd"])) / combined
                continue
            result.check_z(f"{name}{label}: sd over runs at update {SPREAD_AT} vs llm-ch6 §6.10 (log)", math.log(sd),
                           math.log(book["sd"]), combined,
                           f"normal z of the difference of the logs of our sd ({sd:.3g}) and the book's (bootstrap se "
                           f"of our log sd {se_log:.2g}, the book's ours x sqrt({n}/{BOOK_RUNS}): the same relative "
                           f"spread; its rounding to 3 decimals), {fitted}")


def check_spread_growth(result: Result, claim: str, shifted: np.ndarray, plain: np.ndarray, book_ratio: float,
                        config: Config, rng: np.random.Generator) -> tuple[float, float]:
    """The sd over runs grows under the shift by at least half the book's growth on a log scale (ratio >=
    sqrt(book_ratio)); shifted, plain [runs] -> (ratio, its se)."""
    ratio = float(shifted.std(ddof=1) / plain.std(ddof=1))
    se_log = math.hypot(log_sd_se(shifted, config, rng), log_sd_se(plain, config, rng))
    result.check_z(claim, math.log(ratio), 0.5 * math.log(book_ratio), se_log,
                   f"log of the sd ratio (ratio {ratio:.3g}) against half the book's growth, log sqrt({book_ratio:.3g})"
                   f"; bootstrap se of the log ratio {se_log:.2g}", side="at_least")
    return ratio, ratio * se_log


def check_claims(curves: dict, config: Config, result: Result) -> None:
    """The book's readings of the comparison: the shift's effect on the spread, and GAE's lag behind leave-one-out."""
    plain, shifted = curves[0.0], curves[config.shift]
    rng = np.random.default_rng(config.bootstrap_seed + 1)
    for name in ("no baseline", "GAE lambda 0.95"):
        if name not in plain:
            continue
        book = BOOK_SHIFTED[name]["sd"] / BOOK_PLAIN[name]["sd"]
        ratio, _ = check_spread_growth(result, f"{name}: sd over runs at update {SPREAD_AT} grows with "
                                       f"+{config.shift:g} (log ratio, at least half the book's {book:.1f}x)",
                                       shifted[name][SPREAD_AT].numpy(), plain[name][SPREAD_AT].numpy(), book,
                                       config, rng)
        result.metrics[f"{name}: spread ratio at {SPREAD_AT} under +{config.shift:g}"] = ratio
    check_ordering(f"update {SPREAD_AT}", {name: c[SPREAD_AT].numpy() for name, c in plain.items()}, config, result,
                   book_share=0.5)


def check_ordering(label: str, at: dict[str, np.ndarray], config: Config, result: Result,
                   book_share: float) -> float:
    """GAE's success rises with lambda up to 0.95 and trails leave-one-out at lambda 0: each gap at least
    ``book_share`` of the book's gap at SPREAD_AT (0: not reversed), a one-sided normal test.

    at: method -> success [runs] at one update; returns the weakest gap in standard errors.
    """
    gae = [f"GAE lambda {lam:g}" for lam in sorted(config.lambdas) if lam < 1.0]
    pairs = list(zip(gae, gae[1:])) + ([("GAE lambda 0", "leave-one-out")] if "GAE lambda 0" in at else [])
    compare_seeds(result, f"success at {label}", at, [(high, low) for low, high in pairs])
    weakest = float("inf")
    for low, high in pairs:
        diff, se = mean_gap(at[high], at[low])
        weakest = min(weakest, diff / se)
        book = BOOK_PLAIN[high][SPREAD_AT] - BOOK_PLAIN[low][SPREAD_AT] if high in BOOK_PLAIN and low in BOOK_PLAIN \
            else 0.0
        result.check_z(f"{label}: {high} ahead of {low}", diff, book_share * book, se,
                       f"normal z of the difference of two {len(at[high])}-run means (se = {se:.2g}) against "
                       f"{book_share:g} of the book's gap {book:.3f} at update {SPREAD_AT}", side="at_least")
    return weakest


def robustness_rows(config: Config, result: Result) -> list[dict]:
    """The first SPREAD_AT updates at each of ``robustness_lrs``: mean success per method and the no-baseline
    spread ratio under the shift, with the qualitative claims of ``check_ordering`` and a ratio above 1."""
    methods = method_names(config.lambdas)
    rng = np.random.default_rng(config.bootstrap_seed + 2)
    rows = []
    for lr in config.robustness_lrs:
        def train(name: str, shift: float, lr: float = lr) -> np.ndarray:
            return train_tokenworld(TokenWorld(shift=shift), name, methods[name], runs=config.seeds, updates=SPREAD_AT,
                                    episodes=config.episodes, lr=lr, critic_lr=config.critic_lr,
                                    init_p_a=config.init_p_a,
                                    generator=torch.Generator().manual_seed(config.first_seed))[SPREAD_AT].numpy()

        at = {name: train(name, 0.0) for name in methods}
        book = BOOK_SHIFTED["no baseline"]["sd"] / BOOK_PLAIN["no baseline"]["sd"]
        ratio, se = check_spread_growth(result, f"lr {lr:g}: no-baseline sd over runs at update {SPREAD_AT} grows "
                                        f"with +{config.shift:g} (log ratio, at least half the book's {book:.1f}x)",
                                        train("no baseline", config.shift), at["no baseline"], book, config, rng)
        weakest = check_ordering(f"lr {lr:g}, update {SPREAD_AT}", at, config, result, book_share=0.0)
        if {"GAE lambda 0.95", "GAE lambda 1"} <= at.keys():   # not a claim (it depends on lr): quoted by the docs
            diff, gap_se = mean_gap(at["GAE lambda 1"], at["GAE lambda 0.95"])
            result.metrics[f"lr {lr:g}: GAE lambda 1 ahead of 0.95 at {SPREAD_AT} (se)"] = diff / gap_se
        result.metrics.update({f"lr {lr:g}: weakest ordering gap (se)": weakest,
                               f"lr {lr:g}: no-baseline sd ratio under +{config.shift:g}": ratio})
        rows.append({"lr": f"{lr:g}{' (fitted)' if lr == config.lr else ''}",
                     **{f"success@{SPREAD_AT}, {name}": float(v.mean()) for name, v in at.items()},
                     "weakest ordering gap (se)": weakest,
                     f"no-baseline sd ratio under +{config.shift:g}": ratio, "ratio se": se})
    return rows


def curves_figure(curves: dict[float, dict[str, np.ndarray]], shift: float):
    """Mean success without and with the shift, and the sd over runs; curves: offset -> method -> [updates+1, runs]."""
    fig, axes = new_figure(1, 3, figsize=(15, 4.2))
    for i, name in enumerate(curves[0.0]):
        for ax, offset in zip(axes[:2], (0.0, shift), strict=True):
            if name in curves[offset]:
                ax.plot(curves[offset][name].mean(1), color=f"C{i}", label=name)
        for offset, style in ((0.0, "-"), (shift, "--")):
            axes[2].plot(curves[offset][name].std(1, ddof=1), style, color=f"C{i}")
    for ax, title in zip(axes[:2], ("rewards 0 / 1", f"rewards {shift:g} / {1 + shift:g}"), strict=True):
        ax.set_title(f"mean over runs, {title}")
        ax.set_xlabel("update (16 replies each)")
        ax.set_ylabel("success probability (exact)")
        ax.set_ylim(0.3, 1.0)
    axes[1].sharey(axes[0])
    axes[2].set_title("spread between runs")
    axes[2].set_xlabel("update (16 replies each)")
    axes[2].set_ylabel("sd of the success probability over runs")
    axes[2].plot([], [], "k-", label="rewards 0 / 1")
    axes[2].plot([], [], "k--", label=f"rewards + {shift:g}")
    outside_legend(axes[0], below=True, ncols=2)
    outside_legend(axes[2], title="line style")
    return fig


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"{config.seeds} runs x {config.updates} updates x {config.episodes} replies in the 6-token world, from "
        f"P(A) = {config.init_p_a:g} everywhere; success is the exact success probability of each run's policy. "
        f"Every method runs once on rewards 0 / 1 and once with +{config.shift:g} on every reward, from the same "
        f"generator state. The step sizes lr = {config.lr:g} and critic_lr = {config.critic_lr:g} were fitted to the "
        "book's table (it does not state its own); the learning-rate table checks the qualitative readings at "
        f"lr {', '.join(f'{lr:g}' for lr in config.robustness_lrs)}.")
    methods = method_names(config.lambdas)
    curves: dict[float, dict[str, torch.Tensor]] = {}
    with single_torch_thread():
        for offset in (0.0, config.shift):
            world = TokenWorld(shift=offset)
            curves[offset] = {name: train_tokenworld(world, name, lam, runs=config.seeds, updates=config.updates,
                                                     episodes=config.episodes, lr=config.lr,
                                                     critic_lr=config.critic_lr, init_p_a=config.init_p_a,
                                                     generator=torch.Generator().manual_seed(config.first_seed))
                               for name, lam in methods.items()}
        for offset, table, books in ((0.0, "training", BOOK_PLAIN), (config.shift, "training_shifted", BOOK_SHIFTED)):
            result.tables[table] = [summary_row(name, curve.numpy(), config, books.get(name))
                                    for name, curve in curves[offset].items()]
            table_metrics(result.tables[table], "" if offset == 0.0 else f", +{offset:g}", config, result)
        result.metrics["largest share of runs below 0.5 at the end, any method and reward"] = max(
            row["below 0.5 at the end"] for table in ("training", "training_shifted") for row in result.tables[table])
        book_claims(curves, config, result)
        check_claims(curves, config, result)
        result.tables["learning_rates"] = robustness_rows(config, result)
    result.figures["curves"] = curves_figure({k: {n: c.numpy() for n, c in v.items()} for k, v in curves.items()},
                                             config.shift)
