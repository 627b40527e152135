"""BugFixEnv: repair a buggy Python function through text tool calls; hidden tests decide the reward.

Calls are ``<call> read </call>``, ``<call> test </call>``, ``<call> edit OP </call>`` (five ops),
``<call> revert </call>`` and ``<call> submit </call>``; with ``allow_write=True`` also
``<call> write SOURCE </call>``, which replaces the program with SOURCE. Every call, valid or not, costs one turn of
the budget; the episode ends at submit or when the budget runs out. Reward is 1 exactly when the
agent submitted and every hidden test passes on the submitted source. The environment reports what
happened and prices nothing else: every reset and step returns :class:`EpisodeRecord`'s fields as
``info``, among them which calls were malformed, so a trainer that charges for a malformed call
(agents-ch6 §6.5's format penalty) places that cost itself.
"""

from __future__ import annotations

import ast
import re
import string
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
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
MAX_WRITE_CHARS = 4000
MAX_OBS_CHARS = 8192
CHARSET = string.printable
_CALL = re.compile(r"\s*<call>\s*(\S+?)(?:\s+(\S+?))?\s*</call>\s*")
_WRITE = re.compile(r"\s*<call>\s*write(?:[ \t]+|[ \t]*\n|(?=</call>))(.*?)\s*</call>\s*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")

FORMAT_HINT = "write <call> TOOL </call> with TOOL one of read, test, revert, submit, or <call> edit OP </call>"
WRITE_HINT = ", or <call> write SOURCE </call>"
ERRORS = {
    "type": "error: a call is text (str or UTF-8 bytes); {hint}",
    "utf8": "error: the call is not valid UTF-8; {hint}",
    "long": "error: the call is longer than {limit} characters; {hint}",
    "malformed": "error: malformed call; {hint}",
    "tool": "error: unknown tool {name}; tools: {tools}",
    "op": "error: unknown op {name}; ops: " + ", ".join(OP_NAMES),
    "argument": "error: {name} takes no argument; {hint}",
}


def protocol(task_name: str, budget: int, allow_write: bool = False) -> str:
    """The call protocol as the first observation states it (space-separated words, one rule per line)."""
    calls = [c for c in CALLS if "edit" not in c]
    calls.insert(2, "<call> edit OP </call>")
    lines = ["calls : " + " , ".join(calls + ["<call> write SOURCE </call>"] * allow_write),
             "OP : " + " ".join(OP_NAMES)]
    if allow_write:
        lines.append(f"SOURCE : the full new source of {task_name} , replacing the current one")
    lines.append(f"budget : {budget} calls , one call per turn , submit ends the episode")
    return "\n".join(lines)


def _name(word: str | None) -> str:
    """A word safe to echo in an error message (identifiers only, else a placeholder)."""
    if word is None:
        return "(missing)"
    return repr(word) if _WORD.fullmatch(word) else "(not shown)"


def _check(text: str, allow_write: bool = False) -> tuple[tuple[str, str | None] | None, str]:
    """(call, "") for a valid call text, else (None, error message). A write call's argument is its body."""
    hint = FORMAT_HINT + WRITE_HINT * allow_write
    limit = MAX_WRITE_CHARS if allow_write else MAX_CALL_CHARS
    if len(text) > limit:
        return None, ERRORS["long"].format(limit=limit, hint=hint)
    if allow_write and (write := _WRITE.fullmatch(text)):
        return ("write", write.group(1)), ""
    match = _CALL.fullmatch(text)
    if match is None:
        return None, ERRORS["malformed"].format(hint=hint)
    tool, arg = match.groups()
    if tool not in TOOLS:
        return None, ERRORS["tool"].format(name=_name(tool), tools=", ".join(TOOLS + ("write",) * allow_write))
    if tool == "edit":
        return ((tool, arg), "") if arg in OP_NAMES else (None, ERRORS["op"].format(name=_name(arg)))
    return ((tool, None), "") if arg is None else (None, ERRORS["argument"].format(name=tool, hint=hint))


def _written(body: str, name: str) -> tuple[str | None, str]:
    """(source, "") when a write body is a parsable program that defines ``name``, else (None, error)."""
    source = textwrap.dedent(body.strip("\n")).strip() + "\n"
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        where = f" (line {err.lineno})" if err.lineno else ""
        return None, f"error: the written source does not parse: SyntaxError: {err.msg}{where}"
    except (ValueError, RecursionError, MemoryError) as err:
        return None, f"error: the written source does not parse: {type(err).__name__}"
    if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body):
        return None, f"error: the written source defines no function {name}; write the full source of {name}"
    return source, ""


