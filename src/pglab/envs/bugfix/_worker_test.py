"""The sandbox worker's test process T (standard library only): call the candidate on one frame of arguments.

Part of the worker program (see :mod:`pglab.envs.bugfix._worker`).
"""

import json
import os
import resource
import select
import signal
import sys

try:  # as a module; in the sandbox these names are defined by the parts before this one
    from pglab.envs.bugfix._worker_os import (  # noqa: I001
        DETAIL_CHARS,
        MAX_DEPTH,
        RESULT_BYTES,
        _decode,
        encode,
        json_depth,
    )
except ImportError:
    pass

# ---- the test process T ---------------------------------------------------------------------------


def _call(function, args):
    """Call ``function(*args)`` on the candidate's behalf -> [status, detail, value]."""
    try:
        return ["value", "", function(*args)]
    except MemoryError:
        return ["oom", "MemoryError", None]
    except SystemExit as err:
        return ["error", f"SystemExit: {err.code!r}", None]
    except BaseException as err:  # noqa: B036 - a candidate may raise anything
        return ["error", f"{type(err).__name__}: {err}"[:DETAIL_CHARS], None]


def _payload(test):
    """``[status, detail, value]`` -> ``[status, detail, encoded value]`` (``bad_result`` if not plain data)."""
    status, detail, value = test
    if status != "value":
        return [status, detail.encode("ascii", "backslashreplace").decode(), None]
    try:
        return ["value", "", encode(value)]
    except (TypeError, RecursionError, ValueError) as err:
        return ["bad_result", f"not plain data: {err}"[:DETAIL_CHARS], None]


def _test_process(code, func, frame, result_fd, confine):
    """Body of T: confine itself, define the candidate once, run every test of the frame, write their results;
    exit. Nothing of an earlier program is in its memory: its ancestors never held another request."""
    try:
        os.closerange(3, result_fd)
        os.closerange(result_fd + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        confine()
        if "random" in sys.modules:  # a state inherited from the worker would be one coin for every test process
            sys.modules["random"].seed()
        batch = [_decode(args) for args in json.loads(frame)]
        namespace = {"__name__": "candidate"}
        defined = _call(exec, (code, namespace))
        if defined[0] == "value" and not callable(namespace.get(func)):
            defined = ["error", f"NameError: the program defines no function {func}", None]
        tests = [defined] * len(batch) if defined[0] != "value" else \
            [_call(namespace[func], args) for args in batch]
        data = json.dumps([_payload(t) for t in tests]).encode()
        while data:
            data = data[os.write(result_fd, data):]
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
        if sig == signal.SIGXCPU:
            return "timeout", "killed by SIGXCPU (CPU limit)"
        return "crash", f"killed by {signal.Signals(sig).name}"
    return "crash", f"exited with status {os.WEXITSTATUS(wait_status)} before reporting"


def _read_result(pid, fd, most):
    """T's report and wait status: read until T has exited (a descendant may hold the pipe open) or the report
    exceeds ``most`` bytes (then T is killed)."""
    data, poller = bytearray(), select.poll()
    poller.register(fd, select.POLLIN)
    os.set_blocking(fd, False)
    while True:
        exited, wait_status = os.waitpid(pid, os.WNOHANG)
        if exited or len(data) > most:
            break
        poller.poll(5)
        try:
            while (chunk := os.read(fd, 1 << 16)) and len(data) <= most:
                data += chunk
        except BlockingIOError:
            pass
    if not exited:
        os.kill(pid, signal.SIGKILL)
        _, wait_status = os.waitpid(pid, 0)
    try:
        data += os.read(fd, most + 1)
    except BlockingIOError:
        pass
    return bytes(data), wait_status


T_STATUSES = ("value", "error", "oom", "bad_result")


def checked(tests, n, statuses=T_STATUSES, small=False):
    """T's parsed report -> n well-formed ``[status, detail, payload]``: anything malformed, nested deeper than
    MAX_DEPTH or larger than RESULT_BYTES is ``bad_result`` with the reason (``small``: the whole report is
    shorter than RESULT_BYTES, so no payload can be longer)."""
    if type(tests) is not list or len(tests) != n:
        return [["bad_result", "malformed result", None]] * n
    out = []
    for test in tests:
        if type(test) is not list or len(test) != 3 or test[0] not in statuses \
                or type(test[1]) is not str:
            out.append(["bad_result", "malformed result", None])
        elif json_depth(test[2], 2 * MAX_DEPTH + 2) > 2 * MAX_DEPTH + 2:
            out.append(["bad_result", f"the result is nested deeper than {MAX_DEPTH} levels", None])
        elif test[0] == "value" and not small and len(json.dumps(test[2])) > RESULT_BYTES:
            out.append(["bad_result", f"the result is larger than {RESULT_BYTES} bytes", None])
        else:
            out.append([test[0], test[1][:DETAIL_CHARS], test[2] if test[0] == "value" else None])
    return out


def _run_frame(code, func, frame, confine):
    """Fork T for one frame of tests (``confine()`` runs in T first), wait for it, and return one [status, detail,
    payload] per test."""
    n = len(json.loads(frame))
    most = n * (RESULT_BYTES + 2 * DETAIL_CHARS + 64) + 64
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _test_process(code, func, frame, write_fd, confine)
    os.close(write_fd)
    data, wait_status = _read_result(pid, read_fd, most)
    os.close(read_fd)
    if not data:
        return [[*_status_of_exit(wait_status), None]] * n
    if len(data) > most:
        return [["bad_result", f"the results are larger than {RESULT_BYTES} bytes each", None]] * n
    try:
        return checked(json.loads(data), n, small=len(data) <= RESULT_BYTES)
    except (ValueError, TypeError, RecursionError, MemoryError):
        return [["bad_result", "malformed result", None]] * n


