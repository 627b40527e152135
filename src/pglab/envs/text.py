"""The text-turn protocol: any environment an LM agent talks to in text, BugFixEnv among them.

An environment of the protocol has

    reset(seed: int) -> str                          the first observation (the task, as a prompt)
    step(text: str) -> (str, float, bool, dict)      observation, reward, done, info
    tools() -> list[dict]                            optional: tool schemas for a chat template

``reset(seed)`` decides the task: two resets with one seed pose the same task, which is how a
trainer puts K episodes of one task in a group. ``step`` receives the decoded text of one
assistant turn (a tool call) and answers with the tool's observation. Rewards are summed over
the episode. ``check_step`` turns a malformed answer of a user's environment into a one-line error.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pglab.envs.bugfix import BugFixEnv, Task, make_tasks


@runtime_checkable
class TextTurnEnv(Protocol):
    def reset(self, seed: int) -> str: ...

    def step(self, text: str) -> tuple[str, float, bool, dict]: ...


def check_step(result: Any, where: str) -> tuple[str, float, bool, dict]:
    """``result`` of ``step`` as (observation, reward, done, info), else ValueError naming the expected shape."""
    expected = "step(text) must return (observation: str, reward: float, done: bool, info: dict)"
    if not isinstance(result, tuple) or len(result) != 4:
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise ValueError(f"{where}: {expected}, got {got}")
    observation, reward, done, info = result
    if not isinstance(observation, str) or not isinstance(done, bool) or not isinstance(info, dict):
        raise ValueError(f"{where}: {expected}, got ({type(observation).__name__}, {type(reward).__name__}, "
                         f"{type(done).__name__}, {type(info).__name__})")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        raise ValueError(f"{where}: {expected}; the reward {reward!r} is not a finite number")
    return observation, float(reward), done, info


def check_env(env: Any, where: str) -> TextTurnEnv:
    """``env`` itself when it has reset(seed) and step(text), else ValueError naming the protocol."""
    if not callable(getattr(env, "reset", None)) or not callable(getattr(env, "step", None)):
        raise ValueError(f"{where} returned {type(env).__name__}, not a text-turn environment: give it "
                         "reset(seed) -> str and step(text) -> (observation, reward, done, info)")
    return env


class BugFixText:
    """BugFixEnv in the text-turn protocol: ``reset(seed)`` poses task ``seed % len(tasks)`` of the split."""

    def __init__(self, tasks: str | Sequence[Task] = "train", **options: Any):
        """``options`` are BugFixEnv's (budget, allow_write, grader, ...)."""
        self.tasks = make_tasks(tasks) if isinstance(tasks, str) else list(tasks)
        self.env = BugFixEnv(self.tasks, **options)

    def task(self, seed: int) -> Task:
        return self.tasks[seed % len(self.tasks)]

    def reset(self, seed: int) -> str:
        return self.env.reset(options={"task": self.task(seed), "allow_heldout": True})[0]

    def step(self, text: str) -> tuple[str, float, bool, dict]:
        observation, reward, terminated, truncated, info = self.env.step(text)
        return observation, reward, terminated or truncated, info

    def tools(self) -> list[dict]:
        return [{"type": "function", "function": {"name": "call", "description": (
            "one BugFixEnv call, written as <call> TOOL </call> or <call> edit OP </call>")}}]


def env_factory(spec: str) -> Callable[..., TextTurnEnv]:
    """``bugfix`` or ``module:factory`` -> a function from a split (train | heldout) to a fresh environment.

    A user's factory takes no argument or one (the split); the current folder is on the import path.
    For ``bugfix`` the function also takes BugFixEnv's options (``budget=...``).
    """
    if spec == "bugfix":
        return lambda split, **options: BugFixText(split, **options)
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise ValueError(f"--env {spec!r}: pass bugfix or module:factory (a function returning an environment)")
    import importlib
    import os
    import sys

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"--env {spec}: cannot import {name} from {module_name} ({err}); pass module:factory "
                         "with the module importable from the current folder") from None
    takes_split = bool(inspect.signature(factory).parameters) if callable(factory) else False
    if not callable(factory):
        raise ValueError(f"--env {spec}: {name} is not callable; pass a function that returns an environment")
    return lambda split: check_env(factory(split) if takes_split else factory(), f"--env {spec}")


__all__ = ["BugFixText", "TextTurnEnv", "check_env", "check_step", "env_factory"]
