"""BugFixEnv: repair a buggy Python function through text tool calls; hidden tests decide the reward.

Calls are ``<call> read </call>``, ``<call> test </call>``, ``<call> edit OP </call>`` (five ops),
``<call> revert </call>`` and ``<call> submit </call>``. Every call, valid or not, costs one turn of
the budget; the episode ends at submit or when the budget runs out. Reward is 1 exactly when the
agent submitted and every hidden test passes on the submitted source.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

import gymnasium
from gymnasium import spaces

from pglab.envs.bugfix.grader import Grader, default_grader
from pglab.envs.bugfix.ops import OP_NAMES, apply_op
from pglab.envs.bugfix.tasks import Task, get_task, make_tasks

BUDGET = 6
TOOLS = ("read", "test", "edit", "revert", "submit")
CALLS: tuple[str, ...] = (
    "<call> read </call>", "<call> test </call>",
    *(f"<call> edit {op} </call>" for op in OP_NAMES),
    "<call> revert </call>", "<call> submit </call>",
)
MAX_CALL_CHARS = 200
MAX_OBS_CHARS = 8192
CHARSET = string.printable
_CALL = re.compile(r"\s*<call>\s*(\S+?)(?:\s+(\S+?))?\s*</call>\s*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")

FORMAT_HINT = "write <call> TOOL </call> with TOOL one of read, test, revert, submit, or <call> edit OP </call>"
ERRORS = {
    "type": "error: a call is text (str or UTF-8 bytes); " + FORMAT_HINT,
    "utf8": "error: the call is not valid UTF-8; " + FORMAT_HINT,
    "long": f"error: the call is longer than {MAX_CALL_CHARS} characters; " + FORMAT_HINT,
    "malformed": "error: malformed call; " + FORMAT_HINT,
    "tool": "error: unknown tool {}; tools: " + ", ".join(TOOLS),
    "op": "error: unknown op {}; ops: " + ", ".join(OP_NAMES),
    "argument": "error: {} takes no argument; " + FORMAT_HINT,
}


def _name(word: str | None) -> str:
    """A word safe to echo in an error message (identifiers only, else a placeholder)."""
    if word is None:
        return "(missing)"
    return repr(word) if _WORD.fullmatch(word) else "(not shown)"


def _check(text: str) -> tuple[tuple[str, str | None] | None, str]:
    """(call, "") for a valid call text, else (None, error message)."""
    if len(text) > MAX_CALL_CHARS:
        return None, ERRORS["long"]
    match = _CALL.fullmatch(text)
    if match is None:
        return None, ERRORS["malformed"]
    tool, arg = match.groups()
    if tool not in TOOLS:
        return None, ERRORS["tool"].format(_name(tool))
    if tool == "edit":
        return ((tool, arg), "") if arg in OP_NAMES else (None, ERRORS["op"].format(_name(arg)))
    return ((tool, None), "") if arg is None else (None, ERRORS["argument"].format(tool))


def _decode(action: Any) -> tuple[str, str]:
    """(text, error): the call as text, and an error message when it is not text or not UTF-8."""
    if isinstance(action, str):
        return action, ""
    if isinstance(action, (bytes, bytearray)):
        try:
            return bytes(action).decode("utf-8"), ""
        except UnicodeDecodeError:
            return bytes(action).decode("utf-8", "replace"), ERRORS["utf8"]
    return repr(action)[:MAX_CALL_CHARS], ERRORS["type"]


def parse_call(text: str | bytes) -> tuple[str, str | None] | None:
    """``(tool, argument)`` of one of the nine valid calls, else None (never raises).

    ``parse_call("<call> edit fix_init </call>") == ("edit", "fix_init")``;
    ``parse_call("<call> read </call>") == ("read", None)``.
    """
    text, error = _decode(text)
    return None if error else _check(text)[0]


def _printable(text: str) -> str:
    """The observation clipped to MAX_OBS_CHARS, with characters outside CHARSET escaped."""
    if not text.isascii():
        text = text.encode("ascii", "backslashreplace").decode()
    return text[:MAX_OBS_CHARS]


class BugFixEnv(gymnasium.Env):
    """A gymnasium environment: text calls in, text observations out, reward from hidden tests."""

    metadata = {"render_modes": []}

    def __init__(self, tasks: str | Sequence[Task] = "train", budget: int = BUDGET, grader: Grader | None = None):
        if budget < 1:
            raise ValueError(f"budget is the number of calls per episode and must be >= 1, got {budget}")
        self.tasks = make_tasks(tasks) if isinstance(tasks, str) else list(tasks)
        if not self.tasks:
            raise ValueError("BugFixEnv needs at least one task; pass a split name or a list of Task")
        self.budget = budget
        self.grader = grader
        self.observation_space = spaces.Text(MAX_OBS_CHARS, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(MAX_CALL_CHARS, min_length=0, charset=CHARSET)
        self.task: Task | None = None
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start an episode on ``options["task"]`` (a Task or its name), else on a task drawn with the env's RNG."""
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is None:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        if isinstance(task, str):
            task = next((t for t in self.tasks if t.name == task), None) or get_task(task)
        self.task = task
        self.history = [self.task.source]
        self.actions: list[str] = []
        self.ops: list[str] = []
        self.n_invalid = 0
        self.submitted = False
        self.hidden_pass = False
        self.stop: str | None = None
        self.outcome: str | None = None
        self._done = False
        return _printable(self.task.issue), self._info()

    def step(self, action: str | bytes) -> tuple[str, float, bool, bool, dict]:
        """Apply one call; an invalid call gets an error observation and still costs its turn."""
        if self._done:
            raise ValueError("the episode is over (or never started); call reset() before step()")
        text, error = _decode(action)
        call, error = (None, error) if error else _check(text)
        self.actions.append(text)
        if call is None:
            self.n_invalid += 1
            observation = error
        else:
            observation = self._do(*call)
        terminated = self.submitted
        truncated = not terminated and len(self.actions) >= self.budget
        reward = 0.0
        if terminated or truncated:
            reward = self._finish("submit" if terminated else "budget")
            observation += "" if terminated else "\nbudget exhausted"
        return _printable(observation), reward, terminated, truncated, self._info()

    def _grader(self) -> Grader:
        return self.grader or default_grader()

    def _do(self, tool: str, arg: str | None) -> str:
        """Carry out a valid call and return its observation."""
        source = self.history[-1]
        if tool == "read":
            return source
        if tool == "test":
            return self._grader().grade(self.task, source).report
        if tool == "edit":
            self.ops.append(arg)
            self.history.append(apply_op(arg, source))
        elif tool == "revert" and len(self.history) > 1:
            self.history.pop()
        elif tool == "submit":
            self.submitted = True
            return "submitted"
        return "ok" if self.history[-1] != source else "no change"

    def _finish(self, stop: str) -> float:
        grade = self._grader().grade(self.task, self.history[-1])
        self.stop, self.outcome, self.hidden_pass = stop, grade.result.outcome, grade.hidden_pass
        self._done = True
        return 1.0 if self.submitted and self.hidden_pass else 0.0

    def _info(self) -> dict:
        return {"task": self.task.name, "n_turns": len(self.actions), "n_invalid": self.n_invalid,
                "submitted": self.submitted, "hidden_pass": self.hidden_pass, "stop": self.stop,
                "actions": list(self.actions), "ops": list(self.ops), "outcome": self.outcome}

    @property
    def source(self) -> str:
        """The current source of the episode's function."""
        return self.history[-1]
