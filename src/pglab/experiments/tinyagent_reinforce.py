"""tinyagent-reinforce: the first REINFORCE run of TinyAgent on BugFixEnv, over several seeds (agents-ch6 §6.7).

Each seed behaviour-clones its own base agent, then takes 80 steps of 64 episodes from random
training tasks (reward minus an EMA baseline started at the base agent's training pass rate,
token_mean, Adam 2e-3, clip 1), measuring the held-out pass rate every ten steps. Both agents are
then measured on both splits, and the trained one's behaviour is analysed. Claims use the median
over seeds; the spread is shown beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pglab.envs.bugfix import make_tasks
from pglab.plots import new_figure
from pglab.result import Result

LOSS_SCALE = 0.05
"""agents-ch6 §6.7: the loss "stays within a few hundredths of zero" while the reward climbs by tenths."""
BOOK = {"base_train": 0.144, "trained_train": 0.775, "base_heldout": 0.125, "trained_heldout": 0.456}
"""agents-ch6 §6.7: pass rates before and after 80 steps (one seed, 16 episodes per task)."""


@dataclass
class Config:
    seeds: int = 3
    """Independent runs (base agent, training and measurement each from its seed)."""
    first_seed: int = 0
    """Seeds used: first_seed, ..., first_seed + seeds - 1."""
    steps: int = 80
    """REINFORCE steps per run."""
    batch_size: int = 64
    """Episodes per step."""
    eval_every: int = 10
    """Steps between held-out evaluations."""
    eval_per_task: int = 8
    """Held-out episodes per task at each evaluation."""
    stats_per_task: int = 32
    """Episodes per task for the before/after measurement on each split."""
    change_window: int = 10
    """Steps averaged at each end of the run for the net changes of the loss and the reward."""

    MIN_SEEDS: ClassVar[int] = 1
    QUICK: ClassVar[dict] = {"seeds": 1, "steps": 6, "batch_size": 16, "eval_every": 3, "eval_per_task": 1,
                             "stats_per_task": 2, "change_window": 2}


def net_change(values: list[float], window: int) -> float:
    """Mean of the last ``window`` values minus the mean of the first ``window``."""
    return float(np.mean(values[-window:]) - np.mean(values[:window]))


def correlation_with_step(values: list[float]) -> float:
    """Pearson correlation of a per-step series with the step index."""
    return float(np.corrcoef(np.arange(len(values)), values)[0, 1])


def run(config: Config, result: Result) -> None:
    from pglab.sampling.episodes import episode_stats
    from pglab.trainers.reinforce import (
        before_after_rows,
        behaviour_rows,
        every,
        learning_curve,
        sample_transcripts,
        scripted_levels,
        train_from_base,
    )

    seeds = list(range(config.first_seed, config.first_seed + config.seeds))
    levels = {name: scripted_levels(make_tasks(name)) for name in ("train", "heldout")}
    rows, training, behaviour, top, per_seed = [], [], [], [], []
    fig, ax = new_figure(figsize=(7, 4))
    for k, seed in enumerate(seeds):
        trained = train_from_base(seed, steps=config.steps, batch_size=config.batch_size,
                                  eval_every=config.eval_every, eval_per_task=config.eval_per_task,
                                  stats_per_task=config.stats_per_task, progress=False)
        run_ = trained["run"]
        rows += [{"seed": seed, **row} for row in before_after_rows(trained)]
        training += [{"seed": seed, **row} for row in every(run_["history"], run_["evals"], config.eval_every)]
        table, calls = behaviour_rows(trained)
        behaviour += [{"seed": seed, **row} for row in table]
        top += [{"seed": seed, **row} for row in calls]
        if k == 0:
            result.tables["sample_episodes"] = sample_transcripts(trained["after"]["train"])
        stats = {f"{agent}_{name}": episode_stats(trained[key][name]) for name in ("train", "heldout")
                 for agent, key in (("base", "before"), ("trained", "after"))}
        history = run_["history"]
        per_seed.append({"seed": seed, **{f"{k}_pass": v["pass_rate"] for k, v in stats.items()},
                         "base_train_valid": stats["base_train"]["valid_calls"],
                         "base_train_submit": stats["base_train"]["submit_rate"],
                         "base_heldout_valid": stats["base_heldout"]["valid_calls"],
                         "base_heldout_submit": stats["base_heldout"]["submit_rate"],
                         "loss_vs_step": correlation_with_step([r["score_loss"] for r in history]),
                         "reward_vs_step": correlation_with_step([r["reward"] for r in history]),
                         "loss_change": net_change([r["score_loss"] for r in history], config.change_window),
                         "reward_change": net_change([r["reward"] for r in history], config.change_window),
                         "positive_loss_share": float(np.mean([r["score_loss"] > 0 for r in history])),
                         "seconds": trained["seconds"]})
        learning_curve(ax, history, run_["evals"], {} if k else {
            "scripted blind (train)": levels["train"]["blind"], "scripted random (train)": levels["train"]["random"]},
            label=f", seed {seed}")
    ax.set_title(f"TinyAgent REINFORCE, {len(seeds)} seeds")
    ax.legend(fontsize=7, loc="upper left")
    result.figures["learning_curves"] = fig
    result.tables.update({"before_after": rows, "per_seed": per_seed, "training": training, "behaviour": behaviour,
                          "top_call_sequences": top, "reference_levels": [
                              {"split": n, "scripted random": lv["random"], "scripted blind": lv["blind"]}
                              for n, lv in levels.items()]})

    def median(key: str) -> float:
        return float(np.median([s[key] for s in per_seed]))

    def spread(key: str) -> str:
        values = [s[key] for s in per_seed]
        return f"seeds range {min(values):.3f}-{max(values):.3f}"

    n_train, n_held = config.stats_per_task * 20, config.stats_per_task * 10
    for key in per_seed[0]:
        if key != "seed":
            result.metrics[f"median_{key}"] = median(key)
    result.summary = (
        f"{len(seeds)} seeds x {config.steps} REINFORCE steps of {config.batch_size} episodes. Pass rates measured "
        f"with {config.stats_per_task} episodes per task ({n_train} train, {n_held} held-out episodes); claims use "
        "the median over seeds. Book (one seed): train 0.144 -> 0.775, held-out 0.125 -> 0.456.")
    for split, n in (("train", n_train), ("heldout", n_held)):
        result.check_range(f"base agent valid calls ({split})", median(f"base_{split}_valid"), low=0.95,
                           tolerance=f"acceptance; {spread(f'base_{split}_valid')}")
        result.check_range(f"base agent submit rate ({split})", median(f"base_{split}_submit"), 0.6, 0.95,
                           tolerance=f"acceptance; {spread(f'base_{split}_submit')}")
        p = median(f"base_{split}_pass")
        se = math.sqrt(max(p * (1 - p), 1e-4) / n)
        result.check_range(f"base agent pass rate ({split}) between scripted random and blind", p,
                           levels[split]["random"] - 2 * se, levels[split]["blind"] + 2 * se,
                           tolerance=f"exact scripted levels +- 2 binomial se of {n} episodes (se = {se:.3f}); "
                                     f"{spread(f'base_{split}_pass')}")
    gain_train = [s["trained_train_pass"] - s["base_train_pass"] for s in per_seed]
    gain_held = [s["trained_heldout_pass"] - s["base_heldout_pass"] for s in per_seed]
    result.metrics.update({"median_gain_train": float(np.median(gain_train)),
                           "median_gain_heldout": float(np.median(gain_held))})
    result.check_range("trained pass rate (train)", median("trained_train_pass"), low=0.6,
                       tolerance=f"acceptance (book 0.775); {spread('trained_train_pass')}")
    result.check_range("trained minus base pass rate (train)", float(np.median(gain_train)), low=0.4,
                       tolerance=f"acceptance (book +0.63); seeds range {min(gain_train):.3f}-{max(gain_train):.3f}")
    result.check_range("trained minus base pass rate (held-out)", float(np.median(gain_held)), low=0.15,
                       tolerance=f"acceptance (book +0.33); seeds range {min(gain_held):.3f}-{max(gain_held):.3f}")
    steps_se = 1 / math.sqrt(config.steps)
    result.check_range("the batch reward rises: correlation of reward with step", median("reward_vs_step"),
                       low=3 * steps_se, tolerance=f"3 se of a zero correlation over {config.steps} steps "
                                                   f"(se = 1/sqrt(steps) = {steps_se:.3f}); {spread('reward_vs_step')}")
    result.check_close(f"the loss does not follow the reward: its net change (last {config.change_window} steps "
                       f"minus first {config.change_window})", median("loss_change"), 0.0, LOSS_SCALE,
                       f"the book: the loss stays within a few hundredths of zero while the reward climbs; "
                       f"reward's net change {median('reward_change'):+.2f}; {spread('loss_change')}")
    result.check_range("the loss takes both signs: share of steps with a positive loss",
                       median("positive_loss_share"), 0.1, 0.9,
                       tolerance=f"the surrogate's sign is no guide to progress; {spread('positive_loss_share')}")