def _decode(action: Any) -> tuple[str, str]:
    """(text, error key): the call as text, and ``type`` or ``utf8`` when it is not text or not UTF-8."""
    if isinstance(action, str):
        return action, ""
    if isinstance(action, (bytes, bytearray)):
        try:
            return bytes(action).decode("utf-8"), ""
        except UnicodeDecodeError:
            return bytes(action).decode("utf-8", "replace"), "utf8"
    return repr(action)[:MAX_CALL_CHARS], "type"


def parse_call(text: str | bytes, *, allow_write: bool = False) -> tuple[str, str | None] | None:
    """``(tool, argument)`` of one of the nine valid calls (or of a write call), else None (never raises).

    ``parse_call("<call> edit fix_init </call>") == ("edit", "fix_init")``;
    ``parse_call("<call> read </call>") == ("read", None)``; with ``allow_write``,
    ``parse_call("<call> write def f(): ... </call>", allow_write=True) == ("write", "def f(): ...")``.
    """
    text, error = _decode(text)
    return None if error else _check(text, allow_write)[0]


def _printable(text: str) -> str:
    """The observation clipped to MAX_OBS_CHARS, with characters outside CHARSET escaped."""
    if not text.isascii():
        text = text.encode("ascii", "backslashreplace").decode()
    return text[:MAX_OBS_CHARS]


@dataclass(frozen=True)
class EpisodeRecord:
    """What has happened in a BugFixEnv episode so far; every reset and step returns its fields as ``info``."""

    task: str
    """The task's name."""
    n_turns: int
    """Calls made, valid or not."""
    n_invalid: int
    """Malformed calls made (a write whose source does not parse counts too)."""
    submitted: bool
    """The agent called submit."""
    hidden_pass: bool
    """Every hidden test passes on the final source (known once the episode has ended)."""
    stop: str | None
    """How the episode ended: ``submit`` or ``budget``; None while it runs."""
    actions: list[str]
    """The text of every call, in order."""
    ops: list[str]
    """The edits applied (op names, ``write`` for a written source), in order."""
    outcome: str | None
    """The final grade's outcome (pass, fail, timeout, infra_error, ...); None while the episode runs."""
    isolation: str
    """The grader's sandbox layer."""
    invalid: list[bool]
    """For every call, in order: whether it was malformed."""

    @property
    def passed(self) -> bool:
        """Reward 1: submitted, and every hidden test passes."""
        return bool(self.submitted and self.hidden_pass)

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> EpisodeRecord | None:
        """The record an ``info`` dict holds, None when it lacks a field (another environment's info)."""
        names = [f.name for f in fields(cls)]
        return cls(**{name: info[name] for name in names}) if all(name in info for name in names) else None


