"""lm-kl: REINFORCE with leave-one-out on the embedded tiny GPT-2, with beta = 0, 0.05 and 0.2 (llm-ch6 §6.11-6.12).

The book trains GPT-2 against a sentiment classifier: without the KL penalty the policy collapses
into repeating a few superlatives (KL to the reference 0 -> 80 nats per reply, distinct-1 0.483 ->
0.019); with it the reward still rises while the KL stays bounded. Here the same recipe runs
offline: the tiny GPT-2 pretrained on the synthetic reviews, the VADER compound score as the
reward, 16 prompts x 4 replies x 24 tokens per step. Every evaluation samples the same held-out
prompts and computes the exact KL per reply from the full distributions beside its k1 estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pglab.result import Result
from pglab.stats import bootstrap_se


@dataclass
class Config:
    betas: tuple[float, ...] = (0.0, 0.05, 0.2)
    """KL prices to compare (the first must be 0: the collapse run; the last is the tightest leash)."""
    steps: int = 120
    """Optimiser steps per run."""
    learning_rate: float = 3e-3
    """Adam step size."""
    prompts_per_step: int = 16
    """Prompts per step."""
    num_generations: int = 4
    """Replies per prompt (the leave-one-out group)."""
    prompt_length: int = 8
    """Tokens kept from each held-out review opening."""
    max_completion_length: int = 24
    """Reply tokens (end-of-text is banned, so every reply has exactly this many)."""
    eval_every: int = 30
    """Evaluate every this-many steps (and before and after training)."""
    eval_prompts: int = 64
    """Held-out prompts per evaluation."""
    eval_generations: int = 4
    """Replies per held-out prompt."""
    default_size: str = "full"
    """Size of the embedded default model (full | quick)."""
    seed: int = 0
    """Seed of prompts and sampling (the same for every beta)."""
    collapse_factor: float = 5.0
    """beta = 0 must cut distinct-1 by at least this factor (the book: 0.483 -> 0.019, 25-fold)."""
    kl_ratio: float = 10.0
    """beta = 0 must end with more than this times the KL of the last beta."""
    sigmas: float = 3.0
    """Statistical claims hold within this many standard errors."""
    bootstrap: int = 200
    """Bootstrap resamples for the standard error of distinct-1."""

    QUICK: ClassVar[dict] = {"default_size": "quick", "steps": 60, "eval_every": 30, "eval_prompts": 16,
                             "prompts_per_step": 8, "bootstrap": 50}


def _distinct_se(replies: list[str], resamples: int, seed: int) -> float:
    """Bootstrap standard error of distinct-1 over the replies."""
    from pglab.trainers.lm import distinct_n

    return bootstrap_se(lambda idx: distinct_n([replies[i] for i in idx], 1), np.arange(len(replies)), resamples,
                        np.random.default_rng(seed))


def run(config: Config, result: Result) -> None:
    from pglab.trainers.lm import RLConfig, curves_figure, train_lm

    if config.betas[0] != 0.0 or len(config.betas) < 2:
        raise ValueError("betas must start with 0 (the run without a penalty) and hold at least one positive beta")
    result.summary = (
        "REINFORCE with a leave-one-out baseline (16 prompts x 4 replies) on the embedded tiny GPT-2, rewarded by "
        "the VADER sentiment of prompt + reply, with a per-token k1 KL penalty in the reward (llm-ch6 §6.12). "
        "Without the penalty the policy collapses onto a few positive words; with it the reward rises and the KL "
        "stays bounded. Exact KL: the full-vocabulary KL summed over each held-out reply's positions.")
    runs, replies = {}, {}
    for beta in config.betas:
        cfg = RLConfig(model="default", default_size=config.default_size, reward="vader", max_steps=config.steps,
                       learning_rate=config.learning_rate, prompts_per_step=config.prompts_per_step,
                       num_generations=config.num_generations, prompt_length=config.prompt_length,
                       max_completion_length=config.max_completion_length, advantage="rloo", beta=beta,
                       eval_every=config.eval_every, eval_prompts=config.eval_prompts,
                       eval_generations=config.eval_generations, seed=config.seed, samples=4,
                       checkpoint_every=0)
        runs[f"beta = {beta:g}"] = run_ = train_lm(cfg, progress=True)
        replies[beta] = run_.evals
    keys = ("reward", "kl_exact", "kl_k1", "entropy", "ref_perplexity", "distinct_1", "distinct_2")
    result.tables["before_after"] = [
        {"beta": beta, "when": when, **{k: evals[i][k] for k in keys}}
        for beta, evals in replies.items() for when, i in (("start", 0), ("end", -1))]
    result.tables["curves"] = [{"beta": beta, "step": e["step"], **{k: e[k] for k in keys}}
                               for beta, evals in replies.items() for e in evals]
    result.tables["samples"] = [{"beta": beta, "step": e["step"], "text": text}
                                for beta, evals in replies.items() for e in (evals[0], evals[-1])
                                for text in e["samples"]]
    middle = runs[f"beta = {config.betas[1]:g}"]
    result.tables["worked_example"] = middle.worked_example
    result.tables["worked_example_check"] = [middle.worked_check]
    result.figures["curves"] = curves_figure(runs)

    k = config.sigmas
    zero, last = replies[0.0], replies[config.betas[-1]]
    start_d, end_d = zero[0]["distinct_1"], zero[-1]["distinct_1"]
    se_end = _distinct_se(runs["beta = 0"].final_replies, config.bootstrap, config.seed)
    factor = start_d / max(end_d, 1e-12)
    se_factor = factor * se_end / max(end_d, 1e-12)
    result.check_range("beta = 0: distinct-1 falls at least 5-fold (start / end)", factor,
                       low=config.collapse_factor,
                       tolerance=f"target from llm-ch6 §6.11's collapse; bootstrap se of the ratio = {se_factor:.2g}")
    ratio = zero[-1]["kl_exact"] / max(last[-1]["kl_exact"], 1e-12)
    se_ratio = ratio * math.hypot(zero[-1]["kl_exact_se"] / zero[-1]["kl_exact"],
                                  last[-1]["kl_exact_se"] / max(last[-1]["kl_exact"], 1e-12))
    result.check_range(f"exact KL at the end: beta = 0 over beta = {config.betas[-1]:g}", ratio,
                       low=config.kl_ratio, tolerance=f"se of the ratio (delta method) = {se_ratio:.2g}")
    for beta in config.betas[1:-1] if len(config.betas) > 2 else config.betas[1:]:
        ev = replies[beta]
        gain = ev[-1]["reward"] - ev[0]["reward"]
        se_gain = math.hypot(ev[-1]["reward_se"], ev[0]["reward_se"])
        result.check_range(f"beta = {beta:g}: held-out reward rises (end - start)", gain, low=k * se_gain,
                           tolerance=f"{k:g} se of the difference, se = {se_gain:.2g}")
        mid = min(ev[1:], key=lambda e: abs(e["step"] - config.steps / 2))
        se_growth = math.hypot(ev[-1]["kl_exact_se"], mid["kl_exact_se"])
        result.check_range(f"beta = {beta:g}: exact KL stops growing (end - step {mid['step']})",
                           ev[-1]["kl_exact"] - mid["kl_exact"], high=k * se_growth,
                           tolerance=f"{k:g} se of the difference, se = {se_growth:.2g}")
        result.metrics[f"beta{beta:g}_kl_bound_of_pi_star"] = max(gain, 0.0) / beta
    for beta, ev in replies.items():
        end = ev[-1]
        result.check_close(f"beta = {beta:g}: k1 estimate of the KL agrees with the exact KL (end)", end["kl_k1"],
                           end["kl_exact"], k * end["kl_k1_se"],
                           tolerance=f"{k:g} se of the k1 batch mean, se = {end['kl_k1_se']:.2g}")
    for beta, ev in replies.items():
        for when, i in (("start", 0), ("end", -1)):
            for key in ("reward", "kl_exact", "distinct_1", "entropy"):
                result.metrics[f"beta{beta:g}_{when}_{key}"] = ev[i][key]

