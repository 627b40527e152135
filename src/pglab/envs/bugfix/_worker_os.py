"""The sandbox worker's foundations (standard library only): plain data, kernel interfaces, cgroups.

Part of the worker program (see :mod:`pglab.envs.bugfix._worker`): the caller imports it as a module,
and the sandbox receives the parts as one source, in order, with ``python -I -S -c``.
"""

import ctypes
import json
import os
import platform
import signal
import struct
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
CLONE_NEWUTS, CLONE_NEWUSER, CLONE_NEWNET = 0x4000000, 0x10000000, 0x40000000
CLONE_NEW_ANY = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
                 | CLONE_NEWNET)
AF_UNIX = 1
# Syscall numbers of the architectures the seccomp filter knows (x86_64 and the generic table of aarch64).
SYSCALLS = {
    "x86_64": {"audit": 0xC000003E, "mount": 165, "umount2": 166, "pivot_root": 155, "unshare": 272, "setns": 308,
               "ptrace": 101, "bpf": 321, "perf_event_open": 298, "kexec_load": 246, "kexec_file_load": 320,
               "init_module": 175, "finit_module": 313, "delete_module": 176, "keyctl": 250, "add_key": 248,
               "request_key": 249, "mknod": 133, "mknodat": 259, "open_tree": 428, "move_mount": 429, "fsopen": 430,
               "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "userfaultfd": 323,
               "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_by_handle_at": 304,
               "name_to_handle_at": 303, "process_vm_readv": 310, "process_vm_writev": 311, "swapon": 167,
               "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179, "syslog": 103, "chroot": 161,
               "pidfd_getfd": 438, "kcmp": 312, "lookup_dcookie": 212, "vhangup": 153, "iopl": 172, "ioperm": 173,
               "memfd_create": 319, "clone": 56, "clone3": 435, "socket": 41, "socketpair": 53, "shmget": 29,
               "msgget": 68, "semget": 64},
    "aarch64": {"audit": 0xC00000B7, "mount": 40, "umount2": 39, "pivot_root": 41, "unshare": 97, "setns": 268,
                "ptrace": 117, "bpf": 280, "perf_event_open": 241, "kexec_load": 104, "kexec_file_load": 294,
                "init_module": 105, "finit_module": 273, "delete_module": 106, "keyctl": 219, "add_key": 217,
                "request_key": 218, "mknodat": 33, "open_tree": 428, "move_mount": 429, "fsopen": 430,
                "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "userfaultfd": 282,
                "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_by_handle_at": 265,
                "name_to_handle_at": 264, "process_vm_readv": 270, "process_vm_writev": 271, "swapon": 224,
                "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60, "syslog": 116, "chroot": 51,
                "pidfd_getfd": 438, "kcmp": 272, "lookup_dcookie": 18, "vhangup": 58, "memfd_create": 279,
                "clone": 220, "clone3": 435, "socket": 198, "socketpair": 199, "shmget": 194, "msgget": 186,
                "semget": 190},
}
DENIED_CALLS = ("mount", "umount2", "pivot_root", "unshare", "setns", "chroot", "open_tree", "move_mount", "fsopen",
                "fsconfig", "fsmount", "fspick", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev",
                "pidfd_getfd", "kcmp", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
                "io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
                "keyctl", "add_key", "request_key", "mknod", "mknodat", "open_by_handle_at", "name_to_handle_at",
                "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "lookup_dcookie", "vhangup", "iopl",
                "ioperm", "shmget", "msgget", "semget")
"""Calls a program process may never make (EPERM): mounts and namespaces, tracing other processes, kernel modules
and kexec, keyrings, device nodes, io_uring (whose operations bypass this filter), SysV IPC objects (no module of
Python's standard library makes one; POSIX shared memory and semaphores in /dev/shm work), and the host's
administration."""
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


