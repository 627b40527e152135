"""Sandbox worker (standard library only; run as a script): grades candidate programs, one request per line.

Protocol: each line on stdin is a JSON request ``{source, func, cases: [[args_repr, expected_repr]],
timeout, cpu, memory, output}``; each answer is one JSON line on stdout ``{outcome, tests:
[[status, detail]], output, output_bytes, seconds}``. Per program the worker forks a process that
starts its own session (process group), lowers its resource limits and forks one fresh process per
test; each test reports through a dedicated pipe, never through printed text. On the wall-clock
deadline, and after every program, the whole group is killed and every descendant reaped.
"""

import ast
import builtins
import ctypes
import glob
import json
import math
import os
import resource
import select
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
DETAIL_CHARS = 160
SEVERITY = ("timeout", "crash", "oom", "error", "fail")
PLAIN = (int, float, str, bool, type(None), list, tuple, dict)


def _same(got, expected):
    """Equality on plain data (numbers compared with isclose); objects of other types never match."""
    numbers = (int, float)
    if type(got) in numbers and type(expected) in numbers:
        return math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-9)
    if type(got) is not type(expected):
        return False
    if type(got) in (list, tuple):
        return len(got) == len(expected) and all(_same(g, e) for g, e in zip(got, expected))
    if type(got) is dict:
        return got.keys() == expected.keys() and all(_same(got[k], expected[k]) for k in got)
    return got == expected


def _short(value):
    text = ascii(value) if type(value) in PLAIN else f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _call(code, func, args):
    """Define the candidate in a fresh namespace and call it -> (status, detail, value)."""
    try:
        namespace = {"__name__": "candidate"}
        exec(code, namespace)
        if func not in namespace:
            return "error", f"NameError: the program defines no function {func}", None
        return "pass", "", namespace[func](*args)
    except MemoryError:
        return "oom", "MemoryError", None
    except SystemExit as err:
        return "error", f"SystemExit: {err.code!r}", None
    except BaseException as err:  # noqa: B036 - a candidate may raise anything
        return "error", f"{type(err).__name__}: {err}"[:DETAIL_CHARS], None


def _evaluate(code, func, args_repr, expected_repr):
    """Run one test on fresh inputs, restoring any builtins the candidate changed -> (status, detail)."""
    args, expected = ast.literal_eval(args_repr), ast.literal_eval(expected_repr)
    saved = dict(builtins.__dict__)
    try:
        status, detail, got = _call(code, func, args)
    finally:
        builtins.__dict__.clear()
        builtins.__dict__.update(saved)
    if status != "pass":
        return status, detail
    return ("pass", "") if _same(got, expected) else ("fail", f"got {_short(got)}")


def _test_process(code, func, case, report_fd):
    """Body of a per-test process: evaluate, report one JSON line, exit without cleanup."""
    try:
        status, detail = _evaluate(code, func, *case)
        os.write(report_fd, json.dumps([status, detail.encode("ascii", "backslashreplace").decode()]).encode())
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: B036 - the candidate may have replaced or closed the stream
                pass
        os._exit(0)


def _status_of_exit(wait_status):
    """(status, detail) of a test process that ended without reporting."""
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return "timeout", f"killed by {signal.Signals(sig).name} (CPU limit)"
        return "crash", f"killed by {signal.Signals(sig).name}"
    return "crash", f"exited with status {os.WEXITSTATUS(wait_status)} before reporting"


