"""design-problems: three failure modes of REINFORCE measured on TinyAgent and a bandit (agents-ch6 §6.8).

1. Gradient noise: the cosine between the gradient estimates of two independent, disjoint batches
   of base-agent episodes (advantage R - mean R), for batches of 8, 32 and 120 episodes, on several
   base agents: the cosine is set by the gradient's signal-to-noise ratio, which varies with the
   cloning seed, so the book's agent is compared as one more draw from ours, and our agents' mean
   cosine is claimed at least half the book's (one-sided t over agents: the batch gradients agree).
2. Detaching the wrong tensor: on a five-call bandit with a baseline read off the policy's own
   probabilities, the estimate with the baseline detached against attached, vs the exact gradient:
   the detached one unbiased (Hotelling's T^2 over chunks of the samples), the attached one's error
   the book's 1.538 (a z on both estimates' se). Every draw (probe, pairs, bandit) moves with first_seed.
3. The zero-advantage batch: after one ordinary Adam step, a step on all-zero advantages moves the
   parameters (Adam's momentum) unless ``policy_gradient_step`` skips a zero gradient. That the guard
   leaves them bit-identical is a unit test (``tests/trainers/test_step.py``). The size of the unguarded move
   is not compared with the book's 0.4903: Adam's second step moves every parameter the first batch
   reached by lr x 0.670, so the move is lr x 0.670 x sqrt(parameters reached), a count set by the
   architecture and the vocabulary (the book's 0.4903 is 133,900 of its 157,244 parameters).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.bandit import GaussianBandit
from pglab.envs.bugfix import make_tasks
from pglab.estimators import pair_cosines, reinforce_loss
from pglab.models import build_tokenizer
from pglab.reporting.plots import log_axis, new_figure, outside_legend
from pglab.reporting.result import Result
from pglab.runtime.threads import single_torch_thread
from pglab.sampling.scoring import sequence_log_probs
from pglab.stats import check_one_more, chi2_upper_tail, half_unit, standard_error
from pglab.trainers.cloning import make_base_agent
from pglab.trainers.probe import episode_gradients
from pglab.trainers.step import policy_gradient_step

BOOK = {"cosine": {8: -0.092, 32: 0.165, 120: 0.418}, "detached": 0.001, "attached": 1.538, "moved": 0.4903}
"""agents-ch6 §6.8's numbers."""
BOOK_PAIRS = 20
"""Pairs of batches behind each of the book's mean cosines (its se: one pair's sd / sqrt(20))."""


@dataclass
class Config:
    sizes: tuple[int, ...] = (8, 32, 120)
    """Batch sizes compared (2 x the largest must not exceed the probe)."""
    pairs: int = 1000
    """Random disjoint pairs of batches per size (the book: 20). Cheap, since every cosine comes from one Gram
    matrix, and 1000 pairs bring the se of each mean cosine under 0.01."""
    per_task: int = 12
    """Probe episodes of each base agent per training task (20 tasks)."""
    seeds: int = 6
    """Base agents whose gradient noise is measured, cloned from seeds first_seed .. first_seed + seeds - 1."""
    first_seed: int = 0
    """Seed of the first base agent (the zero-advantage step and the growth claims use it)."""
    seed: int = 0
    """Seed of the pair draws and of the bandit's samples (offset by first_seed, so a new first seed draws anew)."""
    probe_seed: int = 3
    """Seed of the probe batch's generator (offset by first_seed)."""
    bandit_logits: tuple[float, ...] = (0.5, -0.2, 0.1, 0.0, 0.3)
    """Logits of the five-call bandit policy."""
    bandit_rewards: tuple[float, ...] = (1.0, 0.0, 0.0, 1.0, 0.0)
    """Pass (1) or fail (0) of each call."""
    bandit_samples: int = 200_000
    """Calls sampled for the bandit estimates."""
    lr: float = 2e-3
    """Adam learning rate of the zero-advantage experiment."""

    MIN_SEEDS: ClassVar[int] = 3
    QUICK: ClassVar[dict] = {"seeds": 3}
    """Every claim needs the 240-episode probes, which dominate the time: fewer base agents only."""


