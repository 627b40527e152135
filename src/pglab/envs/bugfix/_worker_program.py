"""The sandbox worker's program process P and the first process I of its namespace (standard library only).

Part of the worker program (see :mod:`pglab.envs.bugfix._worker`).
"""

import ctypes
import json
import os
import resource
import signal
import struct

try:  # as a module; in the sandbox these names are defined by the parts before this one
    from pglab.envs.bugfix._worker_os import (  # noqa: I001
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


