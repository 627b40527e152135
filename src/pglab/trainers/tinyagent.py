"""REINFORCE for token agents in BugFixEnv: the episode loop and the analysis of what the agent learned.

One step samples a batch of episodes of the current policy from random training tasks and
takes one ``pg_update`` (agents-ch6 §6.7): the episode's reward minus a running (EMA) baseline
by default, or leave-one-out / GRPO over groups of K episodes per task, on ``reinforce_loss``
with the chosen aggregation. Every draw of a step comes from its own (seed, step, stream)
generator, so a resumed run reproduces the uninterrupted one bit for bit on CPU.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pglab.batch import TokenBatch
from pglab.envs.bugfix import Task, exact_pass_rate, make_tasks
from pglab.envs.text import BugFixText
from pglab.estimators import EMABaseline
from pglab.estimators.advantages import uses_groups
from pglab.models import TinyAgent, Tokenizer, build_tokenizer
from pglab.models.policy import TokenPolicy, as_policy
from pglab.runtime.distributed import world
from pglab.runtime.progress import Counter as ProgressBar
from pglab.runtime.threads import single_torch_thread
from pglab.sampling.episodes import (
    MAX_CALL_TOKENS,
    MAX_OBS_TOKENS,
    WordLayout,
    call_name,
    collect_episodes,
    episode_stats,
    render_episode,
)
from pglab.sampling.scoring import CHUNK_TOKENS, sequence_log_probs
from pglab.trainers.cloning import make_base_agent
from pglab.trainers.loop import EVAL, TASKS, RunDir, step_generator
from pglab.trainers.update import UpdateSpec, pg_update

LOG = "train.jsonl"
FORMAT_PENALTY = 0.5
"""The default cost of one malformed call in training (agents-ch6 §6.5's format penalty), chosen by the
format-penalty sweep (``docs/results/format_penalty.md``)."""


def sample_episodes(policy: TokenPolicy | torch.nn.Module, tokenizer: Tokenizer, tasks: Sequence[Task],
                    per_task: int, seed: int | torch.Generator) -> TokenBatch:
    """``per_task`` episodes of every task in the word layout, in lockstep, drawn from ``seed`` (a generator,
    or the seed of one)."""
    picked = [i for i in range(len(tasks)) for _ in range(per_task)]
    generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)
    return collect_episodes(policy, WordLayout(tokenizer), [BugFixText(list(tasks)) for _ in picked], picked,
                            generator)


def format_costs(batch: TokenBatch, cost: float) -> TokenBatch:
    """``batch`` with -``cost`` on the last token of every malformed call of a BugFixEnv episode, in
    ``token_rewards`` [B, T] (reward-to-go past the baseline, not the episode's score); unchanged when no
    call costs anything. The trainer's reward shaping (agents-ch6 §6.5): the environment only reports
    which calls were malformed."""
    if not cost:
        return batch
    placed = torch.zeros_like(batch.action_mask)
    for b, log in enumerate(batch.info):
        for end, malformed in zip(log.call_ends, log.record.invalid):
            if malformed:
                placed[b, end] -= cost
    return dataclasses.replace(batch, token_rewards=placed) if bool(placed.any()) else batch


def check_format_penalty(cost: float) -> None:
    """Raise ValueError unless ``cost`` (of one malformed call) is a finite number >= 0."""
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not 0 <= cost < math.inf:
        raise ValueError(f"format_penalty is the cost of one malformed call, a finite number >= 0; got {cost!r}")


def draw_tasks(tasks: Sequence[Task], batch_size: int, group_size: int, generator: torch.Generator) -> list[Task]:
    """batch_size // group_size tasks drawn uniformly with replacement, each repeated group_size times."""
    index = torch.randint(len(tasks), (batch_size // group_size,), generator=generator).tolist()
    return [tasks[i] for i in index for _ in range(group_size)]


Collect = Callable[[TokenPolicy, list, torch.Generator, bool], TokenBatch]
"""(policy, one task key per episode, generator, training) -> the episodes, in the keys' order (TRL's rollout
function); ``training`` is False for the held-out evaluation (no shaping costs there)."""


def train_episodes(
    policy: TokenPolicy,
    collect: Collect,
    train_keys: Sequence[Any],
    heldout_keys: Sequence[Any],
    *,
    stats: Callable[[TokenBatch], dict[str, float]],
    headline: str = "pass_rate",
    steps: int = 80,
    batch_size: int = 64,
    lr: float = 2e-3,
    max_grad_norm: float = 1.0,
    advantage: str = "reinforce",
    baseline_init: float = 0.0,
    ema_decay: float = 0.9,
    group_size: int = 8,
    mode: str = "token_mean",
    norm_const: float | None = None,
    reference: TokenPolicy | None = None,
    beta: float = 0.0,
    kl_in: str = "reward",
    eval_every: int = 10,
    eval_per_task: int = 8,
    seed: int = 0,
    out: str | Path | None = None,
    checkpoint_every: int = 10,
    resume: bool = False,
    stop_at: int | None = None,
    progress: bool = True,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train ``policy`` in place on episodes from ``collect`` -> dict(history, evals, seconds, resumed_from).

    Each step draws ``batch_size // group_size`` keys of ``train_keys`` (each repeated
    ``group_size`` times; one episode per key for ``advantage="reinforce"``), collects their
    episodes and takes one ``pg_update``; ``reference`` and ``beta`` add the KL penalty of
    :func:`pg_update`. ``stats`` turns a batch into the logged numbers; ``headline`` is the one the
    progress bar shows for the held-out episodes (``eval_per_task`` per held-out key, before every
    ``eval_every``-th step and after the last). Under torchrun each rank collects whole groups of
    its share of the keys, and scores them in one pass (DDP syncs the gradients of one forward).
    With ``out``, each step appends one JSON line to ``out/train.jsonl`` and a
    checkpoint is written every ``checkpoint_every`` steps and at the end; ``resume`` continues
    from it; ``stop_at`` ends the run early after that step (checkpointed), as an interruption would.
    ``settings`` are more values a resumed run must share (the model, the environment).
    """
    group = group_size if uses_groups(advantage) else 1
    rank, size = world()
    if group < 1 or batch_size % (group * size):
        raise ValueError(f"batch_size {batch_size} must be a multiple of group_size {group} x {size} processes")
    if beta > 0 and reference is None:
        raise ValueError("beta > 0 needs the reference policy; pass reference=")
    settings = {"steps": steps, "batch_size": batch_size, "lr": lr, "advantage": advantage, "group_size": group,
                "mode": mode, "seed": seed, "ema_decay": ema_decay, "baseline_init": baseline_init, "beta": beta,
                "kl_in": kl_in, **(settings or {})}
    optimizer = torch.optim.Adam(policy.module.parameters(), lr=lr)
    baseline = EMABaseline(baseline_init, ema_decay)
    history: list[dict[str, Any]] = []
    evals: list[dict[str, Any]] = []
    run_dir = RunDir(out, writer=rank == 0)
    start = 0
    if resume:
        state = run_dir.load_checkpoint(settings)
        policy.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        baseline.value, baseline.count = state["baseline"]["value"], state["baseline"]["count"]
        start, history, evals = state["step"], state["history"], state["evals"]
    run_dir.write_lines(LOG, history)
    local = batch_size // size
    device = next(policy.module.parameters()).device

    def evaluate(step: int) -> float:
        batch = collect(policy, [k for k in heldout_keys for _ in range(eval_per_task)],
                        step_generator(seed, step, EVAL), False)
        evals.append({"step": step, **stats(batch)})
        return evals[-1][headline]

    def checkpoint(step: int) -> None:
        run_dir.save_checkpoint({"settings": settings, "step": step, "model": policy.module.state_dict(),
                                 "optimizer": optimizer.state_dict(),
                                 "baseline": {"value": baseline.value, "count": baseline.count},
                                 "history": history, "evals": evals})

    began = time.perf_counter()
    with ProgressBar("REINFORCE", steps, completed=start, show=progress and rank == 0) as bar, \
            single_torch_thread():
        for step in range(start, steps):
            held = evaluate(step) if step % eval_every == 0 else None
            tick = time.perf_counter()
            keys = draw_tasks(train_keys, batch_size, group, step_generator(seed, step, TASKS))
            batch = collect(policy, keys[rank * local:(rank + 1) * local], step_generator(seed, step, 1 + rank), True)
            batch = batch.to(device)
            if beta > 0:
                with torch.no_grad():
                    batch.ref_logp = sequence_log_probs(reference, batch) * batch.action_mask
            update = pg_update(policy, optimizer, batch, UpdateSpec(
                advantage, group, beta=beta, kl_in=kl_in, mode=mode, norm_const=norm_const,
                max_grad_norm=max_grad_norm, chunk_tokens=CHUNK_TOKENS if size == 1 else 0), baseline=baseline.value)
            row = {"step": step, **stats(batch), "baseline": baseline.value, "loss": update["loss"],
                   "score_loss": update["score_loss"],
                   "grad_norm": update["grad_norm"], "skipped": update["skipped"], f"heldout_{headline}": held,
                   "seconds": time.perf_counter() - tick}
            baseline.update(update["reward"])
            history.append(row)
            run_dir.append_line(LOG, row)
            shown = "-" if not evals else f"{evals[-1][headline]:.2f}"
            bar.advance(status=f"reward {update['reward']:.2f} | held-out {headline} {shown} | grad norm "
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


def train_reinforce(model: TinyAgent | TokenPolicy, tokenizer: Tokenizer, train_tasks: Sequence[Task],
                    heldout_tasks: Sequence[Task], *, format_penalty: float = 0.0,
                    max_call_tokens: int = MAX_CALL_TOKENS, max_obs_tokens: int = MAX_OBS_TOKENS,
                    **options: Any) -> dict[str, Any]:
    """TinyAgent (or any policy over the word tokenizer) by REINFORCE in BugFixEnv (agents-ch6 §6.7).

    ``options`` are :func:`train_episodes`' (steps, batch_size, lr, advantage, ...): the keys are
    (split, task index) pairs, and each batch of episodes plays in lockstep in the word layout, one
    fresh environment per episode. ``format_penalty`` c costs every malformed call of a training
    episode -c on its own last token (:func:`format_costs`); the held-out episodes are measured
    without it.
    """
    check_format_penalty(format_penalty)
    layout = WordLayout(tokenizer, max_call_tokens, max_obs_tokens)
    tasks = {"train": list(train_tasks), "heldout": list(heldout_tasks)}

    def collect(policy: TokenPolicy, keys: list, generator: torch.Generator, training: bool) -> TokenBatch:
        batch = collect_episodes(policy, layout, [BugFixText(tasks[split]) for split, _ in keys],
                                 [index for _, index in keys], generator)
        return format_costs(batch, format_penalty) if training else batch

    keys = {split: [(split, i) for i in range(len(found))] for split, found in tasks.items()}
    return train_episodes(as_policy(model), collect, keys["train"], keys["heldout"], stats=episode_stats,
                          settings={"format_penalty": format_penalty, **options.pop("settings", {})}, **options)


def behaviour(batch: TokenBatch, tasks: Sequence[Task], top: int = 3) -> dict[str, Any]:
    """What a policy does: read rate, edits per episode, share of first edits that are the task's right op,
    and the ``top`` most frequent call sequences (as ``read -> fix_init -> submit``) with their counts."""
    fix_op = {t.name: t.fix_op for t in tasks}
    records, n = [log.record for log in batch.info], batch.batch_size
    sequences = Counter(" -> ".join(map(call_name, r.actions)) for r in records)
    return {
        "read_rate": sum("<call> read </call>" in r.actions for r in records) / n,
        "edits_per_episode": sum(len(r.ops) for r in records) / n,
        "first_edit_right": sum(bool(r.ops) and r.ops[0] == fix_op[r.task] for r in records) / n,
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
"""The two task splits every before/after table measures."""


def train_from_base(seed: int, *, steps: int = 80, batch_size: int = 64, eval_every: int = 10,
                    eval_per_task: int = 8, stats_per_task: int = 16, format_penalty: float = FORMAT_PENALTY,
                    out: str | Path | None = None, resume: bool = False, progress: bool = True,
                    echo: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """agents-ch6 §6.7 for one seed: tokenizer, base agent (cached), REINFORCE from a copy, both splits measured.

    ``format_penalty``: the cost of a malformed call in training (see :func:`train_reinforce`).
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
        echo(f"base agent, {name:<8} " + " | ".join(f"{k} {v:.3f}" for k, v in episode_stats(batch).items()))
    model = copy.deepcopy(base)
    run = train_reinforce(model, tokenizer, tasks["train"], tasks["heldout"], steps=steps, batch_size=batch_size,
                          eval_every=eval_every, eval_per_task=eval_per_task, format_penalty=format_penalty,
                          seed=seed, out=out, resume=resume,
                          baseline_init=episode_stats(before["train"])["pass_rate"], progress=progress)
    with single_torch_thread():
        after = {name: sample_episodes(model, tokenizer, tasks[name], stats_per_task, 7) for name in SPLITS}
    return {"tokenizer": tokenizer, "base": base, "model": model, "before": before, "after": after, "run": run,
            "seconds": time.perf_counter() - started}


def before_after_rows(trained: dict[str, Any]) -> list[dict[str, Any]]:
    """The before/after table: episode_stats of the base and the trained agent on both splits."""
    return [{"agent": agent, "split": name, **episode_stats(trained[key][name])}
            for name in SPLITS for agent, key in (("base", "before"), ("REINFORCE", "after"))]


def behaviour_rows(trained: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """The behaviour table (read rate, edits, right first edit) and the top call sequences, per split."""
    table, top = [], []
    for name in SPLITS:
        found = behaviour(trained["after"][name], make_tasks(name))
        table.append({"split": name, **{k: v for k, v in found.items() if k != "top_sequences"}})
        top += [{"split": name, "count": count, "calls": calls} for calls, count in found["top_sequences"]]
    return table, top


__all__ = ["FORMAT_PENALTY", "LOG", "SPLITS", "Collect", "before_after_rows", "behaviour", "behaviour_rows",
           "draw_tasks", "every", "learning_curve", "sample_episodes", "sample_transcripts", "scripted_levels",
           "train_episodes", "train_from_base", "train_reinforce"]
