"""Scripted policies (random, blind, oracle), episode rollouts, their statistics, and exact pass rates.

``random`` draws uniformly among the nine valid calls at every turn; ``blind`` applies one op drawn
uniformly among the five, without reading, then submits; ``oracle`` reads, applies the right op,
tests and submits. The oracle is given the task's family as privileged information (it does not
infer the bug from the source). :func:`exact_pass_rate` computes the expected pass rate of each
policy on a task by dynamic programming over the episode, with the same ops and grader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from pglab.envs.bugfix.env import BUDGET, CALLS, BugFixEnv, EpisodeRecord, record_stats
from pglab.envs.bugfix.grader import Grader, default_grader
from pglab.envs.bugfix.ops import OP_NAMES, apply_op
from pglab.envs.bugfix.tasks import Task

KINDS = ("random", "blind", "oracle")


@dataclass
class ScriptedPolicy:
    """A scripted policy: ``act(task, calls_so_far) -> call text``, drawing from its own RNG."""

    kind: str
    rng: np.random.Generator = field(repr=False)

    def act(self, task: Task, calls: Sequence[str]) -> str:
        """The next call, given the task and the calls made so far in the episode."""
        if self.kind == "random":
            return CALLS[int(self.rng.integers(len(CALLS)))]
        if self.kind == "blind":
            return f"<call> edit {OP_NAMES[int(self.rng.integers(len(OP_NAMES)))]} </call>" if not calls else CALLS[-1]
        plan = ("<call> read </call>", f"<call> edit {task.fix_op} </call>", "<call> test </call>", CALLS[-1])
        return plan[min(len(calls), len(plan) - 1)]


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown scripted policy {kind!r}; pass one of {', '.join(KINDS)}")


def scripted_policy(kind: str, seed: int = 0) -> ScriptedPolicy:
    """A ``random``, ``blind`` or ``oracle`` policy whose draws come from ``numpy.random.default_rng(seed)``."""
    _check_kind(kind)
    return ScriptedPolicy(kind, np.random.default_rng(seed))


@dataclass(frozen=True)
class Episode:
    """One episode as text: the prompt, each call with its observation, the reward and the final info."""

    prompt: str
    calls: tuple[str, ...]
    observations: tuple[str, ...]
    reward: float
    info: dict[str, Any]


def scripted_rollout(policy: ScriptedPolicy, env: BugFixEnv, task: Task | str) -> Episode:
    """Play one episode of ``policy`` on ``task`` in ``env``."""
    prompt, info = env.reset(options={"task": task})
    calls: list[str] = []
    observations: list[str] = []
    done, reward = False, 0.0
    while not done:
        calls.append(policy.act(env.task, calls))
        observation, reward, terminated, truncated, info = env.step(calls[-1])
        observations.append(observation)
        done = terminated or truncated
    return Episode(prompt, tuple(calls), tuple(observations), reward, info)


def rollout_stats(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean reward, pass rate, valid-call fraction, submit rate, turns, and the fraction of episodes whose final grade
    was an infrastructure failure (``infra_error``: kept apart from the program's own failures), of played episodes
    (the collected batches' counterpart is :func:`pglab.sampling.episode_stats`; both count through
    :func:`~pglab.envs.bugfix.env.record_stats`)."""
    if not episodes:
        raise ValueError("rollout_stats needs at least one episode")
    records = [EpisodeRecord.of(e.info) for e in episodes]
    if any(r is None for r in records):
        raise ValueError("rollout_stats needs BugFixEnv episodes (an info with every EpisodeRecord field)")
    n = len(episodes)
    return {"reward": sum(e.reward for e in episodes) / n, **record_stats(records),
            "turns": sum(r.n_turns for r in records) / n,
            "infra_error": sum(r.outcome == "infra_error" for r in records) / n}


def reachable_sources(task: Task, edits: int) -> set[str]:
    """Every source reachable from the task's buggy source with at most ``edits`` ops."""
    seen, frontier = {task.source}, {task.source}
    for _ in range(edits):
        frontier = {apply_op(op, s) for s in frontier for op in OP_NAMES} - seen
        seen |= frontier
    return seen


def _random_pass_rate(source: str, passes: dict[str, bool], budget: int) -> float:
    """P(pass) of uniform play over the nine calls: a model of the env's edit history and revert."""
    n_calls = len(CALLS)

    @cache
    def value(history: tuple[str, ...], turns: int) -> float:
        if turns == 0:
            return 0.0
        current = history[-1]
        total = passes[current] + 2 * value(history, turns - 1)  # submit; read and test
        total += sum(value(history + (apply_op(op, current),), turns - 1) for op in OP_NAMES)
        total += value(history[:-1] if len(history) > 1 else history, turns - 1)  # revert
        return total / n_calls

    return value((source,), budget)


def exact_pass_rate(kind: str, task: Task, grader: Grader | None = None, budget: int = BUDGET) -> float:
    """The expected pass rate of scripted policy ``kind`` on ``task`` (programs graded by ``grader``)."""
    _check_kind(kind)
    grader = grader or default_grader()
    sources = sorted(reachable_sources(task, budget - 1 if kind == "random" else 1))
    passes = {s: g.hidden_pass for s, g in zip(sources, grader.grade_many([(task, s) for s in sources]))}
    if kind == "random":
        return _random_pass_rate(task.source, passes, budget)
    if kind == "blind":
        return float(np.mean([passes[apply_op(op, task.source)] for op in OP_NAMES])) if budget >= 2 else 0.0
    return float(passes[apply_op(task.fix_op, task.source)]) if budget >= 4 else 0.0

