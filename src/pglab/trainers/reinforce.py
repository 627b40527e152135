"""REINFORCE for token agents on BugFixEnv: the training loop, its checkpoints, the behaviour analysis, the demo.

One step samples a batch of episodes of the current policy from random training tasks, forms
advantages (reward minus an EMA baseline by default; leave-one-out or GRPO over groups of K
episodes per task), and takes one guarded step on ``reinforce_loss`` (agents-ch6 §6.7). Every
RNG the run draws from is explicit and goes into the checkpoint, so a resumed run reproduces the
uninterrupted one bit for bit on CPU.
"""

from __future__ import annotations

import copy
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pglab.agents import (
    TinyAgent,
    Tokenizer,
    build_tokenizer,
    make_base_agent,
    rollout_batch,
    rollout_stats,
    sequence_log_probs,
)
from pglab.agents.rollout import MAX_CALL_TOKENS, MAX_OBS_TOKENS, call_name, render_episode
from pglab.envs.bugfix import BugFixEnv, Task, exact_pass_rate, make_tasks
from pglab.estimators import EMABaseline, group_normalize, leave_one_out, reinforce_loss
from pglab.plots import new_figure
from pglab.progress import Counter as ProgressBar
from pglab.result import Result, provenance
from pglab.rollout import TokenBatch
from pglab.threads import single_torch_thread
from pglab.trainers.step import policy_gradient_step

ADVANTAGES = ("ema", "loo", "grpo")
CHECKPOINT, LOG = "checkpoint.pt", "train.jsonl"


def sample_episodes(model: TinyAgent, tokenizer: Tokenizer, tasks: Sequence[Task], per_task: int, seed: int,
                    **rollout_options: Any) -> TokenBatch:
    """``per_task`` episodes of every task, in lockstep, drawn with ``torch.Generator().manual_seed(seed)``."""
    picked = [t for t in tasks for _ in range(per_task)]
    envs = [BugFixEnv(list(tasks)) for _ in picked]
    return rollout_batch(model, envs, tokenizer, torch.Generator().manual_seed(seed), tasks=picked, **rollout_options)


def advantages(rewards: torch.Tensor, kind: str, baseline: float, group_size: int) -> torch.Tensor:
    """Per-episode advantages [B]: reward - baseline (``ema``), or leave-one-out / GRPO within consecutive groups."""
    if kind == "ema":
        return rewards - baseline
    groups = rewards.view(-1, group_size)
    grouped = leave_one_out(groups) if kind == "loo" else group_normalize(groups)
    return grouped.flatten()