def detach_errors(config: Config, chunks: int = 100) -> dict[str, float]:
    """Relative error to the exact gradient of the estimate with the baseline b = pi(call 0) detached and attached.

    The samples are split into ``chunks`` equal parts whose estimates average to the full one, which
    gives each error its Monte Carlo standard error (delta method along the error's direction, key
    ``se <name>``), the noise level sqrt(trace Cov / N) / |grad J| (key ``noise``) and the detached
    estimate's p-value (key ``p detached``, see :func:`unbiased_p`).
    """
    logits = torch.tensor(config.bandit_logits, dtype=torch.float64, requires_grad=True)
    reward_of = torch.tensor(config.bandit_rewards, dtype=torch.float64)
    probs = torch.softmax(logits, -1)
    exact = GaussianBandit(config.bandit_rewards, sd=0.0).exact_gradient(logits.detach())   # pi * (r - J)
    gen = torch.Generator().manual_seed(config.seed + config.first_seed)
    n = config.bandit_samples - config.bandit_samples % chunks
    actions = torch.multinomial(probs.detach(), n, replacement=True, generator=gen).view(chunks, -1)
    logp = torch.log_softmax(logits, -1)[actions]                                    # [chunks, N / chunks]
    baseline = probs[0]                                                               # a function of the logits
    ones = torch.ones_like(logp[0])[None]
    out = {}
    for name in ("detached", "attached"):
        parts = []
        for k in range(chunks):
            if name == "detached":                                                    # reinforce_loss detaches A
                loss = reinforce_loss(logp[k][None], (reward_of[actions[k]] - baseline)[None], ones)
            else:                                                                     # the bug: A keeps its graph
                loss = -((reward_of[actions[k]] - baseline) * logp[k]).mean()
            parts.append(-torch.autograd.grad(loss, logits, retain_graph=True)[0])  # the estimate is minus it
        parts = torch.stack(parts)                                                    # [chunks, 5]
        error = parts.mean(0) - exact
        direction = error / error.norm()
        out[name] = float(error.norm() / exact.norm())
        out[f"se {name}"] = float((parts @ direction).std() / math.sqrt(chunks) / exact.norm())
        out[f"p {name}"] = unbiased_p(parts, exact)
        if name == "detached":
            out["noise"] = float(parts.var(0).sum().div(chunks).sqrt() / exact.norm())
    return out


def unbiased_p(parts: torch.Tensor, exact: torch.Tensor) -> float:
    """p-value of "the chunks' mean estimate is the exact gradient": parts [chunks, K] -> Hotelling's
    T^2 = e' Cov^+ e (e the mean's error, Cov the chunks' covariance / chunks, rank K - 1: softmax gradients sum to
    0), scaled by (chunks - r) / (chunks - 1) and read as a chi-square with r = rank degrees of freedom."""
    chunks = parts.shape[0]
    error = parts.mean(0) - exact
    cov = torch.cov(parts.T) / chunks
    rank = int(torch.linalg.matrix_rank(cov, rtol=1e-9))
    t2 = float(error @ torch.linalg.pinv(cov, rtol=1e-9, hermitian=True) @ error)
    return chi2_upper_tail(t2 * (chunks - rank) / (chunks - 1), rank)


def parameter_change(model: torch.nn.Module, before: list[torch.Tensor]) -> tuple[float, bool]:
    """(norm of the change, bit-identical?) of the parameters since ``before``."""
    after = list(model.parameters())
    change = math.sqrt(sum(float((a.detach() - b).pow(2).sum()) for a, b in zip(after, before)))
    return change, all(torch.equal(a.detach(), b) for a, b in zip(after, before))


def cosine_figure(rows: list[dict], episodes: int, pairs: int):
    """Mean cosine of two disjoint batches against batch size, with 2-se bars, beside the book's values."""
    sizes = [r["batch"] for r in rows]
    fig, ax = new_figure(figsize=(6.5, 4))
    ax.errorbar(sizes, [r["mean_cosine"] for r in rows], yerr=[2 * r["se"] for r in rows], fmt="o-", color="C0",
                capsize=4, label=f"measured: mean over {pairs} pairs, +- 2 se")
    book = [(r["batch"], r["book"]) for r in rows if r["book"] is not None]
    if book:
        ax.plot(*zip(*book), "s", color="0.35", mfc="none", label="the book (mean over 20 pairs)")
    ax.axhline(0.0, color="0.8", lw=0.8)
    log_axis(ax, sizes, axis="x")
    ax.set_xlabel("episodes per batch")
    ax.set_ylabel("cosine between the two batch gradients")
    ax.set_title(f"Gradient noise: TinyAgent base agent, probe of {episodes} episodes")
    outside_legend(ax, below=True)
    return fig


