"""Run candidate programs out of process, in layers of isolation, and judge their results in the caller.

Candidate code never runs in the caller, and the verdict never runs where candidate code runs.
A pool of long-lived workers (``_worker.py`` and its parts, standard library only) runs programs one at a time;
each test's arguments go to a fresh test process, whose only answer is its result as plain data,
encoded as JSON with tags (:func:`encode`). The caller decodes the result and compares it with the
expected value, which never leaves the caller (:func:`same`). Every request carries a random id;
an answer with another id, a malformed answer, a dead or stalled worker, or an exception in the
caller while it waits discards that worker and starts a fresh one. Such infrastructure failures
are retried once and then reported as ``infra_error``, never as the program's own outcome.

Isolation layers, strongest first (``isolation="auto"`` takes the first that works here):
``bwrap`` (the worker runs inside bubblewrap: no network, own pid and mount namespaces, read-only
system and Python folders, private /tmp), ``landlock`` (each program is confined by Linux Landlock:
reads in the Python installation and system libraries, writes in its own folder, no TCP, signals
scoped), and ``process`` (limits only). Every layer: an empty environment but PATH, LANG and
PYTHONHASHSEED; a fresh working folder per program, removed afterwards; rlimits on CPU, address
space, file size, open files and processes; an aggregate memory cap on the program's whole process
tree; a worker that is not dumpable; and, when the caller is root, programs without capabilities.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pglab.envs.bugfix._worker_os import (
    ANSWER_BYTES,
    MAX_DEPTH,
    RESULT_BYTES,
    decode,
    encode,
    landlock_abi,
    make_worker_group,
    remove_group,
)
from pglab.envs.bugfix.layers import (
    CGROUP_MOUNT,
    WORKER_SOURCE,
    _bwrap_argv,
    _probe,
    _python,
    _read_paths,
    _warn_if_weaker,
    describe,
    launcher,
    resolve_isolation,
    worker_env,
)

SEVERITY = ("infra_error", "timeout", "nondeterministic", "crash", "oom", "error", "bad_result", "fail")
OUTCOMES = ("pass", *SEVERITY[::-1])
TEST_STATUSES = ("error", "oom", "bad_result", "crash", "timeout", "nondeterministic")
REL_TOL = ABS_TOL = 1e-9
SLACK = 2.0  # seconds the caller waits beyond a program's wall-clock backstop before it calls the worker stalled
MAX_ANSWER = ANSWER_BYTES + (1 << 24)
BATCH = 400
"""Generated cases share one test process, this many at a time (each fixed case has its own)."""
UNCACHED = ("infra_error", "timeout")
"""Outcomes that may depend on the machine's load: never cached."""


@dataclass(frozen=True)
class Limits:
    """Per-program limits: CPU time (s, all the program's processes together, plus ``per_case`` s for each test
    case), the wall-clock backstop (s; default 10 x timeout + 2, plus 10 x ``per_case`` per case), CPU per process
    (s, RLIMIT_CPU, plus ``per_case`` per case of its frame), memory (bytes: the cgroup's memory.max where there is
    one, which counts memfd, shared memory and tmpfs; also RLIMIT_AS of each process), captured output (bytes),
    files (bytes: the size of each test process's tmpfs, and RLIMIT_FSIZE), open files (RLIMIT_NOFILE) and processes
    (the cgroup's pids.max; also RLIMIT_NPROC). Without cgroups they are sampled every 10 ms."""

    timeout: float = 1.0
    cpu: int = 2
    memory: int = 512 * 2**20
    output: int = 4096
    files: int = 16 * 2**20
    open_files: int = 64
    processes: int = 32
    wall: float | None = None
    per_case: float = 0.01

    def __post_init__(self):
        minimum = {"timeout": 0.001, "cpu": 1, "memory": 64 * 2**20, "output": 0, "files": 0, "open_files": 16,
                   "processes": 4, "per_case": 0.0}
        if self.wall is None and isinstance(self.timeout, (int, float)) and not isinstance(self.timeout, bool):
            object.__setattr__(self, "wall", 10.0 * self.timeout + 2.0)
        for name, low in {**minimum, "wall": self.timeout}.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value < math.inf:
                raise ValueError(f"Limits.{name} must be a finite number >= {low}, got {value!r}")
        for name in ("cpu", "memory", "output", "files", "open_files", "processes"):
            if not isinstance(getattr(self, name), int):
                raise ValueError(f"Limits.{name} must be an int, got {getattr(self, name)!r}")

    def budget(self, cases: int) -> tuple[float, float]:
        """(CPU seconds, wall-clock seconds) of a program with ``cases`` test cases: the budget grows with the work,
        so a correct program that costs a few milliseconds per call passes however many cases it has."""
        return self.timeout + self.per_case * cases, self.wall + 10 * self.per_case * cases


