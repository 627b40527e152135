"""``pglab train-agent``: a Hugging Face causal LM as the agent, the same loop and outputs as ``pglab demo``.

The base policy is measured on both splits, trained by ``train_episodes`` (``pg_update`` inside),
and measured again; the run folder gets the JSON lines, checkpoints, the report, the learning
curve and the trained policy (``policy/``, through ``save_pretrained``, with its tokenizer).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from pglab.distributed import process_group, world, wrap
from pglab.envs.bugfix import make_tasks
from pglab.envs.text import env_factory
from pglab.models.hf import load_causal_lm
from pglab.models.policy import HFPolicy
from pglab.plots import new_figure
from pglab.result import Result, provenance
from pglab.sampling.text_episodes import TextLayout, text_episode_stats
from pglab.trainers.hf_agent import QUICK, AgentConfig, ensure_default_agent, text_collector
from pglab.trainers.reinforce import (
    SPLITS,
    behaviour,
    learning_curve,
    sample_transcripts,
    scripted_levels,
    train_episodes,
)

USER_TRAIN_SEEDS, USER_HELDOUT_SEEDS = range(100_000), range(10**6, 10**6 + 8)
"""Task seeds of a user's environment: training draws, and the fixed held-out set."""


def load_agent(cfg: AgentConfig, progress: bool, quick: bool = False) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) of --model: the embedded default (built on first use; its quick size with ``quick``)
    or a save_pretrained folder."""
    size = "quick" if quick else "full"
    folder = str(ensure_default_agent(size, progress)) if cfg.model == "default" else cfg.model
    if cfg.model != "default":
        path = Path(folder)
        if not (path / "config.json").is_file():
            raise ValueError(f"--model {cfg.model} holds no model (no config.json); pass default or a folder "
                             "written by save_pretrained")
        if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
            raise ValueError(f"--model {cfg.model} has no tokenizer; save it beside the model with "
                             "tokenizer.save_pretrained(folder)")
    model, tokenizer = load_causal_lm(folder)
    return model.eval(), tokenizer


def task_keys(cfg: AgentConfig) -> tuple[list, list]:
    """(train keys, held-out keys): (split, seed) pairs, one per task for BugFixEnv."""
    if cfg.env == "bugfix":
        return ([("train", i) for i in range(len(make_tasks("train")))],
                [("heldout", i) for i in range(len(make_tasks("heldout")))])
    return [("train", s) for s in USER_TRAIN_SEEDS], [("heldout", s) for s in USER_HELDOUT_SEEDS]


def train_agent(cfg: AgentConfig, out: str | Path, *, quick: bool = False, resume: bool = False,
                stop_at: int | None = None, progress: bool = True,
                echo: Callable[[str], None] = lambda line: None) -> Result:
    """Measure, train and measure again the agent of ``cfg`` -> the Result (tables, metrics, figure).

    ``resume`` continues the stopped run in ``out``; ``stop_at`` stops after that step (checkpointed).
    """
    if quick:
        cfg = dataclasses.replace(cfg, **{k: min(v, getattr(cfg, k)) for k, v in QUICK.items()})
    cfg.validate()
    make_env = env_factory(cfg.env)
    with process_group(cfg.device) as device:
        started = time.perf_counter()
        model, tokenizer = load_agent(cfg, progress and world()[0] == 0, quick)
        model.to(device)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id or 0
        layout = TextLayout(tokenizer, max_obs_tokens=cfg.max_obs_tokens)
        collect = text_collector(layout, make_env, max_call_tokens=cfg.max_call_tokens)
        train_keys, heldout_keys = task_keys(cfg)
        measured = {"train": train_keys[:len(heldout_keys)] if cfg.env != "bugfix" else train_keys,
                    "heldout": heldout_keys}
        sampler = HFPolicy(model, pad_id=pad)

        def measure() -> dict[str, Any]:
            gen = torch.Generator().manual_seed(7)
            return {split: collect(sampler, [k for k in keys for _ in range(cfg.eval_per_task)], gen)
                    for split, keys in measured.items()}

        before = measure()
        echo(f"agent: {model.num_parameters():,} parameters, {len(tokenizer)} tokens, chat template "
             f"{'yes' if layout.chat else 'no'} ({time.perf_counter() - started:.1f} s)")
        reference = HFPolicy(copy.deepcopy(model).requires_grad_(False), pad_id=pad) if cfg.beta > 0 else None
        headline = "pass_rate" if cfg.env == "bugfix" else "reward"
        run = train_episodes(HFPolicy(wrap(model, device), pad_id=pad), collect, train_keys, heldout_keys,
                             stats=text_episode_stats, headline=headline, steps=cfg.steps,
                             batch_size=cfg.episodes_per_step, lr=cfg.learning_rate, advantage=cfg.advantage,
                             group_size=cfg.group_size, reference=reference, beta=cfg.beta,
                             eval_every=cfg.eval_every, eval_per_task=cfg.eval_per_task, seed=cfg.seed, out=out,
                             resume=resume, stop_at=stop_at, progress=progress,
                             settings={"model": cfg.model, "env": cfg.env, "max_call_tokens": cfg.max_call_tokens,
                                       "max_obs_tokens": cfg.max_obs_tokens})
        after = measure()
        if world()[0] == 0:
            model.save_pretrained(Path(out) / "policy")
            tokenizer.save_pretrained(Path(out) / "policy")
    return report(cfg, quick, before, after, run, time.perf_counter() - started)


def report(cfg: AgentConfig, quick: bool, before: dict, after: dict, run: dict, seconds: float) -> Result:
    """The Result of one train-agent run: before/after, behaviour, training table and learning curve.

    ``before`` and ``after`` map each split to its measured TokenBatch (the same draws for both).
    """
    result = Result("train-agent", {**dataclasses.asdict(cfg), "quick": quick}, provenance=provenance())
    result.summary = (f"{cfg.model} agent in {cfg.env}: {cfg.steps} steps of {cfg.episodes_per_step} episodes, "
                      f"advantage {cfg.advantage}, beta {cfg.beta:g}, seed {cfg.seed}; the base and the trained "
                      "policy measured on both splits with the same draws.")
    result.tables["before_after"] = [{"agent": agent, "split": split, **text_episode_stats(batches[split])}
                                     for split in SPLITS for agent, batches in (("base", before), ("trained", after))]
    if cfg.env == "bugfix":
        found = {split: behaviour(after[split], make_tasks(split)) for split in SPLITS}
        result.tables["behaviour"] = [{"split": split, **{k: v for k, v in f.items() if k != "top_sequences"}}
                                      for split, f in found.items()]
        result.tables["top_call_sequences"] = [{"split": split, "count": count, "calls": calls}
                                               for split, f in found.items() for calls, count in f["top_sequences"]]
        result.tables["sample_episodes"] = sample_transcripts(after["train"])
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
    fig, ax = new_figure(figsize=(7, 4))
    levels = {"scripted blind (train)": scripted_levels(make_tasks("train"))["blind"]} if cfg.env == "bugfix" else {}
    learning_curve(ax, run["history"], [{"step": e["step"], "pass_rate": e[headline]} for e in run["evals"]], levels)
    ax.set_title(f"train-agent: {cfg.model} in {cfg.env}, seed {cfg.seed}")
    ax.legend(fontsize=8, loc="upper left")
    result.figures["learning_curve"] = fig
    return result


__all__ = ["load_agent", "task_keys", "train_agent"]