def draw_tasks(tasks: Sequence[Task], batch_size: int, group_size: int, generator: torch.Generator) -> list[Task]:
    """batch_size // group_size tasks drawn uniformly with replacement, each repeated group_size times."""
    index = torch.randint(len(tasks), (batch_size // group_size,), generator=generator).tolist()
    return [tasks[i] for i in index for _ in range(group_size)]


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` atomically: a temporary file in the same folder, fsync, rename, fsync the folder."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint` (tensors, numbers, strings and containers only)."""
    return torch.load(path, weights_only=True)


def rng_states(generator: torch.Generator, envs: Sequence[BugFixEnv]) -> dict[str, Any]:
    """Every RNG state a run touches: its generator, torch's, numpy's and python's global ones, and each env's."""
    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
    return {"generator": generator.get_state(), "torch": torch.get_rng_state(), "numpy": numpy_state,
            "python": random.getstate(), "envs": [env.np_random.bit_generator.state for env in envs]}


def set_rng_states(states: dict[str, Any], generator: torch.Generator, envs: Sequence[BugFixEnv]) -> None:
    """Restore what :func:`rng_states` saved."""
    generator.set_state(states["generator"])
    torch.set_rng_state(states["torch"])
    numpy_state = dict(states["numpy"])
    numpy_state["state"] = dict(numpy_state["state"], key=np.array(numpy_state["state"]["key"], dtype=np.uint32))
    np.random.set_state(numpy_state)
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    for env, state in zip(envs, states["envs"]):
        env.np_random.bit_generator.state = state


def train_reinforce(
    model: TinyAgent,
    tokenizer: Tokenizer,
    train_tasks: Sequence[Task],
    heldout_tasks: Sequence[Task],
    *,
    steps: int = 80,
    batch_size: int = 64,
    lr: float = 2e-3,
    max_grad_norm: float = 1.0,
    advantage: str = "ema",
    baseline_init: float = 0.0,
    ema_decay: float = 0.9,
    group_size: int = 8,
    mode: str = "token_mean",
    norm_const: float | None = None,
    eval_every: int = 10,
    eval_per_task: int = 8,
    seed: int = 0,
    max_call_tokens: int = MAX_CALL_TOKENS,
    max_obs_tokens: int = MAX_OBS_TOKENS,
    out: str | Path | None = None,
    checkpoint_every: int = 10,
    resume: bool = False,
    stop_at: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train ``model`` in place by REINFORCE -> dict(history (one row per step), evals, seconds, resumed_from).

    ``advantage``: ``ema`` (reward - EMA baseline, decay ``ema_decay``, started at ``baseline_init``;
    one episode per drawn task), ``loo`` or ``grpo`` (``group_size`` episodes per drawn task).
    The held-out pass rate is measured with ``eval_per_task`` episodes per held-out task before
    every ``eval_every``-th step and after the last. With ``out``, each step appends one JSON
    line to ``out/train.jsonl`` and a checkpoint is written every ``checkpoint_every`` steps and
    at the end; ``resume`` continues from ``out/checkpoint.pt``. ``stop_at`` ends the run early
    after that step (checkpointed), as an interruption would.
    """
    if advantage not in ADVANTAGES:
        raise ValueError(f"unknown advantage {advantage!r}; pass one of {', '.join(ADVANTAGES)}")
    group = 1 if advantage == "ema" else group_size
    if batch_size % group or (advantage != "ema" and group < 2):
        raise ValueError(f"batch_size {batch_size} must be a multiple of group_size {group} (>= 2 for {advantage})")
    out = Path(out) if out is not None else None
    settings = {"steps": steps, "batch_size": batch_size, "lr": lr, "advantage": advantage, "group_size": group,
                "mode": mode, "seed": seed, "ema_decay": ema_decay, "baseline_init": baseline_init}
    rollout_options = {"max_call_tokens": max_call_tokens, "max_obs_tokens": max_obs_tokens}
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    baseline = EMABaseline(baseline_init, ema_decay)
    generator = torch.Generator().manual_seed(seed)
    envs = [BugFixEnv(list(train_tasks)) for _ in range(batch_size)]
    for i, env in enumerate(envs):
        env.reset(seed=seed * batch_size + i)
    history: list[dict[str, Any]] = []
    evals: list[dict[str, Any]] = []
    start = 0
    if resume:
        if out is None or not (out / CHECKPOINT).exists():
            raise ValueError(f"nothing to resume: no {CHECKPOINT} in {out}")
        state = load_checkpoint(out / CHECKPOINT)
        if state["settings"] != settings:
            raise ValueError(f"the checkpoint was written with {state['settings']}, not {settings}")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        baseline.value, baseline.count = state["baseline"]["value"], state["baseline"]["count"]
        set_rng_states(state["rng"], generator, envs)
        start, history, evals = state["step"], state["history"], state["evals"]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / LOG).write_text("".join(json.dumps(row) + "\n" for row in history))

    def evaluate(step: int) -> float:
        batch = sample_episodes(model, tokenizer, heldout_tasks, eval_per_task, 1000 * seed + 100 + step,
                                **rollout_options)
        evals.append({"step": step, **rollout_stats(batch)})
        return evals[-1]["pass_rate"]

    def checkpoint(step: int) -> None:
        if out is not None:
            save_checkpoint({"settings": settings, "step": step, "model": model.state_dict(),
                             "optimizer": optimizer.state_dict(),
                             "baseline": {"value": baseline.value, "count": baseline.count},
                             "rng": rng_states(generator, envs), "history": history, "evals": evals},
                            out / CHECKPOINT)

    began = time.perf_counter()
    with ProgressBar("REINFORCE", steps, completed=start, show=progress) as bar, single_torch_thread():
        for step in range(start, steps):
            heldout = evaluate(step) if step % eval_every == 0 else None
            tick = time.perf_counter()
            tasks = draw_tasks(train_tasks, batch_size, group, generator)
            batch = rollout_batch(model, envs, tokenizer, generator, tasks=tasks, **rollout_options)
            adv = advantages(batch.rewards, advantage, baseline.value, group)
            loss = reinforce_loss(sequence_log_probs(model, batch), adv, batch.action_mask, mode, norm_const)
            update = policy_gradient_step(model, optimizer, loss, max_grad_norm=max_grad_norm)
            row = {"step": step, **rollout_stats(batch), "baseline": baseline.value, "loss": update["loss"],
                   "grad_norm": update["grad_norm"], "skipped": update["skipped"], "heldout_pass": heldout,
                   "seconds": time.perf_counter() - tick}
            baseline.update(batch.rewards.mean())
            history.append(row)
            if out is not None:
                with open(out / LOG, "a") as f:
                    f.write(json.dumps(row) + "\n")
            held = "-" if not evals else f"{evals[-1]['pass_rate']:.2f}"
            bar.advance(status=f"reward {row['reward']:.2f} | held-out pass {held} | grad norm "
                               f"{row['grad_norm']:.3f}")
            done = step + 1
            if stop_at is not None and done >= stop_at:
                checkpoint(done)
                break
            if done % checkpoint_every == 0 and done < steps:
                checkpoint(done)
        else:
            if not evals or evals[-1]["step"] != steps:
                evaluate(steps)
            checkpoint(steps)
    return {"history": history, "evals": evals, "seconds": time.perf_counter() - began, "resumed_from": start}


def behaviour(batch: TokenBatch, tasks: Sequence[Task], top: int = 3) -> dict[str, Any]:
    """What a policy does: read rate, edits per episode, share of first edits that are the task's right op,
    and the ``top`` most frequent call sequences (as ``read -> fix_init -> submit``) with their counts."""
    fix_op = {t.name: t.fix_op for t in tasks}
    info, n = batch.info, batch.batch_size
    sequences = Counter(" -> ".join(map(call_name, i["actions"])) for i in info)
    return {
        "read_rate": sum("<call> read </call>" in i["actions"] for i in info) / n,
        "edits_per_episode": sum(len(i["ops"]) for i in info) / n,
        "first_edit_right": sum(bool(i["ops"]) and i["ops"][0] == fix_op[i["task"]] for i in info) / n,
        "top_sequences": sequences.most_common(top),
    }


def sample_transcripts(batch: TokenBatch) -> list[dict[str, str]]:
    """The first successful and the first failed episode of the batch, rendered as text."""
    rows = []
    for outcome, want in (("success", True), ("failure", False)):
        b = next((b for b in range(batch.batch_size) if bool(batch.rewards[b] > 0) == want), None)
        if b is not None:
            rows.append({"outcome": outcome, "episode": render_episode(batch.info[b], float(batch.rewards[b]))})
    return rows


def learning_curve(ax, history: Sequence[dict], evals: Sequence[dict], levels: dict[str, float],
                   label: str = "") -> None:
    """Batch reward per step (thin line), held-out pass rate at each evaluation (markers), reference levels."""
    ax.plot([r["step"] for r in history], [r["reward"] for r in history], lw=0.8, label=f"batch reward{label}")
    ax.plot([e["step"] for e in evals], [e["pass_rate"] for e in evals], "o-", ms=4, label=f"held-out pass{label}")
    for (name, level), style in zip(levels.items(), ("--", ":", "-.")):
        ax.axhline(level, color="grey", ls=style, lw=1, label=f"{name} {level:.2f}")
    ax.set_xlabel("REINFORCE step")
    ax.set_ylabel("pass rate")
    ax.set_ylim(0, 1)




def scripted_levels(tasks: Sequence[Task]) -> dict[str, float]:
    """Exact expected pass rates of the scripted random and blind policies, averaged over ``tasks``."""
    return {kind: float(np.mean([exact_pass_rate(kind, t) for t in tasks])) for kind in ("random", "blind")}


def every(history: Sequence[dict], evals: Sequence[dict], period: int) -> list[dict[str, Any]]:
    """The training table: every ``period``-th step's batch reward, held-out pass, loss and grad norm."""
    held = {e["step"]: e["pass_rate"] for e in evals}
    return [{"step": r["step"], "batch_reward": r["reward"], "heldout_pass": held.get(r["step"]), "loss": r["loss"],
             "grad_norm": r["grad_norm"]} for r in history if r["step"] % period == 0]


SPLITS = ("train", "heldout")


def train_from_base(seed: int, *, steps: int = 80, batch_size: int = 64, eval_every: int = 10,
                    eval_per_task: int = 8, stats_per_task: int = 16, out: str | Path | None = None,
                    resume: bool = False, progress: bool = True,
                    echo: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """agents-ch6 §6.7 for one seed: tokenizer, base agent (cached), REINFORCE from a copy, both splits measured.

    Returns dict(tokenizer, base, model, before and after ({split: TokenBatch of ``stats_per_task``
    episodes per task, sampled with the same seed}), run (``train_reinforce``'s dict), seconds).
    """
    started = time.perf_counter()
    tasks = {"train": make_tasks("train"), "heldout": make_tasks("heldout")}
    with single_torch_thread():
        tokenizer = build_tokenizer(make_tasks("all"))
        base = make_base_agent(tokenizer, seed=seed)
        echo(f"tokenizer: {tokenizer.vocab_size} words | base agent: {base.num_parameters():,} parameters "
             f"({time.perf_counter() - started:.1f} s)")
        before = {name: sample_episodes(base, tokenizer, tasks[name], stats_per_task, 7) for name in SPLITS}
    for name, batch in before.items():
        echo(f"base agent, {name:<8} " + " | ".join(f"{k} {v:.3f}" for k, v in rollout_stats(batch).items()))
    model = copy.deepcopy(base)
    run = train_reinforce(model, tokenizer, tasks["train"], tasks["heldout"], steps=steps, batch_size=batch_size,
                          eval_every=eval_every, eval_per_task=eval_per_task, seed=seed, out=out, resume=resume,
                          baseline_init=rollout_stats(before["train"])["pass_rate"], progress=progress)
    with single_torch_thread():
        after = {name: sample_episodes(model, tokenizer, tasks[name], stats_per_task, 7) for name in SPLITS}
    return {"tokenizer": tokenizer, "base": base, "model": model, "before": before, "after": after, "run": run,
            "seconds": time.perf_counter() - started}


def before_after_rows(trained: dict[str, Any]) -> list[dict[str, Any]]:
    """The before/after table: rollout_stats of the base and the trained agent on both splits."""
    return [{"agent": agent, "split": name, **rollout_stats(trained[key][name])}
            for name in SPLITS for agent, key in (("base", "before"), ("REINFORCE", "after"))]


def behaviour_rows(trained: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """The behaviour table (read rate, edits, right first edit) and the top call sequences, per split."""
    table, top = [], []
    for name in SPLITS:
        found = behaviour(trained["after"][name], make_tasks(name))
        table.append({"split": name, **{k: v for k, v in found.items() if k != "top_sequences"}})
        top += [{"split": name, "count": count, "calls": calls} for calls, count in found["top_sequences"]]
    return table, top


DEMO = {"steps": 80, "batch_size": 64, "eval_every": 10, "eval_per_task": 8, "stats_per_task": 16}
"""The demo's size (agents-ch6 §6.7): 80 steps of 64 episodes, held-out pass every 10 steps, 16 episodes per task
for the before/after table."""
DEMO_QUICK = {"steps": 10, "batch_size": 32, "eval_every": 5, "eval_per_task": 4, "stats_per_task": 4}
"""``pglab demo --quick``: a first look in seconds."""


def demo(out: str | Path, *, seed: int = 0, quick: bool = False, resume: bool = False,
         echo: Callable[[str], None] = lambda line: None) -> Result:
    """The main job: tokenizer, base agent, REINFORCE, before/after table, behaviour analysis, learning curve.

    Writes into ``out``: the training log (``train.jsonl``), checkpoints, the trained agent
    (``agent/``, loadable with ``TinyAgent.from_pretrained``, with its ``tokenizer.json``). With
    ``resume``, ``seed`` and ``quick`` are read back from ``out/demo.json`` and training continues
    from the checkpoint. ``echo`` receives progress lines. Returns the Result (tables, metrics, figure).
    """
    out = Path(out)
    if resume:
        if not (out / "demo.json").exists():
            raise ValueError(f"{out} holds no demo run to resume (no demo.json); pass the folder of a stopped run")
        seed, quick = (json.loads((out / "demo.json").read_text())[k] for k in ("seed", "quick"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo.json").write_text(json.dumps({"seed": seed, "quick": quick}))
    size = DEMO_QUICK if quick else DEMO
    result = Result("demo", {"seed": seed, "quick": quick, **size}, provenance=provenance())
    result.summary = (
        "TinyAgent, behaviour-cloned on scripted random and blind play, learns by REINFORCE (reward minus an EMA "
        "baseline, token_mean, Adam 2e-3) to repair buggy functions through tool calls in BugFixEnv "
        f"(agents-ch6 §6.2, §6.7): {size['steps']} steps of {size['batch_size']} episodes, seed {seed}.")
    trained = train_from_base(seed, **size, out=out, resume=resume, echo=echo)
    trained["model"].save_pretrained(out / "agent")
    trained["tokenizer"].save(out / "agent" / "tokenizer.json")
    levels = {name: scripted_levels(make_tasks(name)) for name in SPLITS}
    run = trained["run"]
    result.tables["before_after"] = before_after_rows(trained)
    result.tables["training"] = every(run["history"], run["evals"], size["eval_every"])
    result.tables["behaviour"], result.tables["top_call_sequences"] = behaviour_rows(trained)
    result.tables["sample_episodes"] = sample_transcripts(trained["after"]["train"])
    result.tables["reference_levels"] = [{"split": name, "scripted random": lv["random"], "scripted blind": lv["blind"]}
                                         for name, lv in levels.items()]
    for row in result.tables["before_after"]:
        key = "base" if row["agent"] == "base" else "trained"
        result.metrics.update({f"{key}_{row['split']}_pass_rate": row["pass_rate"],
                               f"{key}_{row['split']}_valid_calls": row["valid_calls"]})
    result.metrics.update({"steps": len(run["history"]), "train_seconds": run["seconds"],
                           "total_seconds": trained["seconds"], "resumed_from": run["resumed_from"]})
    fig, ax = new_figure(figsize=(7, 4))
    learning_curve(ax, run["history"], run["evals"], {"base agent (train)": result.metrics["base_train_pass_rate"],
                                                      "scripted blind (train)": levels["train"]["blind"]})
    ax.set_title(f"TinyAgent REINFORCE on BugFixEnv, seed {seed}")
    ax.legend(fontsize=8, loc="upper left")
    result.figures["learning_curve"] = fig
    return result