def landlock_ruleset(abi, read_paths, write_paths, device_paths=()):
    """A ruleset fd: read and execute under ``read_paths``; everything under ``write_paths``; read and write (no
    creation) of ``device_paths``; no TCP (ABI >= 4); signals and abstract unix sockets scoped to the sandbox (ABI
    >= 6). Paths that do not exist are skipped."""
    fs_all = (1 << (13 + (abi >= 2) + (abi >= 3) + (abi >= 5))) - 1
    file_rights = 1 | 2 | 4 | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
    attr = struct.pack("=QQQ", fs_all, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _syscall(444, ctypes.c_char_p(attr[:size]), size, 0)
    rules = [(p, 1 | 4 | 8) for p in read_paths] + [(p, fs_all) for p in write_paths] + [
        (p, 2 | 4 | (1 << 14 if abi >= 3 else 0)) for p in device_paths]
    for path, rights in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        if not os.path.isdir(path):
            rights &= file_rights
        _syscall(445, ruleset, 1, ctypes.c_char_p(struct.pack("=Qi", rights, fd)), 0)
        os.close(fd)
    return ruleset


def _bpf(code):
    """Classic BPF from ``(op, k, jump_true, jump_false)`` rows whose jumps are labels (None: the next row) or row
    indices; a label row is ``("label", name)``."""
    rows = [row for row in code if row[0] != "label"]
    where, index = {}, 0
    for row in code:
        if row[0] == "label":
            where[row[1]] = index
        else:
            index += 1
    out = []
    for i, (op, k, jt, jf) in enumerate(rows):
        def hop(label, i=i):
            return 0 if label is None else where[label] - i - 1
        out.append(struct.pack("=HBBI", op, hop(jt), hop(jf), k))
    return b"".join(out)


LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
SECCOMP_ALLOW, SECCOMP_ERRNO, EPERM, ENOSYS = 0x7FFF0000, 0x00050000, 1, 38


def seccomp_program(machine, deny_memfd):
    """The filter of :func:`seccomp_filter` as classic BPF for ``machine``; None for an unknown architecture."""
    calls = SYSCALLS.get(machine)
    if calls is None:
        return None
    denied = [calls[name] for name in DENIED_CALLS if name in calls] + [calls["memfd_create"]] * deny_memfd
    code = [(LD, 4, None, None), (JEQ, calls["audit"], None, "deny"), (LD, 0, None, None)]
    if machine == "x86_64":
        code.append((JGE, 0x40000000, "deny", None))  # the x32 ABI's numbers
    code += [(JEQ, nr, "deny", None) for nr in denied]
    code += [(JEQ, calls["clone3"], "nosys", None),  # its flags sit in memory; ENOSYS sends libc back to clone
             (JEQ, calls["clone"], "clone", None), (JEQ, calls["socket"], "socket", None),
             (JEQ, calls["socketpair"], "socket", None), (RET, SECCOMP_ALLOW, None, None),
             ("label", "clone"), (LD, 16, None, None), (JSET, CLONE_NEW_ANY, "deny", None),
             (RET, SECCOMP_ALLOW, None, None),
             ("label", "socket"), (LD, 16, None, None), (JEQ, AF_UNIX, None, "deny"), (RET, SECCOMP_ALLOW, None, None),
             ("label", "deny"), (RET, SECCOMP_ERRNO | EPERM, None, None),
             ("label", "nosys"), (RET, SECCOMP_ERRNO | ENOSYS, None, None)]
    return _bpf(code)


def seccomp_filter(deny_memfd):
    """Install the program's seccomp filter: every call in DENIED_CALLS (and memfd_create when ``deny_memfd``) fails
    with EPERM, and so do clone with a new-namespace flag, sockets of any family but AF_UNIX (no network, UDP
    included), and any call of another architecture or the x32 ABI; clone3 fails with ENOSYS. False if the
    architecture is unknown."""
    program = seccomp_program(platform.machine(), deny_memfd)
    if program is None:
        return False
    buffer = ctypes.create_string_buffer(program)
    fprog = struct.pack("@HP", len(program) // 8, ctypes.addressof(buffer))
    if LIBC.prctl(PR_SET_SECCOMP, 2, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp failed")
    return True


def join_fresh_session_keyring():
    """``keyctl join``: this process and its children get a new, empty, anonymous session keyring."""
    calls = SYSCALLS.get(platform.machine())
    try:
        return calls is not None and _syscall(calls["keyctl"], KEYCTL_JOIN_SESSION_KEYRING, None) > 0
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
            try:  # another process (the worker, or a caller's stale sweep) may remove the same folders meanwhile
                children = [os.path.join(path, d) for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))]
            except FileNotFoundError:
                break
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


