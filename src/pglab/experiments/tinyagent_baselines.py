"""tinyagent-baselines: the variance of TinyAgent's REINFORCE estimator under constant and per-task baselines.

agents-ch6 §6.4: each of 240 base-agent episodes (12 per training task) gives its score
g_n = grad sum_t m_t log pi over every parameter. The total variance of (R_n - b) g_n is a parabola
in a constant b, with its minimum at b* = sum R |g|^2 / sum |g|^2. Named baselines: none, the mean
reward, b*, the per-task mean measured on a separate batch (fixed before the probe is drawn), 0.5, 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.bugfix import make_tasks
from pglab.estimators import optimal_constant_baseline, total_variance
from pglab.models import build_tokenizer
from pglab.plots import new_figure
from pglab.result import Result
from pglab.stats import bootstrap_se
from pglab.threads import single_torch_thread
from pglab.trainers.cloning import make_base_agent
from pglab.trainers.probe import episode_gradients

BOOK = {"none": 44.7, "mean reward": 40.9, "b*": 39.3, "per-task mean": 40.8, "constant 0.5": 91.9,
        "constant 1.0": 322.9}
"""agents-ch6 §6.4: total variances over 240 episodes of the book's base agent (b* = 0.123, mean reward 0.188)."""


@dataclass
class Config:
    per_task: int = 12
    """Probe episodes per training task (20 tasks)."""
    seed: int = 0
    """Seed of the base agent."""
    probe_seed: int = 3
    """Seed of the probe batch's generator."""
    other_seed: int = 4
    """Seed of the separate batch that fixes the per-task baselines."""
    resamples: int = 200
    """Bootstrap resamples of the episodes for standard errors."""

    QUICK: ClassVar[dict] = {"per_task": 4, "resamples": 50}


def parabola(rewards: torch.Tensor, scores: torch.Tensor) -> tuple[float, float, float]:
    """Coefficients (a, c1, c0) of V(b) = a b^2 + c1 b + c0 = total variance of (R - b) g, from three exact points."""
    v = [float(total_variance((rewards - b)[:, None] * scores)) for b in (0.0, 0.5, 1.0)]
    a = 2 * (v[2] - 2 * v[1] + v[0])
    return a, v[2] - v[0] - a, v[0]


def run(config: Config, result: Result) -> None:
    from pglab.trainers.reinforce import sample_episodes

    with single_torch_thread():
        tokenizer = build_tokenizer(make_tasks("all"))
        model = make_base_agent(tokenizer, seed=config.seed)
        tasks = make_tasks("train")
        probe = sample_episodes(model, tokenizer, tasks, config.per_task, config.probe_seed)
        other = sample_episodes(model, tokenizer, tasks, config.per_task, config.other_seed)
        scores = episode_gradients(model, probe, probe.action_mask).double()      # [N, P]
    rewards = probe.rewards.double()
    task_mean = {}
    for info, r in zip(other.info, other.rewards.tolist()):
        task_mean.setdefault(info["task"], []).append(r)
    per_task = torch.tensor([float(np.mean(task_mean[i["task"]])) for i in probe.info], dtype=torch.float64)
    b_star = float(optimal_constant_baseline(rewards, scores))
    named = {"none": 0.0, "mean reward": float(rewards.mean()), "b*": b_star, "per-task mean": per_task,
             "constant 0.5": 0.5, "constant 1.0": 1.0}
    variance = {name: float(total_variance((rewards - b)[:, None] * scores)) for name, b in named.items()}
    a, c1, c0 = parabola(rewards, scores)
    vertex = -c1 / (2 * a)
    rng = np.random.default_rng(config.seed)
    norms = scores.pow(2).sum(-1)
    both = torch.stack([rewards, norms], 1)
    se_b_star = bootstrap_se(lambda s: float((s[:, 0] * s[:, 1]).sum() / s[:, 1].sum()), both, config.resamples, rng)

    result.summary = (
        f"{probe.batch_size} base-agent episodes, gradients over all {scores.shape[1]:,} parameters, mean reward "
        f"{float(rewards.mean()):.3f}. Total variance = trace of the covariance of (R - b) g over episodes. Standard "
        f"errors by the bootstrap over episodes ({config.resamples} resamples).")
    result.tables["total_variance"] = [
        {"baseline": name, "b": "varies" if isinstance(b, torch.Tensor) else b, "total_variance": variance[name],
         "relative_to_none": variance[name] / variance["none"], "book": BOOK[name]} for name, b in named.items()]
    result.tables["parabola"] = [{"a": a, "c1": c1, "c0": c0, "vertex": vertex, "b*": b_star, "se(b*)": se_b_star}]
    result.metrics.update({"b_star": b_star, "vertex": vertex, "se_b_star": se_b_star,
                           "mean_reward": named["mean reward"],
                           **{f"variance_{k.replace(' ', '_')}": v for k, v in variance.items()}})
    result.check_close("b* is the minimum of the measured parabola", b_star, vertex, se_b_star,
                       f"one bootstrap standard error of b* (se = {se_b_star:.3g})")
    ratio = variance["constant 1.0"] / variance["mean reward"]
    result.check_range("variance at b = 1 over the mean-reward baseline's", ratio, low=3.0,
                       tolerance="acceptance: more than 3x (book: 7.9x); exact on the same episodes")
    result.check_range("mean-reward baseline's variance over no baseline's", variance["mean reward"] / variance["none"],
                       high=1.0, tolerance="same episodes, so the comparison is exact for this sample (book: 0.92)")

    grid = np.linspace(-0.1, 1.05, 200)
    fig, ax = new_figure(figsize=(6.5, 4))
    ax.plot(grid, a * grid**2 + c1 * grid + c0, color="C0", label="total variance of (R - b) g")
    for k, (name, b) in enumerate(named.items()):
        if isinstance(b, float):
            ax.plot([b], [variance[name]], "o", color=f"C{k + 1}", label=f"{name} (b = {b:.3f})")
        else:
            ax.axhline(variance[name], color=f"C{k + 1}", ls=":", label=f"{name} ({variance[name]:.3g})")
    ax.set_xlabel("constant baseline b")
    ax.set_ylabel("total variance")
    ax.set_title(f"TinyAgent base agent, {probe.batch_size} episodes")
    ax.legend(fontsize=8)
    result.figures["variance_vs_baseline"] = fig
