"""The text-turn protocol: any environment an LM agent talks to in text, BugFixEnv among them.

An environment of the protocol has

    reset(seed: int) -> str                          the first observation (the task, as a prompt)
    step(text: str) -> (str, float, bool, dict)      observation, reward, done, info
    tools() -> list[dict]                            optional: tool schemas for a chat template

``reset(seed)`` decides the task: two resets with one seed pose the same task, which is how a
trainer puts K episodes of one task in a group. ``step`` receives the decoded text of one
assistant turn (a tool call) and answers with the tool's observation. Rewards are summed over
the episode. A user's environment (``env_factory("module:factory")``) is wrapped so that each
answer is checked as it comes: ``check_reset`` and ``check_step`` accept what gymnasium-style code
returns (a ``(observation, info)`` reset, numpy rewards and flags) and turn anything else into a
one-line SettingsError.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pglab.envs.bugfix import BugFixEnv, Task, make_tasks
from pglab.runtime.options import SettingsError


@runtime_checkable
class TextTurnEnv(Protocol):
    def reset(self, seed: int) -> str: ...

    def step(self, text: str) -> tuple[str, float, bool, dict]: ...


def _shown(value: Any) -> str:
    """A value in an error message: its type, and the value itself when short."""
    text = repr(value)
    return f"{type(value).__name__} {text}" if len(text) <= 40 else type(value).__name__


def check_reset(result: Any, where: str) -> str:
    """The first observation of ``reset``: a str, or gymnasium's (str, info dict); SettingsError otherwise."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
        result = result[0]
    if not isinstance(result, str):
        raise SettingsError(f"{where}: reset(seed) must return the first observation as str (or gymnasium's "
                            f"(observation, info)), got {_shown(result)}")
    return result


def check_step(result: Any, where: str) -> tuple[str, float, bool, dict]:
    """``result`` of ``step`` as (observation, reward, done, info) with a float reward and a bool done; numpy
    numbers and bools are accepted. SettingsError naming the expected shape and the part that is wrong."""
    expected = "step(text) must return (observation: str, reward: float, done: bool, info: dict)"
    if not isinstance(result, tuple) or len(result) != 4:
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise SettingsError(f"{where}: {expected}, got {got}")
    observation, reward, done, info = result
    wrong = {"observation": not isinstance(observation, str),
             "reward": isinstance(reward, (bool, np.bool_)) or not isinstance(reward, numbers.Real),
             "done": not isinstance(done, (bool, np.bool_)), "info": not isinstance(info, dict)}
    for name, value in zip(wrong, result):
        if wrong[name]:
            raise SettingsError(f"{where}: {expected}; its {name} is {_shown(value)}")
    if not math.isfinite(reward):
        raise SettingsError(f"{where}: {expected}; its reward {float(reward)} is not finite")
    return observation, float(reward), bool(done), info


def check_env(env: Any, where: str) -> TextTurnEnv:
    """``env`` itself when it has reset(seed) and step(text), else SettingsError naming the protocol."""
    if not callable(getattr(env, "reset", None)) or not callable(getattr(env, "step", None)):
        raise SettingsError(f"{where} returned {type(env).__name__}, not a text-turn environment: give it "
                            "reset(seed) -> str and step(text) -> (observation, reward, done, info)")
    return env


class CheckedEnv:
    """A user's environment whose every reset and step answer is checked (:func:`check_reset`, :func:`check_step`)
    and given in the protocol's own types; ``tools()`` passes through where the environment has it."""

    def __init__(self, env: Any, where: str):
        self.env, self.where = check_env(env, where), where

    def reset(self, seed: int) -> str:
        return check_reset(self.env.reset(seed), f"{self.where}: reset")

    def step(self, text: str) -> tuple[str, float, bool, dict]:
        return check_step(self.env.step(text), f"{self.where}: step")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__.get("env"), name)        # tools(), and whatever else the environment has


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


def load_callable(target: str, where: str) -> Callable[..., Any]:
    """``module:name`` imported (the current folder on the import path) -> the callable; SettingsError naming
    ``where`` (the flag) when it cannot be imported or is not callable."""
    import importlib
    import os
    import sys

    module_name, _, name = target.partition(":")
    if not module_name or not name:
        raise SettingsError(f"{where}: pass module:name, a function importable from the current folder")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise SettingsError(f"{where}: cannot import {name} from {module_name} ({err}); pass module:factory "
                            "with the module importable from the current folder") from None
    if not callable(found):
        raise SettingsError(f"{where}: {name} is not callable; pass a function that returns an environment")
    return found


def env_factory(spec: str) -> Callable[..., TextTurnEnv]:
    """``bugfix``, ``module:factory``, ``trl:module:factory[:reward_func]`` or ``reasoning-gym:TASK`` -> a function
    from a split (train | heldout) to a fresh environment.

    A user's factory takes no argument or one (the split); the current folder is on the import path.
    For ``bugfix`` the function also takes BugFixEnv's options (``budget=...``). ``trl:`` wraps a TRL
    ``environment_factory`` (:mod:`pglab.envs.adapters.trl`), ``reasoning-gym:`` a reasoning-gym task
    (:mod:`pglab.envs.adapters.reasoning_gym`).
    """
    if spec == "bugfix":
        return lambda split, **options: BugFixText(split, **options)
    kind, _, rest = spec.partition(":")
    if kind == "trl":
        from pglab.envs.adapters.trl import trl_factory

        return trl_factory(rest, load_callable)
    if kind == "reasoning-gym":
        from pglab.envs.adapters.reasoning_gym import reasoning_gym_factory

        return reasoning_gym_factory(rest)
    if not kind or not rest:
        raise SettingsError(f"--env {spec!r}: pass bugfix or module:factory (a function returning an environment), "
                            "trl:module:factory (a TRL environment_factory) or reasoning-gym:TASK")
    factory = load_callable(spec, f"--env {spec}")
    takes_split = bool(inspect.signature(factory).parameters)
    return lambda split: CheckedEnv(factory(split) if takes_split else factory(), f"--env {spec}")


__all__ = ["BugFixText", "CheckedEnv", "TextTurnEnv", "check_env", "check_reset", "check_step", "env_factory",
           "load_callable"]
