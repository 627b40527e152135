"""``pglab train-agent``: a Hugging Face causal LM as the agent, the same loop and outputs as ``pglab demo``.

The base policy is measured on both splits, trained (``pglab.trainers.hf_agent.train_agent``, with
``train_episodes`` and ``pg_update`` inside) and measured again; the run folder gets the JSON lines,
checkpoints, the report, the learning curve and the trained policy (``policy/``, through
``save_pretrained``, with its tokenizer).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pglab.batch import TokenBatch
from pglab.envs.bugfix import make_tasks
from pglab.reporting.plots import new_figure
from pglab.reporting.result import Result, provenance
from pglab.sampling.episodes import episode_stats
from pglab.stats import pass_summary
from pglab.trainers.agent_config import AgentConfig
from pglab.trainers.hf_agent import train_agent
from pglab.trainers.tinyagent import SPLITS, behaviour, learning_curve, sample_transcripts, scripted_levels
from pglab.trainers.warnings import collapse_warnings, measured_fall


def agent_result(cfg: AgentConfig, out: str | Path, *, quick: bool = False, resume: bool = False,
                 echo: Callable[[str], None] = lambda line: None) -> Result:
    """Train the agent of ``cfg`` into ``out`` and report it (see :func:`report`)."""
    trained = train_agent(cfg, out, quick=quick, resume=resume, echo=echo)
    return report(trained["config"], quick, trained["before"], trained["after"], trained["run"], trained["seconds"])


def pass_table(batch: TokenBatch) -> np.ndarray:
    """Whether each episode passed (its reward is positive: BugFixEnv's hidden tests pass), one row per task:
    [tasks, episodes per task], the rows of ``batch`` grouped by its ``group`` (each task as often)."""
    passed, group = (batch.rewards > 0).numpy(), batch.group.numpy()
    return np.stack([passed[group == g] for g in np.unique(group)])


def report(cfg: AgentConfig, quick: bool, before: dict, after: dict, run: dict, seconds: float) -> Result:
    """The Result of one train-agent run: before/after, pass@1 and pass@k, behaviour (BugFixEnv), sample episodes,
    training table, learning curve, and the collapse warnings of the training rows and of the measured pass rates.

    ``before`` and ``after`` map each split to its measured TokenBatch (the same draws for both). pass@k takes k
    = the group size, capped at the episodes per task; its standard error is over the tasks (held-out seeds).
    """
    result = Result("train-agent", {**dataclasses.asdict(cfg), "quick": quick}, provenance=provenance())
    result.summary = (f"{cfg.model} agent in {cfg.env}: {cfg.steps} steps of {cfg.episodes_per_step} episodes, "
                      f"advantage {cfg.advantage}, beta {cfg.beta:g}, seed {cfg.seed}; the base and the trained "
                      "policy measured on both splits with the same draws.")
    result.tables["before_after"] = [{"agent": agent, "split": split, **episode_stats(batches[split], call_stops=True)}
                                     for split in SPLITS for agent, batches in (("base", before), ("trained", after))]
    if cfg.env == "bugfix":
        found = {split: behaviour(after[split], make_tasks(split)) for split in SPLITS}
        result.tables["behaviour"] = [{"split": split, **{k: v for k, v in f.items() if k != "top_sequences"}}
                                      for split, f in found.items()]
        result.tables["top_call_sequences"] = [{"split": split, "count": count, "calls": calls}
                                               for split, f in found.items() for calls, count in f["top_sequences"]]
    result.tables["sample_episodes"] = sample_transcripts(after["train"])
    k = min(cfg.group_size, cfg.eval_per_task)
    result.tables["pass_at_k"] = [{"agent": agent, "split": split, **pass_summary(pass_table(batches[split]), k)}
                                  for split in SPLITS for agent, batches in (("base", before), ("trained", after))]
    falls = [measured_fall(pass_table(before[split]), pass_table(after[split]), split) for split in SPLITS]
    headline = "pass_rate" if cfg.env == "bugfix" else "reward"
    for row in result.tables["before_after"]:
        key = "base" if row["agent"] == "base" else "trained"
        result.metrics.update({f"{key}_{row['split']}_{name}": row[name] for name in (headline, "valid_calls")
                               if name in row})
    result.tables["training"] = [{"step": r["step"], "batch_reward": r["reward"], "loss": r["loss"],
                                  "grad_norm": r["grad_norm"], f"heldout_{headline}": r[f"heldout_{headline}"]}
                                 for r in run["history"]]
    result.metrics.update({"steps": len(run["history"]), "train_seconds": run["seconds"], "total_seconds": seconds,
                           "resumed_from": run["resumed_from"]})
    result.warnings = collapse_warnings(run["history"]) + [line for line in falls if line is not None]
    fig, ax = new_figure(figsize=(7, 4))
    levels = {"scripted blind (train)": scripted_levels(make_tasks("train"))["blind"]} if cfg.env == "bugfix" else {}
    learning_curve(ax, run["history"], [{"step": e["step"], "pass_rate": e[headline]} for e in run["evals"]], levels)
    ax.set_title(f"train-agent: {cfg.model} in {cfg.env}, seed {cfg.seed}")
    ax.legend(fontsize=8, loc="upper left")
    result.figures["learning_curve"] = fig
    return result


__all__ = ["agent_result", "pass_table", "report"]
