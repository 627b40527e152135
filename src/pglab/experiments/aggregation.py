"""aggregation: the weight every loss aggregation mode puts on each token, measured by autograd (agents-ch6 §6.6).

The per-token weight w = dL / d(per-token term) is read off ``aggregate_loss`` and
``reinforce_loss`` and compared with the closed form of the ``pglab.estimators.losses`` docstring:
on three trajectories of 4, 8 and 24 policy tokens, on the base agent's probe batch (successes,
short failures, long failures, with advantages R - mean R), and as the rest of a batch grows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.envs.bugfix import make_tasks
from pglab.estimators import aggregate_loss, reinforce_loss
from pglab.models import build_tokenizer
from pglab.plots import new_figure
from pglab.result import Result
from pglab.threads import single_torch_thread
from pglab.trainers.cloning import make_base_agent

MODES = ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "constant")
BOOK_PROBE = {"token_mean": (0.132, 0.157, 1.00), "seq_mean_token_sum": (1.435, 1.712, 1.00),
              "seq_mean_token_mean": (0.152, 0.152, 0.33)}
"""agents-ch6 §6.6: push up, push down and per-token push long / short failures on the book's probe batch."""
EXACT = 1e-12


@dataclass
class Config:
    lengths: tuple[int, ...] = (4, 8, 24)
    """Policy tokens of the three trajectories of the weight table."""
    per_task: int = 12
    """Probe episodes of the base agent per training task (20 tasks)."""
    seed: int = 0
    """Seed of the base agent."""
    probe_seed: int = 3
    """Seed of the probe batch's generator."""
    batch: int = 64
    """Batch size of the right panel: one 10-token trajectory and batch - 1 others."""

    QUICK: ClassVar[dict] = {"per_task": 4}


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


def closed_form(mask: torch.Tensor, mode: str, norm_const: float | None = None) -> torch.Tensor:
    """The docstring's per-token weight of each mode, on policy positions [B, T]."""
    lengths, B = mask.sum(-1, keepdim=True), mask.shape[0]
    per = {"token_mean": 1 / lengths.sum(), "seq_mean_token_sum": 1 / B, "seq_mean_token_mean": 1 / (B * lengths),
           "constant": 1 / (norm_const or 1.0)}[mode]
    return per * mask


