"""The sandbox worker's program process P, the first process I of its namespaces, and the confinement of each
test process T (standard library only).

Part of the worker program (see :mod:`pglab.envs.bugfix._worker`).
"""

import ctypes
import json
import os
import resource
import shutil
import signal
import struct

try:  # as a module; in the sandbox these names are defined by the parts before this one
    from pglab.envs.bugfix._worker_os import (  # noqa: I001
        CLONE_NEWUTS,
        DETAIL_CHARS,
        LIBC,
        MS_NODEV,
        MS_NOEXEC,
        MS_NOSUID,
        MS_PRIVATE,
        MS_RDONLY,
        MS_REC,
        NAMESPACES,
        PR_CAPBSET_DROP,
        PR_SET_NO_NEW_PRIVS,
        PR_SET_PDEATHSIG,
        SYSCALLS,
        _mount,
        _syscall,
        _unshare,
        _write,
        landlock_ruleset,
        seccomp_filter,
    )
    from pglab.envs.bugfix._worker_test import (  # noqa: I001
        _run_frame,
    )
except ImportError:
    pass

# ---- the program process P, the first process I of its namespaces, the confinement of T -------------

MS_REMOUNT, MS_BIND, MNT_DETACH = 32, 4096, 2
DEVICES = ("null", "zero", "random", "urandom")
"""The only device nodes a program sees (in the namespaces, as root)."""
UID_BASE, UID_SPAN = 1_500_000_000, 1 << 24
"""Program processes of a root caller run as a random uid and gid from this range: unprivileged, owning no file
on the host, sharing RLIMIT_NPROC and signals with no other program."""


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


def _bind(source, target, flags):
    """Bind ``source`` on ``target``, then remount the binding with ``flags`` (read-only, nosuid...)."""
    _mount(source, target, None, MS_BIND | MS_REC, None)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | flags, None)


