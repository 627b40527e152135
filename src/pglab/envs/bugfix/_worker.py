"""Sandbox worker (standard library only; started as ``python -I -S -c SOURCE CONFIG``): runs candidate programs.

The worker never sees an expected value and never judges. Protocol, one JSON line each way:
request ``{id, source, func, args: [encoded args], limits}``; answer ``{id, tests: [[status, detail,
payload]], output, output_bytes, seconds}``, where status is ``value`` (payload: the encoded
result), ``error``, ``oom``, ``bad_result``, ``crash`` or ``timeout``. The caller decodes payloads and
compares them with the expected values in its own process.

Processes: the worker forks the program process P *before* it reads a request, so P never holds
a request id. P receives the source, applies the limits (own session, rlimits, no capabilities
when the worker is root, Landlock when configured) and then receives one test's arguments at a
time, each as an exact-length frame, and forks one fresh test process T per test. T defines the
candidate, calls it and writes ``[status, detail, payload]`` to its own pipe. The worker is not
dumpable, kills the whole program tree at the deadline or over the memory cap, and reaps it.
"""

import ctypes
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time

PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 4, 24, 36, 38
DETAIL_CHARS = 160
RESULT_BYTES = 1 << 16
MEMORY_POLL_S = 0.01
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long


# ---- plain data: the only values that cross a process boundary ------------------------------------


def encode(value, depth=0):
    """JSON-able form of plain data (None, bool, int, float, str, bytes, list, tuple, dict, set); else TypeError.

    Exact types only (a subclass is not plain data). Ints and floats travel as hex, so 10**400, inf
    and nan round-trip exactly; tuples, dicts, sets and bytes are tagged ``{"t"|"d"|"s"|"b": ...}``.
    """
    kind = type(value)
    if depth > 100:
        raise TypeError("nested deeper than 100 levels")
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return {"i": hex(value)}
    if kind is float:
        return {"f": value.hex()}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [encode(v, depth + 1) for v in value]}
    if kind is set:
        return {"s": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"a {kind.__name__} is not plain data")


def decode(data):
    """The value of :func:`encode`'s output; ValueError for anything it could not have produced."""
    if data is None or type(data) in (bool, str):
        return data
    if type(data) is list:
        return [decode(v) for v in data]
    if type(data) is not dict or len(data) != 1:
        raise ValueError("malformed plain data")
    (tag, body), = data.items()
    try:
        if tag in "ifb" and type(body) is str:
            return {"i": lambda s: int(s, 16), "f": float.fromhex, "b": bytes.fromhex}[tag](body)
        if tag in "tsd" and type(body) is list:
            if tag == "t":
                return tuple(decode(v) for v in body)
            if tag == "s":
                return {decode(v) for v in body}
            return {decode(k): decode(v) for k, v in body}
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"malformed plain data: {err}") from None
    raise ValueError("malformed plain data")


# ---- Landlock -------------------------------------------------------------------------------------


def _syscall(number, *args):
    result = LIBC.syscall(ctypes.c_long(number), *(ctypes.c_long(a) if type(a) is int else a for a in args))
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def landlock_abi():
    """The kernel's Landlock ABI version (0 when Landlock is absent or disabled)."""
    try:
        return _syscall(444, None, 0, 1)
    except OSError:
        return 0


