"""Grade a task's candidate source: visible and hidden tests in one sandboxed run, with a cache that cannot lie.

The cache key covers everything a grade depends on: the grader's version, the sandbox's isolation
layer, the limits, the function name, every visible and hidden case, and the source. Only verdicts
that cannot depend on the machine's load are cached: never a timeout or an infrastructure failure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from functools import cache

from pglab.envs.bugfix.sandbox import UNCACHED, Job, Limits, ProgramResult, Sandbox
from pglab.envs.bugfix.tasks import Task

VERSION = "4"
"""The grading semantics' version; part of every cache key."""


@dataclass(frozen=True)
class Grade:
    """A program's result on one task: visible results as the ``test`` call shows them, and the hidden verdict."""

    result: ProgramResult
    report: str
    hidden_pass: bool


def _job(task: Task, source: str) -> Job:
    """Visible, hidden and generated cases in one program; the generated ones share test processes; the hidden and
    generated ones are checked for determinism."""
    fixed = task.visible + task.hidden
    return Job(source, task.name, tuple((c.args, c.expected) for c in fixed + task.generated), len(fixed),
               len(task.visible))


def _report(task: Task, result: ProgramResult) -> str:
    """The observation of a ``test`` call: one line per visible test."""
    lines = []
    for case, test in zip(task.visible, result.tests):
        line = f"{test.status.upper()} {case.call(task.name)} == {case.expected!r}"
        lines.append(f"{line}: {test.detail}" if test.detail else line)
    passed = sum(t.status == "pass" for t in result.tests[: len(task.visible)])
    return "\n".join([f"visible tests: {passed} of {len(task.visible)} pass", *lines])


def _grade(task: Task, result: ProgramResult) -> Grade:
    """Hidden pass: every hidden and every generated case passes."""
    hidden = result.tests[len(task.visible):]
    passed = len(hidden) == len(task.hidden) + len(task.generated) > 0 and all(t.status == "pass" for t in hidden)
    return Grade(result, _report(task, result), passed)


def source_key(task: Task, source: str, limits: Limits | None = None, isolation: str = "") -> str:
    """The cache key of a program: SHA-256 of (version, isolation, limits, function name and cases, source)."""
    head = json.dumps([VERSION, isolation, astuple(limits or Limits()), task.digest])
    return hashlib.sha256(f"{head}\n{source}".encode("utf-8", "surrogatepass")).hexdigest()


class Grader:
    """Grades programs in a Sandbox; with ``cache`` each distinct program (key: :func:`source_key`) runs once."""

    def __init__(self, sandbox: Sandbox | None = None, limits: Limits | None = None, cache: bool = True):
        if sandbox is not None and not isinstance(sandbox, Sandbox):
            raise ValueError(f"sandbox must be a Sandbox, got {type(sandbox).__name__}")
        self.sandbox = sandbox or Sandbox()
        self.limits = limits or self.sandbox.limits
        self.cache: dict[str, Grade] | None = {} if cache else None
        self.runs = 0
        self.infra_errors = 0

    def grade(self, task: Task, source: str) -> Grade:
        """The Grade of ``source`` on ``task`` (from the cache when it has run before)."""
        return self.grade_many([(task, source)])[0]

    def grade_many(self, programs: Sequence[tuple[Task, str]]) -> list[Grade]:
        """Grades of many programs; the ones not cached run in parallel on the sandbox's workers."""
        keys = [source_key(task, source, self.limits, self.sandbox.isolation) for task, source in programs]
        known = self.cache if self.cache is not None else {}
        todo = {key: program for key, program in zip(keys, programs) if key not in known}
        if todo:
            results = self.sandbox.run_many([_job(*program) for program in todo.values()], self.limits)
            self.runs += len(results)
            todo = {key: _grade(program[0], result) for (key, program), result in zip(todo.items(), results)}
            self.infra_errors += sum(g.result.outcome == "infra_error" for g in todo.values())
            known.update((key, g) for key, g in todo.items() if g.result.outcome not in UNCACHED)
        return [todo[key] if key in todo else known[key] for key in keys]


@cache
def default_grader() -> Grader:
    """The process-wide Grader (and Sandbox) that environments share unless given their own."""
    return Grader(Sandbox())