def _run_test(code, func, case, program_fd):
    """Fork one test process, wait for it, and return its (status, detail)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.close(program_fd)
        _test_process(code, func, case, write_fd)
    os.close(write_fd)
    _, wait_status = os.waitpid(pid, 0)
    os.set_blocking(read_fd, False)
    try:
        data = os.read(read_fd, 1 << 16)
    except BlockingIOError:
        data = b""
    os.close(read_fd)
    try:
        status, detail = json.loads(data)
        return status, detail
    except ValueError:
        return _status_of_exit(wait_status)


def _limit(req):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (req["cpu"], req["cpu"] + 1))
    resource.setrlimit(resource.RLIMIT_AS, (req["memory"], req["memory"]))


def _program_process(req, out_fd, report_fd, close_fds):
    """Body of the per-program process: own session, limits, one forked process per test."""
    try:
        os.setsid()
        for fd in close_fds:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        _limit(req)
        try:
            code = compile(req["source"], "<candidate>", "exec")
        except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
            code, failure = None, f"{type(err).__name__}: {err}"[:DETAIL_CHARS]
        for index, case in enumerate(req["cases"]):
            status, detail = ("error", failure) if code is None else _run_test(code, req["func"], case, report_fd)
            os.write(report_fd, (json.dumps([index, status, detail]) + "\n").encode())
    finally:
        os._exit(0)


def _children():
    """Pids of this process's children (zombies included), from /proc."""
    pids = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        with open(path) as f:
            pids += [int(p) for p in f.read().split()]
    return pids


def _kill_tree(leader):
    """Kill the program's process group, reap its leader, then kill and reap every other descendant."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    os.waitpid(leader, 0)
    for _ in range(100):
        orphans = _children()
        if not orphans:
            return
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _collect(leader, out_fd, report_fd, req, start):
    """Read output (capped) and reports until the program ends or its deadline passes."""
    captured, total, reports = bytearray(), 0, bytearray()
    poller = select.poll()
    poller.register(out_fd, select.POLLIN)
    poller.register(report_fd, select.POLLIN)
    deadline = start + req["timeout"]
    live = {out_fd, report_fd}
    while report_fd in live:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        for fd, _ in poller.poll(remaining * 1000):
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                poller.unregister(fd)
                live.discard(fd)
            elif fd == out_fd:
                total += len(chunk)
                captured += chunk[: max(0, req["output"] - len(captured))]
            else:
                reports += chunk
    timed_out = report_fd in live
    _kill_tree(leader)
    os.set_blocking(out_fd, False)
    try:
        while chunk := os.read(out_fd, 1 << 16):
            total += len(chunk)
            captured += chunk[: max(0, req["output"] - len(captured))]
    except BlockingIOError:
        pass
    return timed_out, bytes(captured), total, reports


def _tests(reports, n_cases, timed_out):
    """Per-test [status, detail] from the report lines; tests without a report timed out or crashed."""
    found = {}
    for line in reports.decode(errors="replace").splitlines():
        try:
            index, status, detail = json.loads(line)
            found[index] = [status, detail]
        except ValueError:
            continue
    missing = ["timeout", "wall-clock limit"] if timed_out else ["crash", "no report"]
    return [found.get(i, missing) for i in range(n_cases)]


def run_program(req, protocol_fds):
    """Grade one program; the answer dict of the protocol."""
    start = time.monotonic()
    out_r, out_w = os.pipe()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _program_process(req, out_w, report_w, [out_r, report_r, *protocol_fds])
    os.close(out_w)
    os.close(report_w)
    try:
        timed_out, output, total, reports = _collect(pid, out_r, report_r, req, start)
    finally:
        os.close(out_r)
        os.close(report_r)
    tests = _tests(reports, len(req["cases"]), timed_out)
    statuses = {status for status, _ in tests}
    outcome = next((s for s in SEVERITY if s in statuses), "pass")
    return {"outcome": "timeout" if timed_out else outcome, "tests": tests,
            "output": output.decode(errors="replace"), "output_bytes": total,
            "seconds": time.monotonic() - start}


def _become_subreaper():
    """Orphaned descendants of candidates are re-parented to this worker, which reaps them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _send(fd, answer):
    data = (json.dumps(answer) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def main():
    """Serve requests from stdin until it closes."""
    _become_subreaper()
    requests = os.fdopen(os.dup(0), "rb")
    answer_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    protocol_fds = [requests.fileno(), answer_fd, devnull]
    for line in requests:
        try:
            answer = run_program(json.loads(line), protocol_fds)
        except Exception as err:  # a worker bug must not kill the worker
            answer = {"outcome": "crash", "tests": [], "output": f"worker: {type(err).__name__}: {err}",
                      "output_bytes": 0, "seconds": 0.0}
        _send(answer_fd, answer)


if __name__ == "__main__":
    sys.exit(main())
