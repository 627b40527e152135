"""lm-kl: REINFORCE with leave-one-out on the embedded tiny GPT-2, with beta = 0, 0.05 and 0.2 (llm-ch6 §6.11-6.12).

The book trains GPT-2 against a sentiment classifier. Without the KL penalty the policy collapses
into repeated superlatives: entropy 4.12 -> 0.67 nats per token, distinct-1 0.483 -> 0.019, and
the reference perplexity falls (91 -> 61) because the collapsed text is likely under the
reference. With the penalty the reward still rises while the KL stays bounded. Here the same
recipe runs offline on several seeds: the tiny GPT-2 pretrained on the VADER-lexicon reviews
(whose outbursts of common strong words give the reward a degenerate mode inside the reference's
support), the log-odds of the VADER compound score as the reward (the book's reward is a
classifier's log-odds: more sentiment keeps paying instead of saturating), 16 prompts x 4
replies x 24 tokens per step, Adam at 3e-4 for 300 steps. Every evaluation
samples the same held-out prompts and computes the exact KL per reply from the full
distributions beside its k1 estimate. Claims use the mean over seeds and its standard error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.stats import compare_seeds

BOOK = {"entropy_fold": 4.12 / 0.67, "distinct_fold": 0.483 / 0.019, "ref_perplexity_ratio": 61 / 91}
"""llm-ch6 §6.11, beta = 0, start / end: entropy 6.1-fold, distinct-1 25-fold; reference perplexity end / start 0.67."""


@dataclass
class Config:
    betas: tuple[float, ...] = (0.0, 0.05, 0.2)
    """KL prices to compare (the first must be 0: the collapse run; the second is the leash whose reward must rise)."""
    seeds: int = 3
    """Independent runs per beta (prompts, sampling and updates each from its seed)."""
    first_seed: int = 0
    """Seeds used: first_seed, ..., first_seed + seeds - 1 (the same for every beta)."""
    steps: int = 300
    """Optimiser steps per run (the book: 300)."""
    learning_rate: float = 3e-4
    """Adam step size (at 1e-3 and above the penalised runs are thrown into the collapse in their first steps, while
    the KL, second order near the reference, barely pushes back; a collapsed group's replies are identical, so its
    leave-one-out advantages are 0 and nothing pulls it out)."""
    prompts_per_step: int = 16
    """Prompts per step."""
    num_generations: int = 4
    """Replies per prompt (the leave-one-out group)."""
    prompt_length: int = 8
    """Tokens kept from each held-out review opening."""
    max_completion_length: int = 24
    """Reply tokens (end-of-text is banned, so every reply has exactly this many)."""
    eval_every: int = 75
    """Evaluate every this-many steps (and before and after training)."""
    eval_prompts: int = 64
    """Held-out prompts per evaluation."""
    eval_generations: int = 4
    """Replies per held-out prompt."""
    default_size: str = "full"
    """Size of the embedded default model (full | quick)."""
    entropy_fold: float = 3.0
    """beta = 0 must cut the policy's entropy per token by at least this factor (the book: 6.1-fold)."""
    distinct_fold: float = 10.0
    """beta = 0 must cut distinct-1 by at least this factor (the book: 25-fold)."""
    perplexity_ratio: float = BOOK["ref_perplexity_ratio"]
    """beta = 0 must end with the reference perplexity at most this times its start: it falls, as the book's
    (91 -> 61, 0.67) does; ours fell to 0.30 and 0.41 at first seeds 0 and 100."""
    kl_drop: float = 0.1
    """A higher beta must end each seed's exact KL at least this share below the lower beta's (a chosen floor, so
    that a penalty with no effect fails; the drops measured at first seeds 0 and 100 were 21-70%)."""
    reward_gain: float = 1.0
    """The leash's held-out reward (sentiment log-odds) must rise by at least this much (the odds of a positive
    review e-fold; a chosen floor that no learning fails; ours rose by 6.8-6.9 at first seeds 0 and 100)."""

    MIN_SEEDS: ClassVar[int] = 3
    QUICK: ClassVar[dict] = {"default_size": "quick", "steps": 20, "eval_every": 10, "eval_prompts": 8,
                             "prompts_per_step": 4, "learning_rate": 3e-3}

    def __post_init__(self) -> None:
        if self.betas[0] != 0.0 or len(self.betas) < 2:
            raise SettingsError("betas must start with 0 (the run without a penalty) and hold at least one positive "
                                "beta")
        if list(self.betas) != sorted(set(self.betas)):
            raise SettingsError(f"betas must increase, got {self.betas}")


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean over runs (ddof 1; floored at 1e-12, so that runs that agree exactly
    make a claim that holds or fails by its sign)."""
    return float(np.mean(values)), max(1e-12, float(np.std(values, ddof=1) / math.sqrt(len(values))))


def fold_claims(result: Result, zero: dict[int, list[dict]], config: Config) -> None:
    """beta = 0's collapse: entropy and distinct-1 fall by at least the configured folds, and the reference
    perplexity falls to at most its configured ratio; each a one-sided Student's t on the mean log-ratio over
    seeds."""
    n = len(zero)
    specs = (("entropy", "entropy falls", config.entropy_fold, BOOK["entropy_fold"], 1),
             ("distinct_1", "distinct-1 falls", config.distinct_fold, BOOK["distinct_fold"], 1),
             ("ref_perplexity", "reference perplexity falls to", config.perplexity_ratio,
              BOOK["ref_perplexity_ratio"], -1))
    for key, what, target, book, sign in specs:
        logs = [sign * math.log(max(ev[0][key], 1e-12) / max(ev[-1][key], 1e-12)) for ev in zero.values()]
        # start / end for the folds (sign 1), end / start for the perplexity ratio (sign -1)
        m, se = mean_se(logs)
        result.metrics[f"beta0_{key}_fold" if sign > 0 else f"beta0_{key}_ratio"] = math.exp(m)
        origin = f"one-sided Student's t of the mean log-ratio over {n} seeds (se = {se:.3f}); the book's {book:.2g}"
        if sign > 0:
            result.check_z(f"beta = 0: {what} at least {target:g}-fold (log of start / end, mean over seeds)", m,
                           math.log(target), se, origin, side="at_least", dof=n - 1, full_size=True)
        else:
            result.check_z(f"beta = 0: {what} at most {target:.2g}x its start (log of end / start, mean over seeds)",
                           m, math.log(target), se, origin, side="at_most", dof=n - 1, full_size=True)


def rl_config(config: Config, seed: int, beta: float):
    """The ``train_lm`` settings of one (seed, beta) run."""
    from pglab.trainers.lm import RLConfig

    return RLConfig(model="default", default_size=config.default_size, reward="vader-logit", max_steps=config.steps,
                    learning_rate=config.learning_rate, prompts_per_step=config.prompts_per_step,
                    num_generations=config.num_generations, prompt_length=config.prompt_length,
                    max_completion_length=config.max_completion_length, advantage="rloo", beta=beta,
                    eval_every=config.eval_every, eval_prompts=config.eval_prompts,
                    eval_generations=config.eval_generations, seed=seed, samples=4, checkpoint_every=0)


def run(config: Config, result: Result) -> None:
    from pglab.trainers.lm import curves_figure, train_lm

    seeds = list(range(config.first_seed, config.first_seed + config.seeds))
    result.summary = (
        f"REINFORCE with a leave-one-out baseline ({config.prompts_per_step} prompts x {config.num_generations} "
        "replies) on the embedded tiny GPT-2 (pretrained on the VADER-lexicon reviews), rewarded by the VADER "
        "sentiment's log-odds of prompt + reply, with a per-token k1 KL penalty in the reward (llm-ch6 §6.12), "
        f"{len(seeds)} seeds per beta. Without the penalty the policy collapses into repeated strong words the "
        "reference already knows; with it the reward rises and the KL stays bounded. Exact KL: the "
        "full-vocabulary KL summed over each held-out reply's positions.")
    runs, evals = {}, {}
    for seed in seeds:
        for beta in config.betas:
            cfg = rl_config(config, seed, beta)
            runs[seed, beta] = run_ = train_lm(cfg, progress=True)
            evals[seed, beta] = run_.evals
    keys = ("reward", "kl_exact", "kl_k1", "entropy", "ref_perplexity", "distinct_1", "distinct_2")
    result.tables["before_after"] = [
        {"seed": seed, "beta": beta, "when": when, **{key: ev[i][key] for key in keys}}
        for (seed, beta), ev in evals.items() for when, i in (("start", 0), ("end", -1))]
    result.tables["curves"] = [{"seed": seed, "beta": beta, "step": e["step"], **{key: e[key] for key in keys}}
                               for (seed, beta), ev in evals.items() for e in ev]
    first = seeds[0]
    result.tables["samples"] = [{"seed": first, "beta": beta, "step": e["step"], "text": text}
                                for beta in config.betas for e in (evals[first, beta][0], evals[first, beta][-1])
                                for text in e["samples"]]
    middle = runs[first, config.betas[1]]
    result.tables["worked_example"] = middle.worked_example
    result.tables["worked_example_check"] = [middle.worked_check]
    result.figures["curves"] = curves_figure({f"beta = {beta:g}, seed {first}": runs[first, beta]
                                              for beta in config.betas})

    claims(result, evals, config)


def claims(result: Result, evals: dict[tuple[int, float], list[dict]], config: Config) -> None:
    """Every claim of lm-kl from the evaluations of each (seed, beta) run (``train_lm``'s ``evals``). Only the k1
    claims mean something at quick size; the collapse, the KL order and the bounded KL need 300 steps."""
    seeds = sorted({seed for seed, _ in evals})
    fold_claims(result, {seed: evals[seed, 0.0] for seed in seeds}, config)
    final_kl = {f"beta = {beta:g}": [evals[seed, beta][-1]["kl_exact"] for seed in seeds] for beta in config.betas}
    compare_seeds(result, "final exact KL", final_kl,
                  [(f"beta = {low:g}", f"beta = {high:g}") for low, high in zip(config.betas, config.betas[1:])])
    for seed in seeds:
        ends = [evals[seed, beta][-1] for beta in config.betas]
        for (low_beta, low), (high_beta, high) in zip(zip(config.betas, ends), zip(config.betas[1:], ends[1:])):
            se = math.hypot(low["kl_exact_se"], high["kl_exact_se"])
            result.check_z(f"seed {seed}: final exact KL falls by at least {config.kl_drop:.0%} from beta = "
                           f"{low_beta:g} to {high_beta:g}", low["kl_exact"] - high["kl_exact"],
                           config.kl_drop * low["kl_exact"], se,
                           f"one-sided, se of the difference over the held-out replies, se = {se:.2g}",
                           side="at_least", full_size=True)
    beta, n = config.betas[1], len(seeds)
    gains = [evals[seed, beta][-1]["reward"] - evals[seed, beta][0]["reward"] for seed in seeds]
    gain, se = mean_se(gains)
    result.check_z(f"beta = {beta:g}: held-out reward rises by at least {config.reward_gain:g} (end - start, mean "
                   "over seeds)", gain, config.reward_gain, se,
                   f"one-sided Student's t over {n} seeds, se = {se:.2g}", side="at_least", dof=n - 1,
                   full_size=True)
    growth, mid_steps = [], set()
    for seed in seeds:
        ev = evals[seed, beta]
        mid = min(ev[1:], key=lambda e: abs(e["step"] - config.steps / 2))
        growth.append(ev[-1]["kl_exact"] - mid["kl_exact"])
        mid_steps.add(mid["step"])
    m, se = mean_se(growth)
    result.check_z(f"beta = {beta:g}: the KL stays bounded: exact KL at the end minus at step {min(mid_steps)} is at "
                   "most 0 (mean over seeds)", m, 0.0, se,
                   f"one-sided Student's t over {n} seeds (se = {se:.2g}): the KL stops growing in the second half "
                   "of the run", side="at_most", dof=n - 1, full_size=True)
    result.metrics[f"beta{beta:g}_kl_bound"] = max(gain, 0.0) / beta
    for beta in config.betas:
        gaps = [evals[seed, beta][-1]["kl_k1"] - evals[seed, beta][-1]["kl_exact"] for seed in seeds]
        se = math.sqrt(sum(evals[seed, beta][-1]["kl_gap_se"] ** 2 for seed in seeds)) / len(seeds)
        result.check_z(f"beta = {beta:g}: k1 estimate of the KL agrees with the exact KL (end, mean over seeds)",
                       float(np.mean(gaps)), 0.0, se, f"se of the mean k1 - exact over the seeds' held-out prompts, "
                                                      f"se = {se:.2g}")
    for beta in config.betas:
        for when, i in (("start", 0), ("end", -1)):
            for key in ("reward", "kl_exact", "distinct_1", "entropy", "ref_perplexity"):
                result.metrics[f"beta{beta:g}_{when}_{key}"] = float(np.mean([evals[s, beta][i][key] for s in seeds]))
