"""hf-agent: a Hugging Face GPT-2 as the agent in BugFixEnv, trained like TinyAgent (agents-ch6 §6.7).

The embedded default agent (a byte-level BPE on BugFixEnv's texts, a GPT-2 of TinyAgent's shape,
behaviour-cloned on scripted random and blind play) writes its calls as text, token in and token
out, and trains through the same ``train_episodes`` loop and ``pg_update`` as TinyAgent. Each seed
trains both agents with the same settings; the table puts them side by side. Claims use the
median over seeds, with binomial standard errors of the measured episodes.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pglab.envs.bugfix import make_tasks
from pglab.reporting.plots import new_figure
from pglab.reporting.result import Result
from pglab.stats import compare_seeds

SPLIT_TASKS = {"train": 16, "heldout": 10}
VALID_TARGET = 0.93
"""Valid calls after training: at least 0.93 on both splits (the book's trained agent: 0.951 and 0.974)."""


@dataclass
class Config:
    seeds: int = 3
    """Independent training runs (seeds first_seed, ...); the base agents are the cached defaults."""
    first_seed: int = 0
    """First RNG seed."""
    steps: int = 80
    """REINFORCE steps per run."""
    episodes_per_step: int = 64
    """Episodes per step."""
    eval_per_task: int = 8
    """Episodes per task in each measurement (before, after, and the held-out curve)."""
    default_size: str = "full"
    """The embedded default agent: full, or quick (built in seconds; the QUICK run's)."""

    MIN_SEEDS: ClassVar[int] = 1
    QUICK: ClassVar[dict] = {"seeds": 1, "steps": 2, "episodes_per_step": 8, "eval_per_task": 1,
                             "default_size": "quick"}


def run(config: Config, result: Result) -> None:
    from pglab.sampling.episodes import episode_stats
    from pglab.trainers.agent_config import AgentConfig
    from pglab.trainers.hf_agent import train_agent
    from pglab.trainers.loop import RunSettings
    from pglab.trainers.tinyagent import learning_curve, scripted_levels, train_from_base

    seeds = list(range(config.first_seed, config.first_seed + config.seeds))
    levels = {split: scripted_levels(make_tasks(split)) for split in SPLIT_TASKS}
    rows, per_seed = [], []
    fig, ax = new_figure(figsize=(7, 4))
    for k, seed in enumerate(seeds):
        with tempfile.TemporaryDirectory() as folder:
            hf = train_agent(AgentConfig(seed=seed, steps=config.steps, episodes_per_step=config.episodes_per_step,
                                         eval_per_task=config.eval_per_task, default_size=config.default_size),
                             folder, progress=False)
        tiny = train_from_base(seed, steps=config.steps, batch_size=config.episodes_per_step,
                               eval_per_task=config.eval_per_task, stats_per_task=config.eval_per_task,
                               run=RunSettings(progress=False))
        found = {"seed": seed, "hf_seconds": hf["run"]["seconds"], "tiny_seconds": tiny["run"]["seconds"]}
        for split in SPLIT_TASKS:
            for agent, stats in (("base", episode_stats(hf["before"][split])),
                                 ("trained", episode_stats(hf["after"][split])),
                                 ("tinyagent base", episode_stats(tiny["before"][split])),
                                 ("tinyagent trained", episode_stats(tiny["after"][split]))):
                rows.append({"seed": seed, "agent": agent, "split": split, **{key: stats[key] for key in (
                    "pass_rate", "valid_calls", "submit_rate", "turns", "action_tokens")}})
                if not agent.startswith("tinyagent"):
                    found.update({f"{agent}_{split}_pass": stats["pass_rate"],
                                  f"{agent}_{split}_valid": stats["valid_calls"]})
        per_seed.append(found)
        learning_curve(ax, hf["run"]["history"], hf["run"]["evals"],
                       {} if k else {"scripted blind (train)": levels["train"]["blind"]}, label=f", seed {seed}")
    ax.set_title(f"GPT-2 agent REINFORCE in BugFixEnv, {len(seeds)} seeds")
    ax.legend(fontsize=7, loc="upper left")
    result.figures["learning_curves"] = fig
    result.tables.update({"before_after": rows, "per_seed": per_seed})
    result.summary = (
        f"{len(seeds)} seeds x {config.steps} steps of {config.episodes_per_step} episodes for the default GPT-2 "
        f"agent and for TinyAgent; {config.eval_per_task} episodes per task in each measurement.")

    def median(key: str) -> float:
        return float(np.median([s[key] for s in per_seed]))

    for key in per_seed[0]:
        if key != "seed":
            result.metrics[f"median_{key}"] = median(key)
    for split, tasks in SPLIT_TASKS.items():
        n = tasks * config.eval_per_task
        base, trained = median(f"base_{split}_pass"), median(f"trained_{split}_pass")
        se = math.sqrt(max(base * (1 - base), 1e-4) / n)
        result.check_range(f"base GPT-2 agent pass rate ({split}) between scripted random and blind", base,
                           levels[split]["random"] - 2 * se, levels[split]["blind"] + 2 * se,
                           tolerance=f"exact scripted levels +- 2 binomial se of {n} episodes (se = {se:.3f})")
        gain_se = math.sqrt((max(base * (1 - base), 1e-4) + max(trained * (1 - trained), 1e-4)) / n)
        result.check_range(f"trained minus base pass rate ({split})", trained - base, low=2 * gain_se,
                           tolerance=f"2 se of the difference of two binomial rates over {n} episodes each",
                           full_size=True)
        passes = {agent: [s[f"{agent}_{split}_pass"] for s in per_seed] for agent in ("trained", "base")}
        compare_seeds(result, f"GPT-2 agent pass rate ({split})", passes, [("trained", "base")])
        valid = median(f"trained_{split}_valid")
        result.check_range(f"valid calls after training ({split})", valid, low=VALID_TARGET,
                           tolerance="acceptance: at least 0.93 (the book's trained agent: 0.951 train, 0.974 "
                                     "held-out)", full_size=True)
