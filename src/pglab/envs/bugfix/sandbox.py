"""Run candidate programs out of process: a pool of long-lived workers, limits, per-test results.

Candidate code never runs in the caller. Each worker (``_worker.py``, standard library only)
forks one process per program into its own session with CPU-time, address-space and core limits,
and one fresh process per test; output is captured up to a cap; on the wall-clock deadline the
whole process group is killed and every descendant is reaped. Results come back per test as
JSON through a dedicated pipe.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

OUTCOMES = ("pass", "fail", "error", "timeout", "crash", "oom")
WORKER = Path(__file__).with_name("_worker.py")
SLACK = 5.0  # seconds the caller waits beyond a program's deadline before it replaces the worker


@dataclass(frozen=True)
class Limits:
    """Per-program limits: wall-clock seconds, CPU seconds per test process, address space, captured output."""

    timeout: float = 1.0
    cpu: int = 2
    memory: int = 512 * 2**20
    output: int = 4096


@dataclass(frozen=True)
class TestResult:
    """One test's status (one of OUTCOMES) and a short detail (``got 3``, ``ZeroDivisionError: ...``)."""

    status: str
    detail: str = ""


@dataclass(frozen=True)
class ProgramResult:
    """The outcome of one program: the worst test status (or timeout), per-test results, captured output."""

    outcome: str
    tests: tuple[TestResult, ...]
    output: str = ""
    output_bytes: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Job:
    """A program to run: its source, the function to call, and the cases as (args, expected) pairs."""

    source: str
    func: str
    cases: tuple[tuple[tuple, object], ...]


def _failed(job: Job, outcome: str, detail: str) -> ProgramResult:
    return ProgramResult(outcome, tuple(TestResult(outcome, detail) for _ in job.cases))


@dataclass(eq=False)
class _Worker:
    """One worker process and the unread bytes of its answer stream."""

    proc: subprocess.Popen
    buffer: bytearray = field(default_factory=bytearray)

    @classmethod
    def start(cls) -> _Worker:
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(WORKER)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        return cls(proc)

    def send(self, job: Job, limits: Limits) -> None:
        request = {"source": job.source, "func": job.func, "cases": [[repr(a), repr(e)] for a, e in job.cases],
                   "timeout": limits.timeout, "cpu": limits.cpu, "memory": limits.memory, "output": limits.output}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())

    def fileno(self) -> int:
        return self.proc.stdout.fileno()

    def read_answer(self) -> dict | None:
        """Consume available bytes; the answer once a whole line has arrived, else None (EOFError if it died)."""
        chunk = os.read(self.fileno(), 1 << 16)
        if not chunk:
            raise EOFError("sandbox worker exited")
        self.buffer += chunk
        if b"\n" not in self.buffer:
            return None
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return json.loads(line)

    def stop(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _stop_all(workers: list[_Worker], owner: int) -> None:
    if os.getpid() == owner:
        for worker in workers:
            worker.stop()
        workers.clear()


def _program_result(answer: dict) -> ProgramResult:
    return ProgramResult(answer["outcome"], tuple(TestResult(s, d) for s, d in answer["tests"]),
                         answer["output"], answer["output_bytes"], answer["seconds"])


class Sandbox:
    """A pool of up to ``workers`` worker processes, started on first use and stopped by ``close()``."""

    def __init__(self, workers: int = 2, limits: Limits | None = None):
        if workers < 1:
            raise ValueError(f"a sandbox needs at least one worker, got workers={workers}")
        self.size, self.limits = workers, limits or Limits()
        self._workers: list[_Worker] = []
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_all, self._workers, self._owner)

    def run(self, job: Job, limits: Limits | None = None) -> ProgramResult:
        """Run one program and return its result."""
        return self.run_many([job], limits)[0]

    def run_many(self, jobs: Sequence[Job], limits: Limits | None = None) -> list[ProgramResult]:
        """Run programs on all workers in parallel; results in the order of ``jobs``."""
        limits = limits or self.limits
        with self._lock:
            self._after_fork()
            return self._schedule(list(jobs), limits)

    def close(self) -> None:
        """Stop the workers (a later run starts new ones)."""
        with self._lock:
            _stop_all(self._workers, self._owner)

    def _after_fork(self) -> None:
        """In a forked child, leave the parent's workers alone and start fresh ones."""
        if os.getpid() != self._owner:
            self._finalizer.detach()
            self._workers, self._owner = [], os.getpid()
            self._finalizer = weakref.finalize(self, _stop_all, self._workers, self._owner)

    def _schedule(self, jobs: list[Job], limits: Limits) -> list[ProgramResult]:
        results: list[ProgramResult | None] = [None] * len(jobs)
        pending = list(enumerate(jobs))[::-1]
        busy: dict[int, tuple[int, float]] = {}  # worker slot -> (job index, caller deadline)
        while pending or busy:
            for slot in range(min(self.size, len(busy) + len(pending))):
                if slot not in busy and pending:
                    index, job = pending.pop()
                    try:
                        self._worker(slot).send(job, limits)
                    except BrokenPipeError:
                        self._replace(slot)
                        self._workers[slot].send(job, limits)
                    busy[slot] = (index, time.monotonic() + limits.timeout + SLACK)
            self._wait(busy, jobs, results)
        return results

    def _worker(self, slot: int) -> _Worker:
        while len(self._workers) <= slot:
            self._workers.append(_Worker.start())
        if self._workers[slot].proc.poll() is not None:
            self._workers[slot] = _Worker.start()
        return self._workers[slot]

    def _wait(self, busy: dict[int, tuple[int, float]], jobs: list[Job], results: list) -> None:
        """Wait for answers from the busy workers; a worker that dies or hangs is replaced."""
        timeout = max(0.0, min(deadline for _, deadline in busy.values()) - time.monotonic())
        ready, _, _ = select.select([self._workers[slot] for slot in busy], [], [], timeout)
        for worker in ready:
            slot = self._workers.index(worker)
            index = busy[slot][0]
            try:
                answer = worker.read_answer()
            except (EOFError, ValueError) as err:
                results[index] = _failed(jobs[index], "crash", f"sandbox worker failed: {err}")
                self._replace(slot)
                del busy[slot]
                continue
            if answer is not None:
                results[index] = _program_result(answer)
                del busy[slot]
        for slot, (index, deadline) in list(busy.items()):
            if time.monotonic() > deadline:
                results[index] = _failed(jobs[index], "timeout", "sandbox worker did not answer")
                self._replace(slot)
                del busy[slot]

    def _replace(self, slot: int) -> None:
        self._workers[slot].proc.kill()
        self._workers[slot].stop()
        self._workers[slot] = _Worker.start()