@dataclass(frozen=True)
class TestResult:
    """One test's status (one of OUTCOMES) and a short detail (``got 3``, ``ZeroDivisionError: ...``)."""

    status: str
    detail: str = ""


@dataclass(frozen=True)
class ProgramResult:
    """The outcome of one program: the worst test status, per-test results, captured output, the layer it ran in."""

    outcome: str
    tests: tuple[TestResult, ...]
    output: str = ""
    output_bytes: int = 0
    seconds: float = 0.0
    isolation: str = ""
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class Job:
    """A program to run: its source, the function to call, and the cases as (args, expected) pairs. Cases from index
    ``batch_from`` on (generated ones) share test processes, BATCH at a time; each case before it has its own.
    Cases from ``check_from`` on (the hidden ones) are checked for determinism: when every one of them returned a
    value, they run again together in one more fresh test process, and a case whose second answer is not the
    first one, bit for bit, is ``nondeterministic``."""

    source: str
    func: str
    cases: tuple[tuple[tuple, object], ...]
    batch_from: int | None = None
    check_from: int | None = None

    def checked(self) -> int:
        """How many cases the determinism check runs again."""
        return 0 if self.check_from is None else len(self.cases) - self.check_from

    def frames(self) -> list[str]:
        """The cases' arguments as the worker's frames: JSON lists of encoded argument tuples."""
        split = len(self.cases) if self.batch_from is None else self.batch_from
        groups = [[args] for args, _ in self.cases[:split]]
        rest = [args for args, _ in self.cases[split:]]
        groups += [rest[k:k + BATCH] for k in range(0, len(rest), BATCH)]
        return [json.dumps([encode(args) for args in group]) for group in groups]


def _canon(value: Any) -> Any:
    """A hashable, exactly typed form of plain data, for set members and dict keys (nan equals nan)."""
    if type(value) in (tuple, list):
        return type(value).__name__, tuple(map(_canon, value))
    return type(value).__name__, value.hex() if type(value) in (float, bytes) else value


