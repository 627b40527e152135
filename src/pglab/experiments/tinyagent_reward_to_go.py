"""tinyagent-reward-to-go: causality on TinyAgent's episodes under a cost per call (agents-ch6 §6.5).

Each call costs 0.1, placed on its last token; the hidden-test reward is added on the last token of
the final call. Without causality every policy token is weighted by the episode's total return;
with reward-to-go, token t is weighted by the rewards from t on (``discounted_returns`` with
gamma = 1 over policy positions). Both estimators are measured per episode over all parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.bugfix import make_tasks
from pglab.estimators import discounted_returns, squared_deviations, total_variance
from pglab.models import build_tokenizer
from pglab.reporting.result import Result
from pglab.runtime.threads import single_torch_thread
from pglab.sampling.episodes import call_name
from pglab.stats import bootstrap_se, check_one_more, compare_seeds
from pglab.trainers.cloning import make_base_agent
from pglab.trainers.probe import call_starts, episode_gradients, step_cost_rewards

BOOK = {"total": 104.9, "to_go": 60.2, "reduction": 0.43}
"""agents-ch6 §6.5: total variances over 240 episodes with a cost of 0.1 per call."""


@dataclass
class Config:
    cost: float = 0.1
    """Reward of -cost on the last token of every call."""
    per_task: int = 12
    """Probe episodes per training task (20 tasks)."""
    seeds: int = 6
    """Base agents, each cloned from its own seed (first_seed .. first_seed + seeds - 1)."""
    first_seed: int = 0
    """Seed of the first base agent (the one-episode table shows one of its episodes)."""
    probe_seed: int = 3
    """Seed of the probe batch's generator."""
    resamples: int = 1000
    """Bootstrap resamples of the per-episode squared deviations."""

    MIN_SEEDS: ClassVar[int] = 3
    QUICK: ClassVar[dict] = {"per_task": 4, "seeds": 3, "resamples": 200}


def measure(seed: int, config: Config) -> dict:
    """Total variances of the total-return and reward-to-go estimators on one base agent's probe -> a row.

    Keys starting with ``_`` hold the probe, its reward-to-go [N, T] and total returns [N] for the one-episode table.
    """
    from pglab.trainers.tinyagent import sample_episodes

    with single_torch_thread():
        tokenizer = build_tokenizer(make_tasks("all"))
        model = make_base_agent(tokenizer, seed=seed)
        probe = sample_episodes(model, tokenizer, make_tasks("train"), config.per_task, config.probe_seed)
        rewards = step_cost_rewards(probe, config.cost)                              # [N, T]
        to_go = discounted_returns(rewards, 1.0, mask=probe.action_mask)            # [N, T], 0 off policy
        scores = episode_gradients(model, probe, probe.action_mask).double()
        total = rewards.sum(-1).double()
        total_grads = total[:, None] * scores
        to_go_grads = episode_gradients(model, probe, to_go).double()
    var_total, var_to_go = float(total_variance(total_grads)), float(total_variance(to_go_grads))
    deviations = torch.stack([squared_deviations(total_grads), squared_deviations(to_go_grads)], 1).numpy()
    se = bootstrap_se(lambda d: 1 - d[:, 1].mean() / d[:, 0].mean(), deviations, config.resamples,
                      np.random.default_rng(seed))
    return {"seed": seed, "episodes": probe.batch_size, "variance_total_return": var_total,
            "variance_reward_to_go": var_to_go, "reduction": 1 - var_to_go / var_total, "bootstrap se": se,
            "_probe": probe, "_to_go": to_go, "_total": total}


def run(config: Config, result: Result) -> None:
    rows = [measure(seed, config) for seed in range(config.first_seed, config.first_seed + config.seeds)]
    first = rows[0]
    probe, to_go, total = first["_probe"], first["_to_go"], first["_total"]
    for row in rows:
        for key in ("_probe", "_to_go", "_total"):
            row.pop(key)
    success = [b for b in range(probe.batch_size) if probe.rewards[b] > 0 and len(probe.info[b].calls) >= 3]
    b = success[0] if success else int(torch.argmax(probe.rewards))
    starts = call_starts(probe.action_mask)[b].nonzero().flatten().tolist()
    result.tables["one_episode"] = [
        {"call": call_name(action), "reward_to_go_at_first_token": float(to_go[b, j]),
         "total_return": float(total[b])} for action, j in zip(probe.info[b].calls, starts)]
    result.tables["variance"] = rows + [{"seed": "book", "variance_total_return": BOOK["total"],
                                          "variance_reward_to_go": BOOK["to_go"], "reduction": BOOK["reduction"]}]
    reductions = [row["reduction"] for row in rows]
    compare_seeds(result, "log total variance (a difference is the log of their ratio)",
                  {name: np.log([row[f"variance_{name}"] for row in rows])
                   for name in ("reward_to_go", "total_return")},
                  [("reward_to_go", "total_return")])
    result.metrics.update({"median reduction": float(np.median(reductions)), "lowest reduction": min(reductions),
                           "highest reduction": max(reductions),
                           "median bootstrap se": float(np.median([row["bootstrap se"] for row in rows]))})
    result.summary = (
        f"{len(rows)} base agents, {first['episodes']} probe episodes each, with a cost of {config.cost:g} per call. "
        "Total variance of the per-episode estimate over all parameters, weighting every policy token by the total "
        "return against by its reward-to-go. Each reduction's standard error is a bootstrap over episodes of their "
        "squared deviations; the spread over base agents is larger, so the book's agent is compared as one more.")
    check_one_more(result, f"variance reduction of reward-to-go over the total return: the book's "
                           f"{BOOK['reduction']:.0%} as one more base agent", reductions, BOOK["reduction"])
