"""aggregation: the weight every loss aggregation mode puts on each token, measured by autograd (agents-ch6 §6.6).

The per-token weight w = dL / d(per-token term) is read off ``aggregate_loss`` and
``reinforce_loss``: on three trajectories of 4, 8 and 24 policy tokens (against the book's printed
table), on the probe batches of several base agents (successes, short failures, long failures,
with advantages R - mean R), and as the rest of a batch grows. That every weight equals the closed
form of the ``pglab.estimators.losses`` docstring is a unit test (``tests/estimators/test_losses.py``); the
claims here are the book's numbers. The probe's numbers depend on how long each base agent's
successes and failures are, which varies with its cloning seed, so the book's agent is compared as
one more draw from ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.bugfix import make_tasks
from pglab.estimators import aggregate_loss, reinforce_loss
from pglab.models import build_tokenizer
from pglab.reporting.plots import new_figure
from pglab.reporting.result import Result
from pglab.runtime.threads import single_torch_thread
from pglab.stats import check_one_more, check_printed
from pglab.trainers.cloning import make_base_agent

MODES = ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "constant")
BOOK_PROBE = {"token_mean": (0.132, 0.157, 1.00), "seq_mean_token_sum": (1.435, 1.712, 1.00),
              "seq_mean_token_mean": (0.152, 0.152, 0.33)}
"""agents-ch6 §6.6: push up, push down and per-token push long / short failures on the book's probe batch."""
BOOK_TABLE = {"token_mean": (("0.0278",) * 3, ("0.111", "0.222", "0.667")),
              "seq_mean_token_sum": (("0.3333",) * 3, ("1.333", "2.667", "8.000")),
              "seq_mean_token_mean": (("0.0833", "0.0417", "0.0139"), ("0.333",) * 3),
              "constant": (("0.0139",) * 3, ("0.056", "0.111", "0.333"))}
"""agents-ch6 §6.6's printed weight table for 4, 8 and 24 tokens (norm_const 3 x 24): per-token weights, totals."""
BOOK_LENGTHS = {"successes": 9.4, "short failures": 6.4, "long failures": 19.6}
"""agents-ch6 §6.6: mean policy tokens of the probe batch's groups."""


@dataclass
class Config:
    lengths: tuple[int, ...] = (4, 8, 24)
    """Policy tokens of the three trajectories of the weight table."""
    per_task: int = 12
    """Probe episodes of each base agent per training task (20 tasks)."""
    seeds: int = 6
    """Base agents, each cloned from its own seed (first_seed .. first_seed + seeds - 1)."""
    first_seed: int = 0
    """Seed of the first base agent (the figure's left panel shows it)."""
    probe_seed: int = 3
    """Seed of the probe batch's generator (offset by first_seed, so a new first seed draws anew)."""
    batch: int = 64
    """Batch size of the right panel: one 10-token trajectory and batch - 1 others."""

    MIN_SEEDS: ClassVar[int] = 3
    QUICK: ClassVar[dict] = {"per_task": 4, "seeds": 3}


def mask_of(lengths: torch.Tensor) -> torch.Tensor:
    """Left-aligned mask [B, max length] with lengths[b] ones in row b (float64)."""
    return (torch.arange(int(lengths.max()))[None] < lengths[:, None]).double()


def weights(mask: torch.Tensor, mode: str, norm_const: float | None = None,
            advantages: torch.Tensor | None = None) -> torch.Tensor:
    """dL/d(per-token term) [B, T] of aggregate_loss; with advantages [B], of reinforce_loss w.r.t. log pi."""
    x = torch.zeros_like(mask, requires_grad=True)
    if advantages is None:
        loss = aggregate_loss(x, mask, mode, norm_const)
    else:
        loss = reinforce_loss(x, advantages, mask, mode, norm_const)
    return torch.autograd.grad(loss, x)[0]


def probe_row(mask: torch.Tensor, rewards: torch.Tensor) -> dict:
    """The book's probe numbers for one batch: group lengths, pushes and per-token long / short ratios.

    mask [B, T] float64 policy positions, rewards [B] float64 (0 or 1); advantages are R - mean R.
    """
    adv = rewards - rewards.mean()
    length = mask.sum(-1)
    success = rewards > 0
    long = ~success & (length > length[~success].median())
    short = ~success & ~long
    row = {f"{name} tokens": float(length[sel].mean()) for name, sel in
           (("successes", success), ("short failures", short), ("long failures", long))}
    for mode in MODES[:3]:
        w = weights(mask, mode, advantages=adv)                                    # = -A_n * w_mode per token
        per_token = w.sum(-1) / length
        row[f"{mode} push up"] = float(-w[success].sum())
        row[f"{mode} push down"] = float(w[~success].sum())
        row[f"{mode} long / short"] = float(per_token[long].mean() / per_token[short].mean())
    row["token_mean push down / up"] = row["token_mean push down"] / row["token_mean push up"]
    return row


