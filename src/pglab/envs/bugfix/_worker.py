"""Sandbox worker (standard library only; started as ``python -I -S -c SOURCE CONFIG``): runs candidate programs.

The worker never sees an expected value and never judges. Protocol, one JSON line each way:
request ``{id, source, func, frames: [encoded args lists], limits}``; answer ``{id, tests: [[status, detail,
payload]], output, output_bytes, seconds, cpu_seconds}``, where status is ``value`` (payload: the encoded result),
``error``, ``oom``, ``bad_result``, ``crash`` or ``timeout``. A frame is a batch of tests that share one test
process (one case per frame for the fixed cases; generated cases in batches). The caller decodes payloads and
compares them with the expected values in its own process.

Processes: the worker forks the program process P *before* it reads a request, so P never holds a request id.
P joins the program's cgroups (where the machine has them) and, where it may, unshares PID, mount, IPC and cgroup
namespaces and forks I, the first process of the new PID namespace: killing P kills I (parent-death signal), and
the kernel then kills everything in the namespace. I mounts a size-capped tmpfs on /tmp (the program's folder) and
/dev/shm and a fresh /proc, hides the cgroup files, applies the limits (rlimits, a seccomp filter against kernel
keyrings, no capabilities when root, Landlock when configured), receives one frame of arguments at a time and forks
one fresh test process T per frame. T defines the candidate, calls it and writes its results to its own pipe. I
checks the size and nesting of what T wrote. The worker is not dumpable, has its own session keyring, measures the
program's CPU time, memory, processes and disk (from the cgroups when there are some), stops it over a limit or at
the wall-clock backstop, kills it as a whole, and empties its base folder after every program.
"""

import ctypes
import json
import os
import platform
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 22, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWPID = 0x20000, 0x2000000, 0x8000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 0x4000, 0x40000
DETAIL_CHARS = 160
RESULT_BYTES = 1 << 20
"""The most bytes one result may take as tagged JSON (``json.dumps(encode(value))``); Task refuses larger expected."""
ANSWER_BYTES = 1 << 25
"""The most bytes of results one program may return in total; beyond it the rest are ``bad_result``."""
MAX_DEPTH = 100
"""The deepest nesting of plain data (containers in containers); deeper results are ``bad_result``."""
POLL_S = 0.01
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
# (AUDIT_ARCH, add_key, request_key, keyctl, memfd_create) of the architectures the seccomp filter knows
SECCOMP_ARCH = {"x86_64": (0xC000003E, 248, 249, 250, 319), "aarch64": (0xC00000B7, 217, 218, 219, 279)}
KEYCTL_JOIN_SESSION_KEYRING = 1


# ---- plain data: the only values that cross a process boundary ------------------------------------


def encode(value, depth=0):
    """JSON-able form of plain data (None, bool, int, float, str, bytes, list, tuple, dict, set); else TypeError.

    Exact types only (a subclass is not plain data). Ints and floats travel as hex, so 10**400, inf
    and nan round-trip exactly; tuples, dicts, sets and bytes are tagged ``{"t"|"d"|"s"|"b": ...}``.
    """
    kind = type(value)
    if depth > MAX_DEPTH:
        raise TypeError(f"nested deeper than {MAX_DEPTH} levels")
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


def json_depth(data, most):
    """Nesting depth of parsed JSON, counted without recursion; stops counting beyond ``most``."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if type(item) in (list, dict):
            deepest = max(deepest, depth)
            if deepest > most:
                return deepest
            stack += [(v, depth + 1) for v in (item.values() if type(item) is dict else item)]
    return deepest


def decode(data):
    """The value of :func:`encode`'s output; ValueError for anything it could not have produced."""
    if json_depth(data, 2 * MAX_DEPTH + 4) > 2 * MAX_DEPTH + 4:
        raise ValueError("malformed plain data: nested too deep")
    return _decode(data)


def _decode(data):
    if data is None or type(data) in (bool, str):
        return data
    if type(data) is list:
        return [_decode(v) for v in data]
    if type(data) is not dict or len(data) != 1:
        raise ValueError("malformed plain data")
    (tag, body), = data.items()
    try:
        if tag in "ifb" and type(body) is str:
            return {"i": lambda s: int(s, 16), "f": float.fromhex, "b": bytes.fromhex}[tag](body)
        if tag in "tsd" and type(body) is list:
            if tag == "t":
                return tuple(_decode(v) for v in body)
            if tag == "s":
                return {_decode(v) for v in body}
            return {_decode(k): _decode(v) for k, v in body}
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"malformed plain data: {err}") from None
    raise ValueError("malformed plain data")