def _minimal_root(read_paths, root="/tmp"):
    """In I's own mount namespace, replace the root with a read-only tmpfs that holds only the system and Python
    folders (read-only), a fresh /proc (its /proc/sys made read-only later), a /dev of null, zero, random and
    urandom, and empty /tmp and /dev/shm for the test processes' own tmpfs. Nothing else of the host's or
    bwrap's filesystem (cgroups, /etc, /home, /run, the package source, other devices) is reachable."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    bound = []
    for path in read_paths:
        inside = root + path
        if os.path.lexists(inside) or any(path.startswith(b + "/") for b in bound):
            continue
        if os.path.islink(path):
            os.makedirs(os.path.dirname(inside), exist_ok=True)
            os.symlink(os.readlink(path), inside)
        elif os.path.isdir(path):
            os.makedirs(inside)
            _bind(path, inside, MS_RDONLY | MS_NOSUID | MS_NODEV)
            bound.append(path)
    for name in ("proc", "dev", "tmp"):
        os.mkdir(f"{root}/{name}")
    _mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    _mount("tmpfs", f"{root}/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for name in DEVICES:
        open(f"{root}/dev/{name}", "w").close()
        _bind(f"/dev/{name}", f"{root}/dev/{name}", MS_NOSUID | MS_NOEXEC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.mkdir(f"{root}/dev/shm")
    _mount(None, f"{root}/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, None)
    _mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    os.chdir(root)
    try:
        _syscall(SYSCALLS[os.uname().machine]["pivot_root"], b".", b".")
        if LIBC.umount2(b".", MNT_DETACH) != 0:
            raise OSError(ctypes.get_errno(), "umount2 of the old root failed")
    except (OSError, KeyError):  # a root that cannot be pivoted (an initramfs): chroot, unprivileged T cannot leave
        os.chroot(".")
    os.chdir("/")


def _program_files(limits):
    """In I: a size-capped tmpfs on /tmp and on /dev/shm, SysV IPC bounded in the program's IPC namespace, then
    /proc/sys read-only."""
    size = f"size={max(4096, limits['files'])},mode=1777"
    for point in ("/tmp", "/dev/shm"):
        _mount("tmpfs", point, "tmpfs", MS_NOSUID | MS_NODEV, size)
    pages = max(1, limits["files"] // resource.getpagesize())
    for name, value in (("shmall", pages), ("shmmax", limits["files"]), ("shmmni", 16), ("msgmni", 16)):
        try:
            _write(f"/proc/sys/kernel/{name}", str(value))
        except OSError:
            pass
    _bind("/proc/sys", "/proc/sys", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _confine_program(config, folder):
    """In I (or P without namespaces), once, before any test process: an empty bounding set, no new privileges, the
    seccomp filter, and Landlock where the kernel has it. Every test process inherits them."""
    for cap in range(64):
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    ruleset = None
    if config["landlock"]:
        namespaces = config["namespaces"]
        read = [*config["read"], "/proc", "/dev"] if namespaces else config["read"]
        writable = ["/tmp", "/dev/shm"] if namespaces else [folder]
        ruleset = landlock_ruleset(config["landlock"], read, writable, [f"/dev/{d}" for d in DEVICES])
    if config["seccomp"]:
        seccomp_filter(deny_memfd=not config["memory_group"])
    if ruleset is not None:
        _syscall(446, ruleset, 0)
        os.close(ruleset)


def _confine_test(limits, uid, folder, n):
    """In T, before candidate code: rlimits (CPU grows with the frame's ``n`` tests) and, when the caller is root,
    an unprivileged uid and gid with no supplementary groups (so no capabilities either)."""
    os.chdir(folder)
    cpu = limits["cpu"] + int(limits["per_case"] * n + 0.999)
    rlimits = {"CORE": 0, "CPU": cpu, "AS": limits["memory"], "FSIZE": limits["files"],
               "NOFILE": limits["open_files"], "MSGQUEUE": 0}
    rlimits["NPROC"] = limits["processes"] if uid is not None else _count_tasks(os.getuid()) + limits["processes"]
    for name, value in rlimits.items():
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value + 1 if name == "CPU" else value))
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if os.geteuid() == 0 or os.getegid() == 0:
            raise OSError("the test process is still root")


def _clean_namespace(uid):
    """In I before each test process: kill every other process of the namespace, reap them, remove everything in
    /tmp and /dev/shm, and make an empty /tmp/program owned by ``uid``. No state passes from one test process to the
    next (SysV IPC objects cannot be made: the seccomp filter)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    for top in ("/tmp", "/dev/shm"):
        for name in os.listdir(top):
            path = os.path.join(top, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
    os.mkdir("/tmp/program", 0o700)
    os.chown("/tmp/program", uid, uid)
    return "/tmp/program"


def _program_process(cmd_fd, report_fd, out_fd, config):
    """Body of I (or of P without namespaces): prepare the filesystem, wait for the program, confine itself, then run
    the program's frames one by one, each in a fresh test process."""
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
        if config["namespaces"]:
            _minimal_root(config["read"])
        header = json.loads(_read_frame(cmd_fd))
        limits, folder = header["limits"], config["folder"]
        uid = UID_BASE + int.from_bytes(os.urandom(4), "big") % UID_SPAN if os.geteuid() == 0 else None
        if config["namespaces"]:
            _program_files(limits)
        elif uid is not None:
            os.chown(folder, uid, uid)
        _confine_program(config, folder)
        try:  # parsing only: candidate code runs in the test processes alone
            code = compile(header["source"], "<candidate>", "exec")
        except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
            code, failure = None, f"{type(err).__name__}: {err}"[:DETAIL_CHARS]
        def run(frame):
            n = len(json.loads(frame))
            if code is None:
                return [["error", failure, None]] * n
            where = _clean_namespace(uid) if config["namespaces"] else folder
            return _run_frame(code, header["func"], frame, lambda: _confine_test(limits, uid, where, n))

        checked, first, case = [], [], 0
        for index in range(header["frames"]):
            frame = _read_frame(cmd_fd)
            tests = run(frame)
            if header["check_from"] is not None and case >= header["check_from"]:
                checked += json.loads(frame)
                first += tests
            case += len(tests)
            del frame
            os.write(report_fd, (json.dumps([index, tests]) + "\n").encode())
        if header["check_from"] is not None:
            changed = _determinism(first, run, checked, header["check_from"])
            os.write(report_fd, (json.dumps(["check", changed]) + "\n").encode())
    finally:
        os._exit(0)


def _determinism(first, run, args, offset):
    """The checked cases whose answer differs on a second run, all in one fresh test process: ``[[case index,
    detail]]``. Only when every checked case returned a value the first time (a failing program needs no check)."""
    if not first or any(test[0] != "value" for test in first):
        return []
    again = run(json.dumps(args))
    return [[offset + k, f"answered otherwise on a second run ({b[0]} {b[1]})".strip()[:DETAIL_CHARS]]
            for k, (a, b) in enumerate(zip(first, again)) if a != b]


def _namespace_parent(cmd_r, report_w, out_w, config):
    """Body of P (forked by a zygote): join the program's cgroups, unshare namespaces, fork I (pid 1 there) and wait
    for it. P dies with its zygote, the zygote with the worker, and I with P, so a worker killed by its caller
    takes its program with it."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != config["zygote"]:
            os._exit(0)
        for path in config["group"]:
            _write(os.path.join(path, "cgroup.procs"), "0")
        if not config["namespaces"]:
            _program_process(cmd_r, report_w, out_w, config)
        _unshare(NAMESPACES | CLONE_NEWUTS)
        pid = os.fork()
        if pid == 0:  # should P die before this line, the worker's sweep of its descendants kills I
            LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            _program_process(cmd_r, report_w, out_w, config)
        for fd in (cmd_r, report_w, out_w):
            os.close(fd)
        os.waitpid(pid, 0)
    finally:
        os._exit(0)