def same(got: Any, expected: Any) -> bool:
    """Equality of plain data: exact types, exact ints, floats within REL_TOL/ABS_TOL (equal infinities, nan ==
    nan), containers element by element; set members and dict keys compared exactly."""
    if type(got) is not type(expected):
        return False
    if type(got) is float:
        if math.isnan(got) or math.isnan(expected) or math.isinf(got) or math.isinf(expected):
            return got == expected or (math.isnan(got) and math.isnan(expected))
        return math.isclose(got, expected, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if type(got) in (list, tuple):
        return len(got) == len(expected) and all(same(g, e) for g, e in zip(got, expected))
    if type(got) is set:
        return {_canon(v) for v in got} == {_canon(v) for v in expected}
    if type(got) is dict:
        keys = {_canon(k): k for k in expected}
        return len(got) == len(expected) and all(
            _canon(k) in keys and same(v, expected[keys[_canon(k)]]) for k, v in got.items())
    return got == expected


def check_plain(value: Any, what: str) -> None:
    """ValueError unless ``value`` is plain data that survives the sandbox's encoding unchanged, nested at most
    MAX_DEPTH levels and at most RESULT_BYTES long as a result (so that a correct program can return it)."""
    try:
        text = json.dumps(encode(value))
        size, back = len(text), decode(json.loads(text))
    except (TypeError, ValueError, RecursionError) as err:
        raise ValueError(f"{what} must be plain data (None, bool, int, float, str, bytes, and lists, tuples, "
                         f"dicts and sets of them) nested at most {MAX_DEPTH} levels: {err}") from None
    if size > RESULT_BYTES:
        raise ValueError(f"{what} takes {size} bytes as a result; the sandbox's answer limit is {RESULT_BYTES} "
                         "bytes: use a smaller value")
    if not same(back, value):
        raise ValueError(f"{what} does not round-trip as plain data; use distinct, exactly typed values")


def _short(value: Any) -> str:
    try:
        text = ascii(value)
    except ValueError:  # an int too long for str(): Python's limit on digits
        text = f"an int of {value.bit_length()} bits"
    return text if len(text) <= 60 else text[:57] + "..."


def _judge(case: tuple[tuple, object], test: list) -> TestResult:
    """The verdict on one test from the worker's ``[status, detail, payload]``; ValueError if malformed."""
    status, detail, payload = test
    if status in TEST_STATUSES and type(detail) is str:
        return TestResult(status, detail)
    if status != "value":
        raise ValueError(f"unknown test status {status!r}")
    try:
        got = decode(payload)
        agrees = same(got, case[1])
    except (ValueError, TypeError, RecursionError, MemoryError, OverflowError):
        return TestResult("bad_result", "the result is not plain data")
    return TestResult("pass") if agrees else TestResult("fail", f"got {_short(got)}")


def _worst(tests: Sequence[TestResult]) -> str:
    statuses = {t.status for t in tests}
    return next((s for s in SEVERITY if s in statuses), "pass")


@dataclass(eq=False)
class _Worker:
    """One worker process, its private folder (process and landlock layers), its cgroups and unread answer bytes."""

    proc: subprocess.Popen
    base: str | None
    groups: dict[str, str] = field(default_factory=dict)
    buffer: bytearray = field(default_factory=bytearray)

    @classmethod
    def start(cls, layer: str) -> _Worker:
        probe = _probe(layer)
        groups = make_worker_group(f"pglab-{os.getpid()}-{secrets.token_hex(4)}")
        base = None if layer == "bwrap" else tempfile.mkdtemp(prefix="pglab-sandbox-")
        inside = {kind: f"{CGROUP_MOUNT}/{kind}" for kind in groups} if layer == "bwrap" else groups
        config = json.dumps({"base": base or "/tmp", "read": list(_read_paths()), "landlock": landlock_abi(),
                             "groups": inside, "namespaces": probe["namespaces"], "seccomp": probe["seccomp"]})
        env = worker_env()
        argv = [*launcher(), _python(), "-I", "-S", "-c", WORKER_SOURCE, config]
        if layer == "bwrap":
            argv, env = _bwrap_argv(shutil.which("bwrap"), config, binds=groups), {}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env=env, bufsize=0)
        except BaseException:
            if base:
                shutil.rmtree(base, ignore_errors=True)
            remove_group(groups)
            raise
        return cls(proc, base, groups)

    def send(self, job: Job, limits: Limits) -> str:
        """Write one request; its random id."""
        request_id = secrets.token_hex(16)
        cpu, wall = limits.budget(len(job.cases) + job.checked())
        request = {"id": request_id, "source": job.source, "func": job.func, "limits": asdict(limits),
                   "frames": job.frames(), "check_from": job.check_from, "cpu_budget": cpu, "wall_budget": wall}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        return request_id

    def fileno(self) -> int:
        return self.proc.stdout.fileno()

    def read_answer(self) -> dict | None:
        """Consume available bytes; the answer once a whole line has arrived, else None. EOFError if the worker
        exited, ValueError if the line is not a JSON object, is nested too deep or is too long."""
        chunk = os.read(self.fileno(), 1 << 16)
        if not chunk:
            raise EOFError("the worker exited")
        self.buffer += chunk
        if b"\n" not in self.buffer:
            if len(self.buffer) > MAX_ANSWER:
                raise ValueError("answer longer than the protocol allows")
            return None
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError, MemoryError) as err:
            raise ValueError(f"the answer is not JSON: {type(err).__name__}") from None
        if type(answer) is not dict:
            raise ValueError("the answer is not a JSON object")
        return answer

    def stop(self) -> None:
        self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()
        self.proc.wait()
        if self.base:
            shutil.rmtree(self.base, ignore_errors=True)
        remove_group(self.groups)


def _stop_all(workers: list[_Worker | None], owner: int) -> None:
    if os.getpid() == owner:
        for worker in workers:
            if worker is not None:
                worker.stop()
        workers.clear()


_SANDBOXES: weakref.WeakSet = weakref.WeakSet()


def _reset_locks_in_child() -> None:
    """After a fork: the child's sandboxes get fresh locks (another thread of the parent may have held one)."""
    for box in list(_SANDBOXES):
        box._lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_locks_in_child)