def landlock_ruleset(abi, read_paths, write_path):
    """A ruleset fd: read and execute under ``read_paths``, everything under ``write_path``; no TCP (ABI >= 4);
    signals and abstract unix sockets scoped to the sandbox (ABI >= 6)."""
    fs_all = (1 << (13 + (abi >= 2) + (abi >= 3) + (abi >= 5))) - 1
    file_rights = 1 | 2 | 4 | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
    attr = struct.pack("=QQQ", fs_all, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _syscall(444, ctypes.c_char_p(attr[:size]), size, 0)
    for path, rights in [(p, 1 | 4 | 8) for p in read_paths] + [(write_path, fs_all)]:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        if not os.path.isdir(path):
            rights &= file_rights
        _syscall(445, ruleset, 1, ctypes.c_char_p(struct.pack("=Qi", rights, fd)), 0)
        os.close(fd)
    return ruleset


# ---- the test process T ---------------------------------------------------------------------------


def _call(code, func, args):
    """Define the candidate in a fresh namespace and call it -> (status, detail, value)."""
    try:
        namespace = {"__name__": "candidate"}
        exec(code, namespace)
        if func not in namespace:
            return "error", f"NameError: the program defines no function {func}", None
        return "value", "", namespace[func](*args)
    except MemoryError:
        return "oom", "MemoryError", None
    except SystemExit as err:
        return "error", f"SystemExit: {err.code!r}", None
    except BaseException as err:  # noqa: B036 - a candidate may raise anything
        return "error", f"{type(err).__name__}: {err}"[:DETAIL_CHARS], None


def _test_process(code, func, args_text, result_fd):
    """Body of T: run one test and write ``[status, detail, payload]``; exit without cleanup."""
    try:
        os.closerange(3, result_fd)
        os.closerange(result_fd + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        status, detail, value = _call(code, func, decode(json.loads(args_text)))
        payload = None
        if status == "value":
            try:
                payload = encode(value)
            except (TypeError, RecursionError, ValueError) as err:
                status, detail = "bad_result", f"not plain data: {err}"[:DETAIL_CHARS]
        data = json.dumps([status, detail.encode("ascii", "backslashreplace").decode(), payload]).encode()
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
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return "timeout", f"killed by {signal.Signals(sig).name} (CPU limit)"
        return "crash", f"killed by {signal.Signals(sig).name}"
    return "crash", f"exited with status {os.WEXITSTATUS(wait_status)} before reporting"


def _read_result(pid, fd):
    """T's report and wait status: read until T has exited (a descendant may hold the pipe open) or the report
    exceeds RESULT_BYTES (then T is killed)."""
    data, poller = bytearray(), select.poll()
    poller.register(fd, select.POLLIN)
    os.set_blocking(fd, False)
    while True:
        exited, wait_status = os.waitpid(pid, os.WNOHANG)
        if exited or len(data) > RESULT_BYTES:
            break
        poller.poll(5)
        try:
            while (chunk := os.read(fd, 1 << 16)) and len(data) <= RESULT_BYTES:
                data += chunk
        except BlockingIOError:
            pass
    if not exited:
        os.kill(pid, signal.SIGKILL)
        _, wait_status = os.waitpid(pid, 0)
    try:
        data += os.read(fd, RESULT_BYTES + 1)
    except BlockingIOError:
        pass
    return bytes(data), wait_status


def _run_test(code, func, args_text):
    """Fork T for one test, wait for it, and return its [status, detail, payload]."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _test_process(code, func, args_text, write_fd)
    os.close(write_fd)
    data, wait_status = _read_result(pid, read_fd)
    os.close(read_fd)
    if not data:
        return [*_status_of_exit(wait_status), None]
    if len(data) > RESULT_BYTES:
        return ["bad_result", f"the result is larger than {RESULT_BYTES} bytes", None]
    try:
        status, detail, payload = json.loads(data)
        if status in ("value", "error", "oom", "bad_result") and type(detail) is str:
            return [status, detail[:DETAIL_CHARS], payload]
    except (ValueError, TypeError, RecursionError):
        pass
    return ["bad_result", "malformed result", None]


# ---- the program process P ------------------------------------------------------------------------


def _read_exact(fd, n):
    data = bytearray()
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def _read_frame(fd):
    """One length-prefixed frame, read exactly (nothing after it is read)."""
    return _read_exact(fd, struct.unpack(">I", _read_exact(fd, 4))[0])


def _write_frame(fd, data):
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _count_tasks(uid):
    """Threads owned by ``uid`` (RLIMIT_NPROC counts them all)."""
    total = 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid:
                total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return total


def _drop_capabilities():
    """Root without capabilities, for good: empty bounding set, no new privileges, empty capability sets."""
    for cap in range(64):
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    header = struct.pack("=Ii", 0x20080522, 0)
    if LIBC.syscall(ctypes.c_long(126), ctypes.c_char_p(header), ctypes.c_char_p(bytes(24))) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _confine(limits, ruleset):
    """Limits of P and everything it starts: rlimits, no capabilities for root, Landlock when configured."""
    rlimits = {"CORE": 0, "CPU": limits["cpu"], "AS": limits["memory"], "FSIZE": limits["files"],
               "NOFILE": limits["open_files"]}
    if os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC; the worker's tree watch counts processes instead
        rlimits["NPROC"] = _count_tasks(os.getuid()) + limits["processes"]
    for name, value in rlimits.items():
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value + 1 if name == "CPU" else value))
    LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() == 0:
        _drop_capabilities()
    if ruleset is not None:
        _syscall(446, ruleset, 0)
        os.close(ruleset)


def _program_process(cmd_fd, report_fd, out_fd, config):
    """Body of P: wait for the program, confine itself, then run the tests it is sent one by one."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(devnull)
        keep = sorted({2, cmd_fd, report_fd, 1 << 16} | ({config["ruleset"]} - {None}))
        for low, high in zip(keep, keep[1:]):
            os.closerange(low + 1, high)
        header = json.loads(_read_frame(cmd_fd))
        os.chdir(header["folder"])
        _confine(header["limits"], config["ruleset"])
        try:
            code = compile(header["source"], "<candidate>", "exec")
        except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
            code, failure = None, f"{type(err).__name__}: {err}"[:DETAIL_CHARS]
        for index in range(header["tests"]):
            args_text = _read_frame(cmd_fd)
            test = ["error", failure, None] if code is None else _run_test(code, header["func"], args_text)
            del args_text
            os.write(report_fd, (json.dumps([index, *test]) + "\n").encode())
    finally:
        os._exit(0)


# ---- the worker -----------------------------------------------------------------------------------


def _descendants(pid):
    """``pid`` and every live descendant, from /proc."""
    found, frontier = [], [pid]
    while frontier:
        found += frontier
        children = []
        for parent in frontier:
            try:
                for task in os.listdir(f"/proc/{parent}/task"):
                    with open(f"/proc/{parent}/task/{task}/children") as f:
                        children += [int(p) for p in f.read().split()]
            except OSError:
                continue
        frontier = children
    return found


def _folder_bytes(folder, most=10_000):
    """Bytes on disk under ``folder``; inf beyond ``most`` entries."""
    total, seen = 0, 0
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            seen += 1
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
        if seen > most:
            return float("inf")
    return total


def _over_limits(leader, limits, folder):
    """Why the program is over a limit on its whole process tree or folder (memory, processes, disk), else None."""
    pids, total = _descendants(leader), 0
    if len(pids) > limits["processes"]:
        return "processes"
    if _folder_bytes(folder) > limits["files"]:
        return "disk"
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * resource.getpagesize()
        except (OSError, IndexError, ValueError):
            continue
    return "oom" if total > limits["memory"] else None


def _kill_tree(leader):
    """Kill the program's process group, reap its leader, then kill and reap every other descendant."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    os.waitpid(leader, 0)
    for _ in range(100):
        orphans = _descendants(os.getpid())[1:]
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


class Program:
    """A pre-forked P waiting for its program, with the worker's ends of its three pipes."""

    def __init__(self, config):
        cmd_r, self.cmd = os.pipe()
        self.report, report_w = os.pipe()
        self.out, out_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            for fd in (self.cmd, self.report, self.out, *config["protocol_fds"]):
                os.close(fd)
            _program_process(cmd_r, report_w, out_w, config)
        for fd in (cmd_r, report_w, out_w):
            os.close(fd)

    def run(self, req, folder):
        """Send the program and its tests, collect output and reports -> (tests, output, total bytes, stop)."""
        limits, start = req["limits"], time.monotonic()
        header = {"source": req["source"], "func": req["func"], "tests": len(req["args"]), "limits": limits,
                  "folder": folder}
        captured, total, reports, found, stop = bytearray(), 0, bytearray(), [], None
        try:
            _write_frame(self.cmd, json.dumps(header).encode())
            if req["args"]:
                _write_frame(self.cmd, req["args"][0].encode())
        except BrokenPipeError:
            stop = "crash"
        poller = select.poll()
        poller.register(self.out, select.POLLIN)
        poller.register(self.report, select.POLLIN)
        deadline, next_poll = start + limits["timeout"], start + MEMORY_POLL_S
        while stop is None and len(found) < len(req["args"]):
            now = time.monotonic()
            if now > deadline:
                stop = "timeout"
            elif now > next_poll:
                next_poll = now + MEMORY_POLL_S
                stop = _over_limits(self.pid, limits, folder)
            for fd, _ in poller.poll(max(0.0, min(deadline, next_poll) - now) * 1000) if stop is None else ():
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    poller.unregister(fd)
                    stop = "crash" if fd == self.report else stop
                elif fd == self.out:
                    total += len(chunk)
                    captured += chunk[: max(0, limits["output"] - len(captured))]
                else:
                    reports += chunk
                    *lines, reports = reports.split(b"\n")
                    found += [json.loads(line)[1:] for line in lines]
                    if len(found) < len(req["args"]) and lines:
                        try:
                            _write_frame(self.cmd, req["args"][len(found)].encode())
                        except BrokenPipeError:
                            stop = "crash"
        _kill_tree(self.pid)
        os.set_blocking(self.out, False)
        try:
            while chunk := os.read(self.out, 1 << 16):
                total += len(chunk)
                captured += chunk[: max(0, limits["output"] - len(captured))]
        except BlockingIOError:
            pass
        for fd in (self.cmd, self.report, self.out):
            os.close(fd)
        return found, bytes(captured), total, stop


MISSING = {"timeout": ["timeout", "wall-clock limit"], "crash": ["crash", "no report"],
           "oom": ["oom", "the program's processes together exceeded the memory limit"],
           "processes": ["crash", "the program exceeded its limit on processes"],
           "disk": ["crash", "the program wrote more than its limit on files to disk"]}


def run_program(program, req, base):
    """Run one request on a pre-forked P in a fresh folder under ``base``; the answer dict of the protocol."""
    start = time.monotonic()
    folder = tempfile.mkdtemp(prefix="program-", dir=base)
    try:
        tests, output, total, stop = program.run(req, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    missing = [*MISSING[stop or "crash"], None]
    tests = tests + [missing] * (len(req["args"]) - len(tests))
    return {"id": req["id"], "tests": tests, "output": output.decode(errors="replace"), "output_bytes": total,
            "seconds": time.monotonic() - start}


def main():
    """Serve requests from stdin until it closes."""
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    setup = json.loads(sys.argv[1])
    ruleset = landlock_ruleset(setup["landlock"], setup["read"], setup["base"]) if setup["landlock"] else None
    requests = os.fdopen(os.dup(0), "rb")
    answer_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    config = {"ruleset": ruleset, "protocol_fds": [requests.fileno(), answer_fd, devnull]}
    program = Program(config)
    while line := requests.readline():
        answer = run_program(program, json.loads(line), setup["base"])
        program = Program(config)  # the next one, before the answer: its memory holds no id still in use
        data = (json.dumps(answer) + "\n").encode()
        while data:
            data = data[os.write(answer_fd, data):]
    os.kill(program.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