def result_bytes(value):
    """Bytes ``value`` takes as a result (its tagged JSON); TypeError if it is not plain data."""
    return len(json.dumps(encode(value)))


# ---- kernel interfaces: Landlock, seccomp, namespaces, keyrings -------------------------------------


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


def seccomp_filter(deny_memfd):
    """Install a seccomp filter: the keyring calls (add_key, request_key, keyctl), and memfd_create when
    ``deny_memfd``, fail with EPERM; every call of another architecture (or x32) fails too. False if unknown arch."""
    arch = SECCOMP_ARCH.get(platform.machine())
    if arch is None:
        return False
    audit, *calls = arch
    calls = calls if deny_memfd else calls[:3]
    allow, deny = 0x7FFF0000, 0x00050000 | 1
    code = [(0x20, 0, 0, 4), (0x15, 1, 0, audit), (0x06, 0, 0, deny), (0x20, 0, 0, 0)]  # arch, then nr
    code.append((0x35, len(calls) + 1, 0, 0x40000000))  # x32 numbers -> deny
    code += [(0x15, len(calls) - k, 0, nr) for k, nr in enumerate(calls)]
    code += [(0x06, 0, 0, allow), (0x06, 0, 0, deny)]
    program = b"".join(struct.pack("=HBBI", *op) for op in code)
    buffer = ctypes.create_string_buffer(program)
    fprog = struct.pack("@HP", len(code), ctypes.addressof(buffer))
    if LIBC.prctl(PR_SET_SECCOMP, 2, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp failed")
    return True


def join_fresh_session_keyring():
    """``keyctl join``: this process and its children get a new, empty, anonymous session keyring."""
    arch = SECCOMP_ARCH.get(platform.machine())
    try:
        return arch is not None and _syscall(arch[3], KEYCTL_JOIN_SESSION_KEYRING, None) > 0
    except OSError:
        return False


def _unshare(flags):
    if LIBC.unshare(ctypes.c_int(flags)) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _mount(source, target, fstype, flags, data):
    def enc(text):
        return None if text is None else text.encode()

    if LIBC.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")


NAMESPACES = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWCGROUP


def probe():
    """What this process may do for its programs: {"namespaces": bool, "seccomp": bool, "keyring": bool}."""
    found = {}
    pid = os.fork()
    if pid == 0:
        try:
            _unshare(NAMESPACES)
            _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
            _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
            os._exit(0 if seccomp_filter(True) else 1)
        except BaseException:  # noqa: B036 - any failure means: not available
            os._exit(2)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    found["namespaces"], found["seccomp"] = status in (0, 1), status == 0
    found["keyring"] = join_fresh_session_keyring()
    return found


# ---- cgroups: one group per program, under a group per worker ---------------------------------------


def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def cgroup_parents():
    """Where this process may make cgroups: {"v2": dir} and v1 {"memory"|"pids"|"cpuacct": dir}, from
    /proc/self/mountinfo and /proc/self/cgroup; each dir is this process's own cgroup in that hierarchy."""
    own = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else ["v2"]:
            own[name] = path
    found = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        head, _, tail = line.partition(" - ")
        fields, (fstype, _, options) = head.split(), tail.split()[:3]
        root, point = fields[3], fields[4]
        names = ["v2"] if fstype == "cgroup2" else [n for n in options.split(",") if n in ("memory", "pids", "cpuacct")]
        for name in names if fstype in ("cgroup", "cgroup2") else ():
            path = own.get(name)
            if path is None or not (path + "/").startswith(root.rstrip("/") + "/"):
                continue
            where = os.path.join(point, path[len(root.rstrip("/")):].lstrip("/"))
            if name not in found and os.access(where, os.W_OK):
                found[name] = where.rstrip("/")
    return found


def make_worker_group(name):
    """Make a worker's cgroups: {kind: dir} for kinds v2 (kill, CPU, and memory/pids if its parent enables them for
    children), then v1 memory, pids and cpuacct for what v2 lacks. Empty when the machine allows none."""
    parents, dirs = cgroup_parents(), {}
    for parent in parents.values():  # groups of callers that died without removing theirs
        for entry in os.listdir(parent):
            owner = entry.split("-")[1] if entry.startswith("pglab-") else ""
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                remove_group({"stale": os.path.join(parent, entry)}, 1.0)
    v2 = set()
    if "v2" in parents:
        try:
            os.mkdir(os.path.join(parents["v2"], name))
            dirs["v2"] = os.path.join(parents["v2"], name)
            v2 = set(_read(os.path.join(dirs["v2"], "cgroup.controllers")).split()) & {"memory", "pids", "cpu"}
            if v2:
                _write(os.path.join(dirs["v2"], "cgroup.subtree_control"), " ".join("+" + c for c in sorted(v2)))
        except OSError:
            v2 = set()
    for kind in ("memory", "pids") + (() if "v2" in dirs else ("cpuacct",)):
        if kind in parents and kind not in v2:
            try:
                os.mkdir(os.path.join(parents[kind], name))
                dirs[kind] = os.path.join(parents[kind], name)
            except OSError:
                pass
    return dirs


def group_kinds(dirs):
    """What a worker group counts and kills: {"memory": kind, "pids": kind, "cpu": kind, "kill": kind}."""
    v2 = dirs.get("v2")
    v2_has = set(_read(os.path.join(v2, "cgroup.subtree_control")).split()) if v2 else set()
    def pick(controller):
        return "cgroup v2" if controller in v2_has else "cgroup v1" if controller in dirs else None

    return {"memory": pick("memory"), "pids": pick("pids"),
            "cpu": "cgroup v2" if v2 else "cgroup v1" if "cpuacct" in dirs else None,
            "kill": "cgroup v2 (cgroup.kill)" if v2 else None}


def _pids_of(path):
    try:
        return [int(p) for p in _read(os.path.join(path, "cgroup.procs")).split()]
    except OSError:
        return []


def remove_group(dirs, deadline_s=5.0):
    """Kill everything in a group (and its children) and remove it; True when every directory is gone."""
    end = time.monotonic() + deadline_s
    for path in dirs.values():
        while os.path.isdir(path):
            children = [os.path.join(path, d) for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))]
            for child in children:
                remove_group({"c": child}, max(0.0, end - time.monotonic()))
            try:
                if os.path.exists(os.path.join(path, "cgroup.kill")):
                    _write(os.path.join(path, "cgroup.kill"), "1")
                for pid in _pids_of(path):
                    os.kill(pid, signal.SIGKILL)
                os.rmdir(path)
            except (OSError, ValueError):
                if time.monotonic() > end:
                    return False
                time.sleep(0.001)
    return True


