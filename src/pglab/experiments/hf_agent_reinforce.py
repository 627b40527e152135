"""hf-agent: a Hugging Face GPT-2 as the agent in BugFixEnv, trained like TinyAgent (agents-ch6 §6.7).

The embedded default agent (a byte-level BPE on BugFixEnv's texts, a GPT-2 of TinyAgent's shape,
behaviour-cloned on scripted random and blind play) writes its calls as text, token in and token
out, and trains through the same ``train_episodes`` loop and ``pg_update`` as TinyAgent. Each seed
trains both agents with the same settings; the table puts them side by side. Claims use the
mean over seeds: the training gain's se from the one-seed spread measured over 20 first seeds, the valid calls'
Student's t over the seeds (floored at the measured episodes' binomial resolution).
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
BOOK_GAIN = {"train": 0.775 - 0.144, "heldout": 0.456 - 0.125}
"""agents-ch6 §6.7: the book's TinyAgent, trained minus base pass rate on each split."""
SEED_SD = {"train": 0.144, "heldout": 0.178}
"""The sd of one seed's trained minus base pass rate (default settings), measured over 20 first seeds of 3 seeds each
(docs/results/seed-sweep/hf-agent-heldout-claimed/hf-agent.json: the 3-seed means' sd, 0.083 train and 0.102
held-out, times sqrt(3)). The 3 seeds' own sd has 2 degrees of freedom, whose t tail accepts no learning; this one
has 19. Held out, the mean gain over those 20 first seeds was 0.164 (half the book's: 0.1655) with se 0.102 at 3
seeds: no floor is both cleared at 99% of first seeds and failed by no learning, so the held-out gain is a metric."""
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
        f"agent and for TinyAgent; {config.eval_per_task} episodes per task in each measurement. The held-out gain "
        "is a metric, not a claim: at 3 seeds it varies too much between first seeds to be claimed.")

    def median(key: str) -> float:
        return float(np.median([s[key] for s in per_seed]))

    for key in per_seed[0]:
        if key != "seed":
            result.metrics[f"median_{key}"] = median(key)
    claims(result, per_seed, config.eval_per_task)


def claims(result: Result, per_seed: list[dict], eval_per_task: int) -> None:
    """The GPT-2 agent learns like the book's TinyAgent: on the training tasks its mean gain over the seeds is at
    least half the book's (se: the one-seed spread measured over 20 first seeds, :data:`SEED_SD`), and on both splits
    its valid calls stay at least 0.93 (Student's t over the seeds, floored at the binomial resolution of the measured
    episodes). The held-out gain is a metric: at 3 seeds no floor is both cleared at every seed and failed by no
    learning (see :data:`SEED_SD`). The base agent is the cached default measured with fixed draws, the same at every
    seed, so its level is a unit test (tests/experiments/test_exp_hf_agent_claims.py), not a claim."""
    for split, tasks in SPLIT_TASKS.items():
        n = tasks * eval_per_task * len(per_seed)
        passes = {agent: [s[f"{agent}_{split}_pass"] for s in per_seed] for agent in ("trained", "base")}
        compare_seeds(result, f"GPT-2 agent pass rate ({split})", passes, [("trained", "base")])
        gain = np.subtract(passes["trained"], passes["base"])
        result.metrics[f"{split}_gain_mean"] = float(gain.mean())
        if split == "train":
            book = BOOK_GAIN[split]
            se = max(SEED_SD[split] / math.sqrt(len(per_seed)), math.sqrt(0.25 / n))
            result.check_z(f"trained minus base pass rate ({split}): at least half the book's {book:+.3f}",
                           float(gain.mean()), book / 2, se,
                           f"mean over {len(per_seed)} seeds, one-sided, normal tail; se = the one-seed sd "
                           f"{SEED_SD[split]} measured over 20 first seeds / sqrt(seeds); no learning fails it",
                           side="at_least", full_size=True)
        valid = np.array([s[f"trained_{split}_valid"] for s in per_seed])
        se, dof = seed_se(valid, n)
        result.check_z(f"valid calls after training ({split}) at least {VALID_TARGET}", float(valid.mean()),
                       VALID_TARGET, se, f"acceptance: at least 0.93 (the book's trained agent: 0.951 train, 0.974 "
                                         f"held-out); one-sided ({tail(dof)})", side="at_least", dof=dof,
                       full_size=True)


def tail(dof: int | None) -> str:
    """The tail a claim's p-value comes from, in words."""
    return "binomial se of the episodes, normal tail" if dof is None else f"Student's t over the seeds, {dof} dof"


def seed_se(values: np.ndarray, episodes: int) -> tuple[float, int | None]:
    """Standard error of the mean of per-seed values [seeds] and its Student's t degrees of freedom: sd / sqrt(seeds)
    with seeds - 1, or, where that is smaller (seeds that agree, or one seed), the binomial resolution of all
    ``episodes`` sqrt(0.25 / episodes) with a normal tail (None)."""
    spread = float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    floor = math.sqrt(0.25 / episodes)
    return (spread, len(values) - 1) if spread > floor else (floor, None)
