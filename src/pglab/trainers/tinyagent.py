"""TinyAgent in BugFixEnv: REINFORCE from the behaviour-cloned base agent, and what the agent learned.

TinyAgent plays in the word layout through the one collector and trains through
:func:`pglab.trainers.episodes.train_episodes` (the one loop, ``pg_update``) on (split, task)
keys; the rest of this module measures what it does (behaviour, transcripts, learning curves).
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from pglab.batch import TokenBatch
from pglab.envs.bugfix import Task, exact_pass_rate, make_tasks
from pglab.envs.text import BugFixText
from pglab.models import TinyAgent, Tokenizer, build_tokenizer
from pglab.models.policy import TokenPolicy, as_policy
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
from pglab.trainers.cloning import make_base_agent
from pglab.trainers.episodes import (
    FORMAT_PENALTY,
    LOG,
    EpisodeSource,
    ReinforceSettings,
    check_format_penalty,
    format_costs,
    train_episodes,
)
from pglab.trainers.loop import RunSettings
from pglab.trainers.records import text_of


def sample_episodes(policy: TokenPolicy | torch.nn.Module, tokenizer: Tokenizer, tasks: Sequence[Task],
                    per_task: int, seed: int | torch.Generator) -> TokenBatch:
    """``per_task`` episodes of every task in the word layout, in lockstep, drawn from ``seed`` (a generator,
    or the seed of one)."""
    picked = [i for i in range(len(tasks)) for _ in range(per_task)]
    generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)
    return collect_episodes(policy, WordLayout(tokenizer), [BugFixText(list(tasks)) for _ in picked], picked,
                            generator)


def train_reinforce(model: TinyAgent | TokenPolicy, tokenizer: Tokenizer, train_tasks: Sequence[Task],
                    heldout_tasks: Sequence[Task], settings: ReinforceSettings, run: RunSettings | None = None, *,
                    format_penalty: float = 0.0,
                    max_call_tokens: int = MAX_CALL_TOKENS, max_obs_tokens: int = MAX_OBS_TOKENS) -> dict[str, Any]:
    """TinyAgent (or any policy over the word tokenizer) by REINFORCE in BugFixEnv (agents-ch6 §6.7).

    The keys are (split, task index) pairs, and each batch of episodes plays in lockstep in the
    word layout, one fresh environment per episode. ``format_penalty`` c costs every malformed
    call of a training episode -c on its own last token (:func:`~pglab.trainers.episodes.format_costs`);
    the held-out episodes are measured without it. Returns :func:`train_episodes`' dict.
    """
    check_format_penalty(format_penalty)
    layout = WordLayout(tokenizer, max_call_tokens, max_obs_tokens)
    tasks = {"train": list(train_tasks), "heldout": list(heldout_tasks)}

    def collect(policy: TokenPolicy, keys: list, generator: torch.Generator, training: bool) -> TokenBatch:
        batch = collect_episodes(policy, layout, [BugFixText(tasks[split]) for split, _ in keys],
                                 [index for _, index in keys], generator)
        return format_costs(batch, format_penalty) if training else batch

    keys = {split: [(split, i) for i in range(len(found))] for split, found in tasks.items()}
    source = EpisodeSource(collect, keys["train"], keys["heldout"], token_text=text_of(tokenizer.decode, " "))
    return train_episodes(as_policy(model), source, settings, run, resume_check={"format_penalty": format_penalty})


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
                    run: RunSettings | None = None,
                    echo: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """agents-ch6 §6.7 for one seed: tokenizer, base agent (cached), REINFORCE from a copy, both splits measured.

    ``format_penalty``: the cost of a malformed call in training (see :func:`train_reinforce`);
    ``run``: the run folder, resume and progress bar (default: no files).
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
    settings = ReinforceSettings(steps=steps, batch_size=batch_size, eval_every=eval_every,
                                 eval_per_task=eval_per_task, seed=seed,
                                 baseline_init=episode_stats(before["train"])["pass_rate"])
    trained = train_reinforce(model, tokenizer, tasks["train"], tasks["heldout"], settings, run,
                              format_penalty=format_penalty)
    with single_torch_thread():
        after = {name: sample_episodes(model, tokenizer, tasks[name], stats_per_task, 7) for name in SPLITS}
    return {"tokenizer": tokenizer, "base": base, "model": model, "before": before, "after": after, "run": trained,
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


__all__ = ["FORMAT_PENALTY", "LOG", "SPLITS", "before_after_rows", "behaviour", "behaviour_rows", "every",
           "learning_curve", "sample_episodes", "sample_transcripts", "scripted_levels", "train_from_base",
           "train_reinforce"]