class Group:
    """One program's cgroups under its worker's group: limits, membership, measurement and kill."""

    def __init__(self, dirs, name):
        self.paths = {}
        for kind, parent in dirs.items():
            path = os.path.join(parent, name)
            os.mkdir(path)
            self.paths[kind] = path
        self.kinds = group_kinds(dirs)

    def _file(self, kind, name):
        return os.path.join(self.paths[kind], name)

    def set_limits(self, limits):
        """memory.max (memory.limit_in_bytes in v1; no swap) and pids.max (the program's processes, plus P and I)."""
        memory, pids = str(limits["memory"]), str(limits["processes"] + 2)
        files = {"cgroup v2": [("v2", "memory.max", memory), ("v2", "memory.swap.max", "0"),
                               ("v2", "memory.oom.group", "1")],
                 "cgroup v1": [("memory", "memory.limit_in_bytes", memory),
                               ("memory", "memory.memsw.limit_in_bytes", memory)]}.get(self.kinds["memory"], [])
        files += {"cgroup v2": [("v2", "pids.max", pids)], "cgroup v1": [("pids", "pids.max", pids)]}.get(
            self.kinds["pids"], [])
        for kind, name, value in files:
            try:
                _write(self._file(kind, name), value)
            except OSError:
                if not name.startswith(("memory.swap", "memory.memsw", "memory.oom")):
                    raise

    def join(self):
        """Move the calling process into every hierarchy of the group."""
        for path in self.paths.values():
            _write(os.path.join(path, "cgroup.procs"), "0")

    def measure(self):
        """(CPU seconds, memory bytes, processes, OOM kills) of the program; None where no cgroup counts it."""
        cpu = memory = pids = None
        ooms = 0
        if self.kinds["cpu"] == "cgroup v2":
            cpu = int(_read(self._file("v2", "cpu.stat")).split("usage_usec", 1)[1].split()[0]) / 1e6
        elif self.kinds["cpu"] == "cgroup v1":
            cpu = int(_read(self._file("cpuacct", "cpuacct.usage"))) / 1e9
        if self.kinds["memory"] == "cgroup v2":
            memory = int(_read(self._file("v2", "memory.current")))
            ooms = int(_read(self._file("v2", "memory.events")).split("oom_kill", 1)[1].split()[0])
        elif self.kinds["memory"] == "cgroup v1":
            memory = int(_read(self._file("memory", "memory.usage_in_bytes")))
            ooms = int(_read(self._file("memory", "memory.oom_control")).split("oom_kill ", 1)[1].split()[0])
        if self.kinds["pids"]:
            pids = int(_read(self._file("v2" if self.kinds["pids"] == "cgroup v2" else "pids", "pids.current")))
        return cpu, memory, pids, ooms

    def remove(self):
        return remove_group(self.paths)


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


