"""TRL's environment contract as a text-turn environment: ``--env trl:module:factory[:reward_func]``.

TRL's GRPOTrainer (1.16) takes ``environment_factory``: a callable of no argument returning an instance whose
``reset(**kwargs)`` returns ``None`` or a text appended to the prompt, whose public methods (every function of
the class not starting with ``_``, other than ``reset`` and ``get_reward``) are the tools, called with keyword
arguments and shown to the model as ``str(result)`` (an exception as ``{'error': str(e)}``), and whose
``get_reward()``, when the class has it, is the rollout's reward; otherwise reward functions
``f(prompts, completions, environments, **kwargs) -> list[float]`` score it.

:class:`TRLEnv` presents such an instance in pglab's protocol:

- ``reset(seed)`` calls the instance's ``reset`` with ``seed`` and TRL's dataset-free ``prompt`` where its
  signature takes them, with Python's ``random`` and numpy's global generator seeded from ``seed`` (and restored
  after), so one seed poses one task; the prompt is its text followed by the tools in pglab's call syntax;
- ``step(text)``: a call ``<call> TOOL ARG ... </call>`` runs the method (arguments split at spaces, quotes group
  words; ``name=value`` passes by name; a method whose one parameter is text takes all the words), each
  argument converted to the parameter's annotated type (int, float, bool, str; other annotations read as JSON);
  an unknown tool, a wrong number of arguments, an argument that does not convert, a method that raises or a
  result that cannot be shown as text is answered with an observation starting ``error:``, and the episode goes
  on, as in TRL. A turn with no complete call is the final answer and ends the episode (TRL ends a rollout at a
  completion without a tool call);
- the reward is read after every turn (``get_reward()``, or the reward function on this one episode) and each
  step returns its change, so the episode's summed reward is the reward after its last turn however it ended
  (TRL reads it once at the end; ``None`` counts 0, as TRL's NaN-sum does).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import numbers
import random
import re
import shlex
import typing
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from pglab.runtime.options import SettingsError

SKIPPED = ("reset", "get_reward")
"""Public functions of the class that TRL does not expose as tools."""
_CALL = re.compile(r"<call>(.*?)</call>", re.DOTALL)
_SCALARS = {int: "integer", float: "number", bool: "boolean", str: "string"}
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


class ToolError(Exception):
    """A call the tool cannot take (unknown tool, wrong arguments): its message is the observation after error:."""


@dataclass(frozen=True)
class Tool:
    """One public method of the environment, as TRL exposes it."""

    name: str
    """The method's name: the TOOL of ``<call> TOOL ... </call>``."""
    method: Callable[..., Any]
    """The bound method."""
    parameters: tuple[inspect.Parameter, ...]
    """Its parameters (self excluded)."""
    types: dict[str, Any]
    """Each parameter's annotation, resolved where it can be (str where absent)."""

    def call(self) -> str:
        """``<call> name a b </call>``, optional parameters in brackets."""
        words = [p.name if p.default is inspect.Parameter.empty else f"[{p.name}]" for p in self.parameters
                 if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        return f"<call> {' '.join([self.name, *words])} </call>"

    def usage(self) -> str:
        """The call and the docstring's first line."""
        summary = (inspect.getdoc(self.method) or "").strip().split("\n")[0]
        return self.call() + (f": {summary}" if summary else "")

    def schema(self) -> dict:
        """The tool as a chat template's function schema (the type names of the annotations)."""
        properties = {p.name: {"type": _SCALARS.get(self.types.get(p.name), "string")} for p in self.parameters}
        required = [p.name for p in self.parameters if p.default is inspect.Parameter.empty]
        return {"type": "function", "function": {"name": self.name, "description": inspect.getdoc(self.method) or "",
                                                 "parameters": {"type": "object", "properties": properties,
                                                                "required": required}}}


def tools_of(env: Any) -> dict[str, Tool]:
    """The tools TRL would expose for ``env``: its class's public functions other than reset and get_reward."""
    found = {}
    for name, function in inspect.getmembers(type(env), predicate=inspect.isfunction):
        if name.startswith("_") or name in SKIPPED:
            continue
        try:
            types = typing.get_type_hints(function)
        except Exception:                       # unresolvable string annotations: read every argument as text
            types = {}
        parameters = tuple(inspect.signature(function).parameters.values())[1:]
        found[name] = Tool(name, getattr(env, name), parameters, types)
    return found


def convert(word: str, kind: Any, name: str) -> Any:
    """``word`` as parameter ``name``'s annotated type ``kind``: int, float and bool converted (ToolError naming
    both when it is not one), str or no annotation as it is, any other annotation read as JSON where it parses."""
    if kind in (int, float):
        try:
            return kind(word)
        except ValueError:
            raise ToolError(f"argument {name} must be {kind.__name__}, got {word!r}") from None
    if kind is bool:
        if word.lower() not in _TRUE + _FALSE:
            raise ToolError(f"argument {name} must be true or false, got {word!r}")
        return word.lower() in _TRUE
    if kind in (str, Any, None):
        return word
    try:
        return json.loads(word)
    except ValueError:
        return word


def bind(tool: Tool, words: list[str]) -> dict[str, Any]:
    """Keyword arguments for ``tool`` from the call's words (in order, or ``name=value``); ToolError on a wrong
    count or an argument that does not convert. A tool whose one parameter is text takes all the words, joined by
    spaces."""
    named = {p.name: p for p in tool.parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    if len(named) == 1 and len(words) > 1 and tool.types.get(next(iter(named))) in (str, None):
        words = [" ".join(words)]
    keyword = [w.partition("=") for w in words if w.partition("=")[0] in named and "=" in w]
    given = {key: value for key, _, value in keyword}
    free = [w for w in words if not ("=" in w and w.partition("=")[0] in named)]
    open_names = [n for n, p in named.items() if p.kind != p.KEYWORD_ONLY and n not in given]
    if len(free) > len(open_names):
        raise ToolError(f"{tool.name} takes {len(named)} argument(s), got {len(words)}: write {tool.call()}")
    given.update(zip(open_names, free))
    missing = [n for n, p in named.items() if p.default is inspect.Parameter.empty and n not in given]
    if missing:
        raise ToolError(f"{tool.name} needs {', '.join(missing)}: write {tool.call()}")
    return {n: convert(v, tool.types.get(n), n) for n, v in given.items()}


def shown(result: Any) -> str:
    """A tool's result as the observation TRL's chat shows: the text parts of a list of content blocks, else
    ``str(result)``."""
    if isinstance(result, list) and all(isinstance(part, dict) for part in result):
        return "\n".join(str(p.get("text", f"[{p.get('type', 'part')}]")) for p in result)
    return result if isinstance(result, str) else str(result)


def call_words(text: str) -> list[str] | None:
    """The words of the first complete ``<call> ... </call>`` in ``text`` (quotes group words), None when there is
    none; ToolError on an unbalanced quote."""
    found = _CALL.search(text)
    if found is None:
        return None
    try:
        return shlex.split(found.group(1))
    except ValueError as err:
        raise ToolError(f"{err} in the call; quote an argument that holds spaces \"like this\"") from None


def run_call(tools: dict[str, Tool], words: list[str]) -> str:
    """The observation of the call ``TOOL ARG ...``: the tool's shown result, or ``error: ...``; never raises."""
    if not words or words[0] not in tools:
        what = f"unknown tool {words[0]}" if words else "an empty call"
        return f"error: {what}; tools: {', '.join(tools) or 'none'}"
    tool = tools[words[0]]
    try:
        result = tool.method(**bind(tool, words[1:]))
        return shown(asyncio.run(result) if inspect.iscoroutine(result) else result)
    except ToolError as err:
        return f"error: {err}"
    except Exception as err:
        return f"error: {tool.name} raised {type(err).__name__}: {err}"


@contextmanager
def seeded(seed: int):
    """Python's ``random`` and numpy's global generator seeded from ``seed`` inside, restored after."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def reset_arguments(reset: Callable[..., Any], seed: int) -> dict[str, Any]:
    """What of ``seed`` and TRL's dataset-free ``prompt`` the environment's reset takes (by name or ``**kwargs``)."""
    parameters = inspect.signature(reset).parameters
    anything = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
    offered = {"seed": seed, "prompt": [{"role": "user", "content": ""}]}
    return {k: v for k, v in offered.items() if anything or k in parameters}


class TRLEnv:
    """An ``environment_factory`` instance in the text-turn protocol (the module docstring says how)."""

    def __init__(self, env: Any, where: str, reward_func: Callable[..., Any] | None = None):
        """``reward_func``: TRL's reward function, when the class has no ``get_reward``."""
        if not callable(getattr(env, "reset", None)):
            raise SettingsError(f"{where}: the environment {type(env).__name__} has no reset method; TRL's "
                                "environment_factory needs reset(**kwargs) -> str | None")
        if reward_func is None and not callable(getattr(env, "get_reward", None)):
            raise SettingsError(f"{where}: {type(env).__name__} has no get_reward(); give it one or name a reward "
                                "function: --env trl:module:factory:reward_func")
        self.env, self.where, self.reward_func = env, where, reward_func
        self.tool_map = tools_of(env)

    def reset(self, seed: int) -> str:
        with seeded(seed):
            try:
                text = self.env.reset(**reset_arguments(self.env.reset, seed))
            except TypeError as err:
                raise SettingsError(f"{self.where}: reset failed ({err}); without a dataset TRL calls reset(prompt=...)"
                                    ", so give reset **kwargs and no required dataset column") from None
        if text is not None and not isinstance(text, str):
            raise SettingsError(f"{self.where}: reset must return None or a str (TRL appends it to the prompt), got "
                                f"{type(text).__name__}")
        self.messages: list[dict] = []
        self.prompt, self.scored = text or "", 0.0
        usage = "\n".join(tool.usage() for tool in self.tool_map.values())
        return (f"{self.prompt}\nTools, one call per turn:\n{usage}\nA reply without a call ends the episode."
                .lstrip("\n"))

    def step(self, text: str) -> tuple[str, float, bool, dict]:
        try:
            words = call_words(text)
            observation = "" if words is None else run_call(self.tool_map, words)
        except ToolError as err:
            words, observation = [], f"error: {err}"
        self.messages.append({"role": "assistant", "content": text})
        if words is not None:
            self.messages.append({"role": "tool", "name": words[0] if words else "", "content": observation})
        reward = self.reward()
        change, self.scored = reward - self.scored, reward
        return observation, change, words is None, {}

    def reward(self) -> float:
        """The episode's reward now, read as TRL reads it (``None``: 0); SettingsError unless a finite number."""
        if self.reward_func is None:
            value = self.env.get_reward()
        else:
            values = self.reward_func(prompts=[[{"role": "user", "content": self.prompt}]],
                                      completions=[list(self.messages)], environments=[self.env])
            if not isinstance(values, (list, tuple)) or len(values) != 1:
                raise SettingsError(f"{self.where}: the reward function must return a list of one reward per "
                                    f"completion (here 1), got {type(values).__name__}")
            value = values[0]
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise SettingsError(f"{self.where}: the reward must be a finite float (or None), got {value!r}")
        return float(value)

    def tools(self) -> list[dict]:
        return [tool.schema() for tool in self.tool_map.values()]


def trl_factory(spec: str, load: Callable[[str, str], Any]) -> Callable[[str], TRLEnv]:
    """``module:factory[:reward_func]`` (the part after ``trl:``) -> a function from a split to a fresh
    :class:`TRLEnv`; ``load(module_spec, flag)`` imports ``module:name`` as :func:`pglab.envs.text.env_factory`
    does. The factory is called with no argument, as TRL calls it, once now to check the class."""
    module, _, rest = spec.partition(":")
    name, _, reward_name = rest.partition(":")
    where = f"--env trl:{spec}"
    factory = load(f"{module}:{name}", where)
    reward_func = load(f"{module}:{reward_name}", where) if reward_name else None
    TRLEnv(factory(), where, reward_func)           # probe one instance, as TRL does, to refuse a broken class now
    return lambda split: TRLEnv(factory(), where, reward_func)


__all__ = ["SKIPPED", "TRLEnv", "Tool", "ToolError", "bind", "call_words", "convert", "run_call", "shown", "tools_of",
           "trl_factory"]