class Sandbox:
    """A pool of up to ``workers`` worker processes in one isolation layer, started on first use."""

    def __init__(self, workers: int = 2, limits: Limits | None = None, *, isolation: str = "auto"):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"a sandbox needs at least one worker, got workers={workers!r}")
        if limits is not None and not isinstance(limits, Limits):
            raise ValueError(f"limits must be a Limits, got {type(limits).__name__}")
        self.isolation = resolve_isolation(isolation)
        _warn_if_weaker(isolation, self.isolation)
        self.size, self.limits = workers, limits or Limits()
        self.infra_failures = 0
        self._workers: list[_Worker | None] = []
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_all, self._workers, self._owner)
        _SANDBOXES.add(self)

    def describe(self) -> dict[str, Any]:
        """The layer in use, the kernel's Landlock ABI, what provides each guarantee and what is not applied here."""
        return describe(self.isolation)

    def run(self, job: Job, limits: Limits | None = None) -> ProgramResult:
        """Run one program and return its result."""
        return self.run_many([job], limits)[0]

    def run_many(self, jobs: Sequence[Job], limits: Limits | None = None) -> list[ProgramResult]:
        """Run programs on all workers in parallel; results in the order of ``jobs``. An infrastructure failure
        is retried once on a fresh worker, then reported as ``infra_error``."""
        limits = limits or self.limits
        with self._lock:
            self._after_fork()
            results: list[ProgramResult | str] = self._schedule(list(jobs), limits)
            retry = [i for i, r in enumerate(results) if isinstance(r, str)]
            for i, again in zip(retry, self._schedule([jobs[i] for i in retry], limits)):
                results[i] = again if isinstance(again, ProgramResult) else ProgramResult(
                    "infra_error", tuple(TestResult("infra_error", again) for _ in jobs[i].cases),
                    isolation=self.isolation)
            return results

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

    def _schedule(self, jobs: list[Job], limits: Limits) -> list[ProgramResult | str]:
        """Results of ``jobs``, or for each infrastructure failure a string saying what failed."""
        results: list[ProgramResult | str | None] = [None] * len(jobs)
        pending = deque(enumerate(jobs))
        busy: dict[int, tuple[int, str, float]] = {}  # worker slot -> (job index, request id, caller deadline)
        selector = selectors.DefaultSelector()
        try:
            while pending or busy:
                for slot in range(self.size):
                    if slot not in busy and pending:
                        index, job = pending.popleft()
                        try:
                            worker = self._worker(slot)
                            deadline = time.monotonic() + limits.budget(len(job.cases) + job.checked())[1] + SLACK
                            busy[slot] = (index, worker.send(job, limits), deadline)
                            selector.register(worker.fileno(), selectors.EVENT_READ, slot)
                        except OSError as err:
                            results[index] = self._discard(slot, f"the worker did not start or accept work: {err}")
                timeout = max(0.0, min((d for _, _, d in busy.values()), default=0.0) - time.monotonic())
                for key, _ in selector.select(timeout) if busy else ():
                    slot = key.data
                    index, request_id, _ = busy[slot]
                    try:
                        answer = self._workers[slot].read_answer()
                        if answer is None:
                            continue
                        if answer.get("id") != request_id:
                            raise ValueError("the answer does not echo the request id")
                        results[index] = self._result(jobs[index], answer)
                    except Exception as err:  # noqa: BLE001 - whatever the answer, a verdict or a new worker
                        results[index] = self._discard(slot, f"the worker failed: {type(err).__name__}: {err}"[:300])
                    selector.unregister(key.fd)
                    del busy[slot]
                for slot, (index, _, deadline) in list(busy.items()):
                    if time.monotonic() > deadline:
                        selector.unregister(self._workers[slot].fileno())
                        results[index] = self._discard(slot, "the worker did not answer in time")
                        del busy[slot]
        except BaseException:
            for slot in busy:
                self._discard(slot, "interrupted")
            raise
        finally:
            selector.close()
        return results

    def _result(self, job: Job, answer: dict) -> ProgramResult:
        if type(answer["tests"]) is not list or len(answer["tests"]) != len(job.cases):
            raise ValueError("the answer has the wrong number of tests")
        tests = tuple(_judge(case, test) for case, test in zip(job.cases, answer["tests"]))
        return ProgramResult(_worst(tests), tests, str(answer["output"]), int(answer["output_bytes"]),
                             float(answer["seconds"]), self.isolation, float(answer["cpu_seconds"]))

    def _worker(self, slot: int) -> _Worker:
        while len(self._workers) <= slot:
            self._workers.append(None)
        worker = self._workers[slot]
        if worker is None or worker.proc.poll() is not None:
            if worker is not None:
                worker.stop()
            self._workers[slot] = worker = _Worker.start(self.isolation)
        return worker

    def _discard(self, slot: int, reason: str) -> str:
        """Stop the worker in ``slot`` (a fresh one starts on next use); the reason, as an infrastructure failure."""
        self.infra_failures += 1
        if slot < len(self._workers) and self._workers[slot] is not None:
            self._workers[slot].stop()
            self._workers[slot] = None
        return reason