def weight_table(config: Config, result: Result) -> list[dict]:
    """The per-token weights and trajectory totals of every mode on the configured lengths; on the book's lengths
    (4, 8, 24) the claims that they equal its printed table (exact: autograd of a closed form, to its digits)."""
    lengths = torch.tensor(config.lengths)
    mask = mask_of(lengths)
    norm_const = float(len(lengths) * int(lengths.max()))
    table = []
    for mode in MODES:
        w = weights(mask, mode, norm_const)
        table.append({"mode": mode, **{f"token weight, L={n}": float(w[i, 0]) for i, n in enumerate(config.lengths)},
                      **{f"trajectory total, L={n}": float(w[i].sum()) for i, n in enumerate(config.lengths)}})
        if config.lengths == (4, 8, 24):
            per_token, totals = BOOK_TABLE[mode]
            check_printed(result, f"weight table, {mode}: per-token weights and trajectory totals",
                          [float(x) for x in w[:, 0]] + [float(x) for x in w.sum(-1)], per_token + totals)
    return table


def run(config: Config, result: Result) -> None:
    from pglab.trainers.tinyagent import sample_episodes

    result.tables["weights"] = weight_table(config, result)

    rows, first = [], None
    with single_torch_thread():
        tokenizer = build_tokenizer(make_tasks("all"))
        for seed in range(config.first_seed, config.first_seed + config.seeds):
            model = make_base_agent(tokenizer, seed=seed)
            probe = sample_episodes(model, tokenizer, make_tasks("train"), config.per_task,
                                    config.probe_seed + config.first_seed)
            rows.append({"seed": seed, **probe_row(probe.action_mask.double(), probe.rewards.double())})
            first = first or probe
    result.tables["probe_batches"] = rows
    result.tables["probe_vs_book"] = [
        {"mode": mode, **{f"median {k}": float(np.median([r[f"{mode} {k}"] for r in rows]))
                          for k in ("push up", "push down", "long / short")},
         "book (up, down, long / short)": BOOK_PROBE[mode]} for mode in MODES[:3]]
    for name, book in BOOK_LENGTHS.items():
        check_one_more(result, f"probe: the book's mean policy tokens of {name} ({book:g}) as one more base agent",
                       [r[f"{name} tokens"] for r in rows], book, log=True)
    book_ratio = BOOK_PROBE["token_mean"][1] / BOOK_PROBE["token_mean"][0]
    check_one_more(result, f"probe, token_mean: the book's push down / push up ({book_ratio:.3f}: failures are "
                           "longer) as one more base agent", [r["token_mean push down / up"] for r in rows],
                   book_ratio, log=True)
    check_one_more(result, "probe, seq_mean_token_mean: the book's per-token push long / short failures (0.33) as "
                           "one more base agent", [r["seq_mean_token_mean long / short"] for r in rows],
                   BOOK_PROBE["seq_mean_token_mean"][2], log=True)

    grid = list(range(10, 41, 2))
    relative = {mode: [] for mode in MODES}
    for other in grid:
        batch_mask = mask_of(torch.tensor([10] + [other] * (config.batch - 1)))
        base_mask = mask_of(torch.full((config.batch,), 10))
        const = float(config.batch * 40)
        for mode in MODES:
            ratio = weights(batch_mask, mode, const)[0, 0] / weights(base_mask, mode, const)[0, 0]
            relative[mode].append(float(ratio))

    result.summary = (
        "Per-token weights dL/d(term) of the four aggregation modes, read off by autograd: on the book's three "
        f"trajectories, then on the probe batches ({first.batch_size} episodes, advantages R - mean R) of "
        f"{config.seeds} base agents, and as the other trajectories of a batch get longer.")
    result.metrics.update({"token_mean_weight_at_40": relative["token_mean"][-1],
                           **{f"median {k}": float(np.median([r[k] for r in rows])) for k in rows[0] if k != "seed"}})

    fig, (left, right) = new_figure(1, 2, figsize=(11, 4))
    pmask = first.action_mask.double()
    length = pmask.sum(-1)
    order = torch.argsort(length)
    const = float(first.batch_size * int(length.max()))
    for k, mode in enumerate(MODES):
        total = weights(pmask, mode, const).sum(-1)
        left.plot(length[order], (total / total.sum())[order], "o-" if k == 2 else ".-", ms=3, label=mode)
        right.plot([sum(g for g in [10] + [o] * (config.batch - 1)) / config.batch for o in grid], relative[mode],
                   "o-", ms=3, label=mode)
    left.set_xlabel("policy tokens of the trajectory")
    left.set_ylabel("share of the batch's total weight")
    left.set_title(f"{first.batch_size} episodes of base agent {config.first_seed}")
    right.set_xlabel(f"mean policy tokens of the batch ({config.batch} trajectories)")
    right.set_ylabel("weight of one token of a 10-token trajectory\n(relative to an all-10 batch)")
    right.set_title("token_mean's weight falls as the rest grows")
    for ax in (left, right):
        ax.legend(fontsize=8)
    result.figures["aggregation_weights"] = fig