def run(config: Config, result: Result) -> None:
    from pglab.trainers.tinyagent import sample_episodes

    with single_torch_thread():
        tokenizer = build_tokenizer(make_tasks("all"))
        per_agent = {}
        for seed in range(config.first_seed, config.first_seed + config.seeds):
            agent = make_base_agent(tokenizer, seed=seed)
            batch = sample_episodes(agent, tokenizer, make_tasks("train"), config.per_task,
                                    config.probe_seed + config.first_seed)
            scores = episode_gradients(agent, batch, batch.action_mask).double()
            rewards = batch.rewards.double()
            centred = (rewards - rewards.mean())[:, None] * scores
            gen = torch.Generator().manual_seed(config.seed + config.first_seed)
            per_agent[seed] = {size: pair_cosines(centred, size, config.pairs, gen) for size in config.sizes}
            if seed == config.first_seed:
                base, probe = agent, batch
        measured = per_agent[config.first_seed]

        model = copy.deepcopy(base)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        adv = probe.rewards - probe.rewards.mean()
        first = policy_gradient_step(model, optimizer, reinforce_loss(sequence_log_probs(model, probe), adv,
                                                                      probe.action_mask))
        moved = {}
        for guard in (False, True):
            trial, trial_opt = copy.deepcopy((model, optimizer))       # one memo: the copy's Adam holds its params
            before = [p.detach().clone() for p in trial.parameters()]
            zero = reinforce_loss(sequence_log_probs(trial, probe), torch.zeros(probe.batch_size), probe.action_mask)
            stats = policy_gradient_step(trial, trial_opt, zero, skip_zero_grad=guard)
            moved[guard] = (*parameter_change(trial, before), stats)
    errors = detach_errors(config)

    rows = []
    for size, values in measured.items():
        rows.append({"batch": size, "mean_cosine": float(values.mean()), "se": float(standard_error(values)),
                     "book": BOOK["cosine"].get(size)})
    result.tables["gradient_cosine"] = rows
    result.tables["detach"] = [{"baseline": k, "relative_error": errors[k], "se": errors[f"se {k}"], "book": BOOK[k]}
                               for k in ("detached", "attached")]
    result.tables["zero_advantage_step"] = [
        {"guard": "skip zero gradient" if guard else "none (plain Adam step)", "loss": stats["loss"],
         "grad_norm": stats["grad_norm"], "skipped": stats["skipped"], "parameter_change": change,
         "bit_identical": same, "book": None if guard else BOOK["moved"]}
        for guard, (change, same, stats) in moved.items()]
    result.metrics.update({f"cosine_{r['batch']}": r["mean_cosine"] for r in rows})
    result.metrics.update({"detached_error": errors["detached"], "attached_error": errors["attached"],
                           "unguarded_change": moved[False][0], "first_step_grad_norm": first["grad_norm"]})
    result.summary = (
        f"Gradient noise on {probe.batch_size} base-agent episodes (gradients over all parameters, {config.pairs} "
        f"disjoint pairs per batch size); the detach bug on a five-call bandit ({config.bandit_samples:,} samples); "
        "one Adam step on all-zero advantages after an ordinary one, without and with the zero-gradient guard.")
    steps = list(zip(rows[:-1], rows[1:])) + ([(rows[0], rows[-1])] if len(rows) > 2 else [])
    for small, large in steps:
        gap, se = large["mean_cosine"] - small["mean_cosine"], math.hypot(large["se"], small["se"])
        result.check_z(f"cosine grows with batch size: batch {large['batch']} minus batch {small['batch']} is above 0",
                       gap, 0.0, se, f"one-sided, se of the difference over {config.pairs} pairs (se = {se:.3f}, "
                                     f"given base agent {config.first_seed}'s {probe.batch_size}-episode probe)",
                       side="at_least")
    result.tables["gradient_cosine_per_agent"] = [
        {"seed": seed, **{f"batch {size}": float(values.mean()) for size, values in cosines.items()}}
        for seed, cosines in per_agent.items()]
    # Not batch 8: the book's -0.092 (20 pairs) sits 2.5 of its own standard errors below the 0.046 its 120-episode
    # value implies (a mean cosine of n-episode batches is n s / (1 + n s), s the gradient's signal-to-noise ratio).
    for size, book in BOOK["cosine"].items():
        if size not in config.sizes or size == 8:
            continue
        means = [float(cosines[size].mean()) for cosines in per_agent.values()]
        book_se = float(measured[size].std()) / math.sqrt(BOOK_PAIRS)
        result.metrics.update({f"median cosine {size}": float(np.median(means)), f"lowest cosine {size}": min(means),
                               f"highest cosine {size}": max(means)})
        check_one_more(result, f"mean cosine of two disjoint batches of {size}: the book's {book} as one more base "
                               "agent", means, book, book_se=book_se)
        agents = np.asarray(means)
        result.check_z(f"mean cosine of two disjoint batches of {size} over our base agents: at least half the book's "
                       f"{book} (the batch gradients agree: not 0)", float(agents.mean()), book / 2,
                       float(agents.std(ddof=1)) / math.sqrt(len(agents)),
                       f"one-sided Student's t over {len(agents)} base agents", side="at_least", dof=len(agents) - 1)
    result.figures["cosine_vs_batch"] = cosine_figure(rows, probe.batch_size, config.pairs)
    detach_claims(result, errors, config)


def detach_claims(result: Result, errors: dict[str, float], config: Config) -> None:
    """The detach bug's claims from :func:`detach_errors`: the detached estimate is unbiased, the attached one's
    error is the book's."""
    noise = errors["noise"]
    result.check_p("detached baseline: the estimate's mean is the exact gradient (relative error shown)",
                   errors["detached"], errors["p detached"], f"within the Monte Carlo noise {noise:.2g}",
                   "Hotelling's T^2 of the error over 100 chunks of the samples, read as a chi-square with 4 dof "
                   f"(the book's {BOOK['detached']} is inside the noise)")
    # the book's 1.538 is one estimate like ours (its se taken equal), printed to 3 decimals (rounding sd u / sqrt 3)
    se = math.sqrt(2 * errors["se attached"] ** 2 + half_unit(str(BOOK["attached"])) ** 2 / 3)
    result.check_z("attached baseline: relative error to the exact gradient vs the book's 1.538", errors["attached"],
                   BOOK["attached"], se, f"se of the difference of two {config.bandit_samples:,}-sample estimates "
                   f"(ours: se = {errors['se attached']:.2g}, the book's taken equal) and the book's rounding")