def run(config: Config, result: Result) -> None:
    from pglab.trainers.reinforce import sample_episodes

    lengths = torch.tensor(config.lengths)
    mask = mask_of(lengths)
    norm_const = float(len(lengths) * int(lengths.max()))
    table, worst = [], 0.0
    for mode in MODES:
        w = weights(mask, mode, norm_const)
        worst = max(worst, float((w - closed_form(mask, mode, norm_const)).abs().max()))
        table.append({"mode": mode, **{f"token weight, L={n}": float(w[i, 0]) for i, n in enumerate(config.lengths)},
                      **{f"trajectory total, L={n}": float(w[i].sum()) for i, n in enumerate(config.lengths)}})
    result.tables["weights"] = table

    with single_torch_thread():
        tokenizer = build_tokenizer(make_tasks("all"))
        model = make_base_agent(tokenizer, seed=config.seed)
        probe = sample_episodes(model, tokenizer, make_tasks("train"), config.per_task, config.probe_seed)
    pmask = probe.action_mask.double()
    rewards = probe.rewards.double()
    adv = rewards - rewards.mean()
    length = pmask.sum(-1)
    success = rewards > 0
    long = ~success & (length > length[~success].median())
    short = ~success & ~long
    rows, probe_worst = [], 0.0
    for mode in MODES[:3]:
        w = weights(pmask, mode, advantages=adv)                                  # = -A_n * w_mode per token
        probe_worst = max(probe_worst, float((w + adv[:, None] * closed_form(pmask, mode)).abs().max()))
        per_token = w.sum(-1) / length
        ratio = float(per_token[long].mean() / per_token[short].mean())
        rows.append({"mode": mode, "push_up": float(-w[success].sum()), "push_down": float(w[~success].sum()),
                     "per_token_long_over_short": ratio, "book": BOOK_PROBE[mode]})
    inverse_ratio = float((1 / length[long]).mean() / (1 / length[short]).mean())
    result.tables["probe_batch"] = rows
    groups = (("successes", success), ("short failures", short), ("long failures", long))
    result.tables["probe_lengths"] = [{"group": name, "episodes": int(sel.sum()),
                                       "mean_policy_tokens": float(length[sel].mean())} for name, sel in groups]

    grid = list(range(10, 41, 2))
    relative = {mode: [] for mode in MODES}
    for other in grid:
        batch_mask = mask_of(torch.tensor([10] + [other] * (config.batch - 1)))
        base_mask = mask_of(torch.full((config.batch,), 10))
        const = float(config.batch * 40)
        for mode in MODES:
            ratio = weights(batch_mask, mode, const)[0, 0] / weights(base_mask, mode, const)[0, 0]
            relative[mode].append(float(ratio))
    falls_to = relative["token_mean"][-1]
    expected_fall = config.batch * 10 / (10 + (config.batch - 1) * 40)

    result.summary = (
        "Per-token weights dL/d(term) of the four aggregation modes, read off by autograd and compared with the "
        f"closed forms of the losses module docstring; then on {probe.batch_size} base-agent episodes with "
        "advantages R - mean R, and as the other trajectories of a batch get longer.")
    result.metrics.update({"max_error_table": worst, "max_error_probe": probe_worst,
                           "token_mean_weight_at_40": falls_to,
                           **{f"{r['mode']}_long_over_short": r["per_token_long_over_short"] for r in rows}})
    result.check_range("weight table (4, 8, 24 tokens): largest gap to the closed form", worst, high=EXACT,
                       tolerance="float64 rounding: acceptance 1e-12")
    result.check_range("probe batch: largest gap of -A w to the closed form", probe_worst, high=EXACT,
                       tolerance="float64 rounding: acceptance 1e-12")
    smtm = rows[2]["per_token_long_over_short"]
    result.check_close("seq_mean_token_mean: per-token push long / short failures = short / long length", smtm,
                       inverse_ratio, EXACT, "float64 rounding; lengths as harmonic means (mean of 1/L)")
    result.check_close("token_mean: weight of a 10-token trajectory's token when the other 63 have 40", falls_to,
                       expected_fall, EXACT, "closed form 64*10 / (10 + 63*40); float64 rounding")
    flat = max(abs(v - 1) for mode in MODES[1:] for v in relative[mode])
    result.check_range("other modes: the same weight however long the rest of the batch", flat, high=EXACT,
                       tolerance="float64 rounding")

    fig, (left, right) = new_figure(1, 2, figsize=(11, 4))
    order = torch.argsort(length)
    const = float(probe.batch_size * int(length.max()))
    for k, mode in enumerate(MODES):
        total = weights(pmask, mode, const).sum(-1)
        left.plot(length[order], (total / total.sum())[order], "o-" if k == 2 else ".-", ms=3, label=mode)
        right.plot([sum(g for g in [10] + [o] * (config.batch - 1)) / config.batch for o in grid], relative[mode],
                   "o-", ms=3, label=mode)
    left.set_xlabel("policy tokens of the trajectory")
    left.set_ylabel("share of the batch's total weight")
    left.set_title(f"{probe.batch_size} base-agent episodes")
    right.set_xlabel(f"mean policy tokens of the batch ({config.batch} trajectories)")
    right.set_ylabel("weight of one token of a 10-token trajectory\n(relative to an all-10 batch)")
    right.set_title("token_mean's weight falls as the rest grows")
    for ax in (left, right):
        ax.legend(fontsize=8)
    result.figures["aggregation_weights"] = fig