def _test_process(code, func, frame, result_fd):
    """Body of T: define the candidate once, run every test of the frame, write their results; exit."""
    try:
        os.closerange(3, result_fd)
        os.closerange(result_fd + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
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


def _run_frame(code, func, frame):
    """Fork T for one frame of tests, wait for it, and return one [status, detail, payload] per test."""
    n = len(json.loads(frame))
    most = n * (RESULT_BYTES + 2 * DETAIL_CHARS + 64) + 64
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _test_process(code, func, frame, write_fd)
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


# ---- the program process P and the first process I of its namespace ---------------------------------


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


def _private_mounts(limits, hide):
    """In I's own mount namespace: a fresh /proc, size-capped tmpfs on /tmp and /dev/shm, the cgroup files hidden;
    SysV IPC of the new IPC namespace bounded. The program's folder: /tmp/program."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    size = f"size={max(4096, limits['files'])},mode=1777"
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, size)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, size)
    for path in hide:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=555")
    _read_only_elsewhere(("/tmp", "/dev/shm", "/proc"))
    pages = max(1, limits["files"] // resource.getpagesize())
    for name, value in (("shmall", pages), ("shmmax", limits["files"]), ("shmmni", 16), ("msgmni", 16)):
        try:
            _write(f"/proc/sys/kernel/{name}", str(value))
        except OSError:
            pass
    os.mkdir("/tmp/program")
    return "/tmp/program"


MS_REMOUNT, MS_BIND, MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 32, 4096, 1024, 2048, 1 << 21
MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
               "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}


def _read_only_elsewhere(writable):
    """Remount every mount of this mount namespace read-only, except ``writable`` and what lies below them: the
    program writes only to its own tmpfs (the host's files, and bwrap's root shared by a worker's programs, stay
    as they are)."""
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4:6] for line in f]
    for point, options in mounts:
        point = point.encode().decode("unicode_escape")
        if any(point == w or point.startswith(w + "/") for w in writable) or "ro" in options.split(","):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in options.split(","):
            flags |= MOUNT_FLAGS.get(option, 0)
        try:
            _mount(None, point, None, flags, None)
        except OSError:
            pass


def _confine(limits, config, folder):
    """Limits of I and everything it starts: rlimits, seccomp, no capabilities for root, Landlock if configured."""
    rlimits = {"CORE": 0, "CPU": limits["cpu"], "AS": limits["memory"], "FSIZE": limits["files"],
               "NOFILE": limits["open_files"], "MSGQUEUE": 0}
    if os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC; cgroups or the worker's tree watch count processes
        rlimits["NPROC"] = _count_tasks(os.getuid()) + limits["processes"]
    for name, value in rlimits.items():
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value + 1 if name == "CPU" else value))
    ruleset = landlock_ruleset(config["landlock"], config["read"], folder) if config["landlock"] else None
    LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if config["seccomp"]:
        seccomp_filter(deny_memfd=not config["memory_group"])
    if os.geteuid() == 0:
        _drop_capabilities()
    if ruleset is not None:
        _syscall(446, ruleset, 0)
        os.close(ruleset)


def _program_process(cmd_fd, report_fd, out_fd, config, folder):
    """Body of I (or of P without namespaces): wait for the program, confine itself, run its frames one by one."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(devnull)
        keep = sorted({2, cmd_fd, report_fd, 1 << 16})
        for low, high in zip(keep, keep[1:]):
            os.closerange(low + 1, high)
        header = json.loads(_read_frame(cmd_fd))
        if config["namespaces"]:
            folder = _private_mounts(header["limits"], config["hide"])
        os.chdir(folder)
        _confine(header["limits"], config, folder)
        try:
            code = compile(header["source"], "<candidate>", "exec")
        except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
            code, failure = None, f"{type(err).__name__}: {err}"[:DETAIL_CHARS]
        for index in range(header["frames"]):
            frame = _read_frame(cmd_fd)
            n = len(json.loads(frame))
            tests = [["error", failure, None]] * n if code is None else _run_frame(code, header["func"], frame)
            del frame
            os.write(report_fd, (json.dumps([index, tests]) + "\n").encode())
    finally:
        os._exit(0)


def _namespace_parent(cmd_r, report_w, out_w, config, folder):
    """Body of P: join the program's cgroups, unshare namespaces, fork I (pid 1 there) and wait for it. P dies with
    the worker, and I with P, so that a worker killed by its caller takes its program with it."""
    try:
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != config["worker"]:
            os._exit(0)
        if config["group"] is not None:
            config["group"].join()
        if not config["namespaces"]:
            _program_process(cmd_r, report_w, out_w, config, folder)
        _unshare(NAMESPACES)
        pid = os.fork()
        if pid == 0:  # should P die before this line, the worker's sweep of its descendants kills I
            LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            _program_process(cmd_r, report_w, out_w, config, folder)
        for fd in (cmd_r, report_w, out_w):
            os.close(fd)
        os.waitpid(pid, 0)
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


def _sampled(pids):
    """(CPU seconds including reaped children, resident bytes) of processes, from /proc."""
    cpu, memory = 0, 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                cpu += sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:15])
            with open(f"/proc/{pid}/statm") as f:
                memory += int(f.read().split()[1]) * resource.getpagesize()
        except (OSError, IndexError, ValueError):
            continue
    return cpu / os.sysconf("SC_CLK_TCK"), memory