def record_stats(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """Pass rate, valid-call fraction and submit rate of finished BugFixEnv episodes, from their records."""
    n, turns = len(records), sum(r.n_turns for r in records)
    return {"pass_rate": sum(r.passed for r in records) / n,
            "valid_calls": 1 - sum(r.n_invalid for r in records) / turns,
            "submit_rate": sum(r.submitted for r in records) / n}


class BugFixEnv(gymnasium.Env):
    """A gymnasium environment: text calls in, text observations out, reward from hidden tests.

    ``tasks``: a split name or Tasks; ``budget``: calls per episode; ``grader``: defaults to the shared
    :func:`default_grader`; ``allow_write``: adds the ``write`` call (off by default, so the action
    space of TinyAgent is unchanged); ``render_mode="ansi"``: :meth:`render` returns the episode as text.
    """

    metadata = {"render_modes": ["ansi"]}
    OPTIONS = ("task", "allow_heldout")

    def __init__(self, tasks: str | Sequence[Task] = "train", budget: int = BUDGET, grader: Grader | None = None,
                 allow_write: bool = False, render_mode: str | None = None):
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"budget is the number of calls per episode and must be an int >= 1, got {budget!r}")
        if grader is not None and not isinstance(grader, Grader):
            raise ValueError(f"grader must be a Grader or None, got {type(grader).__name__}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if not isinstance(allow_write, bool):
            raise ValueError(f"allow_write must be True or False, got {allow_write!r}")
        self.tasks = make_tasks(tasks) if isinstance(tasks, str) else list(tasks)
        if not self.tasks:
            raise ValueError("BugFixEnv needs at least one task; pass a split name or a list of Task")
        if not all(isinstance(t, Task) for t in self.tasks):
            raise ValueError("tasks must be a split name ('train', 'heldout', 'all') or a list of Task")
        self.budget, self.grader, self.allow_write, self.render_mode = budget, grader, allow_write, render_mode
        self.observation_space = spaces.Text(MAX_OBS_CHARS, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(MAX_WRITE_CHARS if allow_write else MAX_CALL_CHARS, min_length=0,
                                        charset=CHARSET)
        self.task: Task | None = None
        self._done = True

    def _task(self, options: dict) -> Task:
        """The episode's task: ``options["task"]`` (a Task, or a name of this env's tasks), else a random one."""
        unknown = set(options) - set(self.OPTIONS)
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; options are {', '.join(self.OPTIONS)}")
        task = options.get("task")
        if task is None:
            return self.tasks[int(self.np_random.integers(len(self.tasks)))]
        if isinstance(task, Task):
            return task
        if not isinstance(task, str):
            raise ValueError(f"options['task'] must be a Task or a task name, got {type(task).__name__}")
        found = next((t for t in self.tasks if t.name == task), None) or get_task(task)
        if found not in self.tasks and found.split == "heldout" and not options.get("allow_heldout"):
            raise ValueError(f"task {task!r} is held out and not in this environment's tasks; build "
                             "BugFixEnv('heldout') or pass options={'task': ..., 'allow_heldout': True}")
        return found

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start an episode on ``options["task"]`` (a Task or its name), else on a task drawn with the env's RNG.

        The first observation is the issue followed by the call protocol (:func:`protocol`).
        """
        super().reset(seed=seed)
        self.task = self._task(options or {})
        self.history = [self.task.source]
        self.actions: list[str] = []
        self.ops: list[str] = []
        self.invalid: list[bool] = []
        self.submitted = False
        self.hidden_pass = False
        self.stop: str | None = None
        self.outcome: str | None = None
        self._done = False
        prompt = _printable(f"{self.task.issue}\n{protocol(self.task.name, self.budget, self.allow_write)}")
        self.transcript = [prompt]
        return prompt, self._info()

    def step(self, action: str | bytes) -> tuple[str, float, bool, bool, dict]:
        """Apply one call; an invalid call gets an error observation and still costs its turn."""
        if self._done:
            raise ValueError("the episode is over (or never started); call reset() before step()")
        text, error = _decode(action)
        hint = FORMAT_HINT + WRITE_HINT * self.allow_write
        call, observation = (None, ERRORS[error].format(hint=hint)) if error else _check(text, self.allow_write)
        self.actions.append(text)
        if call is not None:
            observation = self._do(*call)
        invalid = call is None or (call[0] == "write" and observation.startswith("error:"))
        self.invalid.append(invalid)
        terminated = self.submitted
        truncated = not terminated and len(self.actions) >= self.budget
        reward = 0.0
        if terminated or truncated:
            reward = self._finish("submit" if terminated else "budget")
            observation += "" if terminated else "\nbudget exhausted"
        observation = _printable(observation)
        self.transcript.append(f"> {_printable(text)}\n{observation}")
        if terminated or truncated:
            self.transcript.append(f"reward {reward:g} ({self.outcome})")
        return observation, reward, terminated, truncated, self._info()

    def render(self) -> str | None:
        """With ``render_mode="ansi"``: the episode so far as text (prompt, each call and observation, reward)."""
        if self.render_mode != "ansi":
            return None
        return "\n".join(getattr(self, "transcript", []))

    def _grader(self) -> Grader:
        return self.grader or default_grader()

    def _do(self, tool: str, arg: str | None) -> str:
        """Carry out a valid call and return its observation."""
        source = self.history[-1]
        if tool == "read":
            return source
        if tool == "test":
            return self._grader().grade(self.task, source).report
        if tool == "write":
            written, error = _written(arg, self.task.name)
            if written is None:
                return error
            self.ops.append("write")
            self.history.append(written)
        elif tool == "edit":
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

    @property
    def record(self) -> EpisodeRecord:
        """What has happened in the episode so far."""
        return EpisodeRecord(task=self.task.name, n_turns=len(self.actions), n_invalid=sum(self.invalid),
                             submitted=self.submitted, hidden_pass=self.hidden_pass, stop=self.stop,
                             actions=list(self.actions), ops=list(self.ops), outcome=self.outcome,
                             isolation=self._grader().sandbox.isolation, invalid=list(self.invalid))

    def _info(self) -> dict:
        record = self.record
        return {f.name: getattr(record, f.name) for f in fields(record)}

    @property
    def source(self) -> str:
        """The current source of the episode's function."""
        return self.history[-1]