def _kill_tree(leader, group):
    """Kill the program as a whole (cgroup.kill, or its namespace through P), reap P, then every descendant."""
    if group is not None and group.kinds["kill"]:
        try:
            _write(group._file("v2", "cgroup.kill"), "1")
        except OSError:
            pass
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(leader, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(leader, 0)
    for _ in range(1000):
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
    """A pre-forked P waiting for its program, in its own cgroups, with the worker's ends of its three pipes."""

    count = 0

    def __init__(self, config):
        Program.count += 1
        self.group = Group(config["groups"], f"p{Program.count}") if config["groups"] else None
        self.folder = None if config["namespaces"] else tempfile.mkdtemp(prefix="program-", dir=config["base"])
        cmd_r, self.cmd = os.pipe()
        self.report, report_w = os.pipe()
        self.out, out_w = os.pipe()
        worker = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:
            for fd in (self.cmd, self.report, self.out, *config["protocol_fds"]):
                os.close(fd)
            _namespace_parent(cmd_r, report_w, out_w, {**config, "group": self.group, "worker": worker}, self.folder)
        for fd in (cmd_r, report_w, out_w):
            os.close(fd)

    def _over(self, limits, config, start):
        """Why the program must stop now: CPU time, memory, processes, disk, the wall-clock backstop; else None."""
        cpu, memory, pids, ooms = self.group.measure() if self.group else (None, None, None, 0)
        if ooms:
            return "oom"
        tree = None
        if cpu is None or memory is None or pids is None:
            tree = _descendants(self.pid)
            sampled_cpu, sampled_memory = _sampled(tree)
            cpu = sampled_cpu if cpu is None else cpu
            memory = sampled_memory if memory is None else memory
            pids = len(tree) if pids is None else pids
        self.cpu = cpu
        if cpu > limits["timeout"]:
            return "timeout"
        if time.monotonic() - start > limits["wall"]:
            return "wall"
        if pids > limits["processes"] + (2 if config["namespaces"] else 1):
            return "processes"
        if not config["namespaces"] and _folder_bytes(config["base"]) > limits["files"]:
            return "disk"
        return "oom" if memory > limits["memory"] else None

    def run(self, req, config):
        """Send the program and its frames, collect output and reports -> (tests, output, total bytes, stop)."""
        limits, start, self.cpu = req["limits"], time.monotonic(), 0.0
        frames = req["frames"]
        header = {"source": req["source"], "func": req["func"], "frames": len(frames), "limits": limits}
        captured, total, reports, found, stop, answer_bytes = bytearray(), 0, bytearray(), [], None, 0
        try:
            if self.group is not None:
                self.group.set_limits(limits)
            _write_frame(self.cmd, json.dumps(header).encode())
            if frames:
                _write_frame(self.cmd, frames[0].encode())
        except BrokenPipeError:
            stop = "crash"
        poller = select.poll()
        poller.register(self.out, select.POLLIN)
        poller.register(self.report, select.POLLIN)
        next_poll, done, sizes = start + POLL_S, 0, [len(json.loads(frame)) for frame in frames]
        while stop is None and done < len(frames):
            now = time.monotonic()
            if now > next_poll:
                next_poll = now + POLL_S
                stop = self._over(limits, config, start)
            for fd, _ in poller.poll(max(0.0, next_poll - now) * 1000) if stop is None else ():
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
                    for line in lines:
                        answer_bytes += len(line)
                        found += _report_line(line, sizes[done], answer_bytes)
                        done += 1
                    if done < len(frames) and lines:
                        try:
                            _write_frame(self.cmd, frames[done].encode())
                        except BrokenPipeError:
                            stop = "crash"
        if self.group is not None:  # the final CPU time; a kill by the cgroup's OOM killer is an oom
            if self.group.measure()[3]:
                stop = "oom"
                found = [["oom", MISSING["oom"][1], None] if t[1].startswith("killed by SIGKILL") else t for t in found]
            self.cpu = self.group.measure()[0] if self.group.kinds["cpu"] else self.cpu
        _kill_tree(self.pid, self.group)
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


def _report_line(line, n, answer_bytes):
    """One frame's n tests from I's report line; ``bad_result`` once the program's results pass ANSWER_BYTES."""
    if answer_bytes > ANSWER_BYTES:
        return [["bad_result", f"the program's results are larger than {ANSWER_BYTES} bytes in total", None]] * n
    try:
        return checked(json.loads(line)[1], n, (*T_STATUSES, "crash", "timeout"), len(line) <= RESULT_BYTES)
    except (ValueError, TypeError, IndexError, RecursionError):
        return [["bad_result", "malformed result", None]] * n


MISSING = {"timeout": ["timeout", "CPU time limit"], "wall": ["timeout", "wall-clock backstop"],
           "crash": ["crash", "no report"],
           "oom": ["oom", "the program's processes together exceeded the memory limit"],
           "processes": ["crash", "the program exceeded its limit on processes"],
           "disk": ["crash", "the program wrote more than its limit on files to disk"]}


def _empty(base):
    """Remove everything in the worker's base folder."""
    for name in os.listdir(base):
        path = os.path.join(base, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def run_program(program, req, config):
    """Run one request on a pre-forked P; the answer dict of the protocol."""
    start = time.monotonic()
    try:
        tests, output, total, stop = program.run(req, config)
    finally:
        _empty(config["base"])
    n = sum(len(json.loads(frame)) for frame in req["frames"])
    tests = tests + [[*MISSING[stop or "crash"], None]] * (n - len(tests))
    return {"id": req["id"], "tests": tests, "output": output.decode(errors="replace"), "output_bytes": total,
            "seconds": time.monotonic() - start, "cpu_seconds": program.cpu}


def main():
    """Serve requests from stdin until it closes (or, with ``{"probe": true}``, print what this machine allows)."""
    setup = json.loads(sys.argv[1])
    if setup.get("probe"):
        print(json.dumps(probe()))
        return
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    join_fresh_session_keyring()
    requests = os.fdopen(os.dup(0), "rb")
    answer_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    config = {**setup, "protocol_fds": [requests.fileno(), answer_fd, devnull],
              "memory_group": bool(setup["groups"]) and group_kinds(setup["groups"])["memory"] is not None}
    program = Program(config)
    while line := requests.readline():
        answer = run_program(program, json.loads(line), config)
        finished, program = program, Program(config)  # the next one, before the answer: it holds no id in use
        data = (json.dumps(answer) + "\n").encode()
        while data:
            data = data[os.write(answer_fd, data):]
        if finished.group is not None:  # emptied by the kill; removed off the caller's critical path
            finished.group.remove()
    os.kill(program.pid, signal.SIGKILL)
    _kill_tree(program.pid, program.group)
    if program.group is not None:
        program.group.remove()


if __name__ == "__main__":
    sys.exit(main())
