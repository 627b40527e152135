"""Sandbox worker (standard library only; started as ``python -I -S -c SOURCE CONFIG``): runs candidate programs.

The program is four files sent as one source, in this order: ``_worker_os`` (plain data, kernel interfaces,
cgroups), ``_worker_test`` (the test process T), ``_worker_program`` (the program process P and I) and this one
(the worker). Imported by the caller, each part imports what it uses from the parts before it; in the sandbox
those imports fail (no package is importable under ``-I -S``) and the names are already defined above.

The worker never sees an expected value and never judges. Protocol, one JSON line each way:
request ``{id, source, func, frames: [encoded args lists], limits}``; answer ``{id, tests: [[status, detail,
payload]], output, output_bytes, seconds, cpu_seconds}``, where status is ``value`` (payload: the encoded result),
``error``, ``oom``, ``bad_result``, ``crash`` or ``timeout``. A frame is a batch of tests that share one test
process (one case per frame for the fixed cases; generated cases in batches). The caller decodes payloads and
compares them with the expected values in its own process.

Processes: before it reads any request the worker forks a zygote Z, which never receives one: Z only forks program
processes P on the worker's command (three pipe ends and the cgroup paths, over a unix socket) and returns a pidfd
for each. So no earlier request, source, argument or result is anywhere in a program's memory. As root, Z moves
into a network namespace of its own with no interface up (no network of any kind, for every
program). P joins the program's cgroups (where the machine has them) and, where it may, unshares PID, mount, IPC,
cgroup and UTS namespaces and forks I, the first process of the new PID namespace: killing P kills I (parent-death
signal), and the kernel then kills everything in the namespace. I replaces the root with a read-only tmpfs of the
system and Python folders, a fresh /proc (its /proc/sys read-only) and a /dev of four devices; it receives one
frame of arguments at a time and forks one fresh test process T per frame. T gets its own empty /tmp and /dev/shm,
rlimits, an unprivileged uid and gid (when the caller is root), no new privileges, a seccomp filter and Landlock,
then defines the candidate, calls it and writes its results to its own pipe. Between two T, I kills every other
process of the namespace and removes its IPC objects. I checks the size and nesting of what T wrote. The worker is
not dumpable, has its own session keyring, measures the program's CPU time, memory, processes and disk (from the
cgroups when there are some), stops it over a limit or at the wall-clock backstop, kills it as a whole, and
empties its base folder after every program.
"""

import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time

try:  # as a module; in the sandbox these names are defined by the parts before this one
    from pglab.envs.bugfix._worker_os import (  # noqa: I001
        ANSWER_BYTES,
        Group,
        CLONE_NEWNET,
        DETAIL_CHARS,
        LIBC,
        POLL_S,
        PR_SET_CHILD_SUBREAPER,
        PR_SET_DUMPABLE,
        PR_SET_PDEATHSIG,
        RESULT_BYTES,
        _unshare,
        _write,
        group_kinds,
        join_fresh_session_keyring,
        probe,
    )
    from pglab.envs.bugfix._worker_test import (  # noqa: I001
        T_STATUSES,
        checked,
    )
    from pglab.envs.bugfix._worker_program import (  # noqa: I001
        _namespace_parent,
        _write_frame,
    )
except ImportError:
    pass

# ---- the worker -----------------------------------------------------------------------------------


def _descendants(pid, skip=()):
    """``pid`` and every live descendant, from /proc, leaving out the subtrees of the pids in ``skip``."""
    found, frontier = [], [pid]
    while frontier:
        found += frontier
        children = []
        for parent in frontier:
            try:
                for task in os.listdir(f"/proc/{parent}/task"):
                    with open(f"/proc/{parent}/task/{task}/children") as f:
                        children += [int(p) for p in f.read().split() if int(p) not in skip]
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


def _wait_exit(pidfd, seconds=5.0):
    """Wait until the process of ``pidfd`` has exited (its pidfd becomes readable); False after ``seconds``."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(seconds * 1000))


def _kill_tree(program, group, keep):
    """Kill the program as a whole (cgroup.kill, or its namespace through P), wait for P, then kill and reap every
    descendant of the worker outside the subtrees of ``keep`` (the zygotes, the next program)."""
    if group is not None and group.kinds["kill"]:
        try:
            _write(group._file("v2", "cgroup.kill"), "1")
        except OSError:
            pass
    try:
        os.killpg(program.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        signal.pidfd_send_signal(program.pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _wait_exit(program.pidfd)
    os.close(program.pidfd)
    for _ in range(1000):
        orphans = _descendants(os.getpid(), set(keep))[1:]
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


def zygote(sock, config):
    """Body of a zygote: fork a program process P for each command (its three pipe ends as fds, the cgroup paths and
    folder as JSON) and answer with P's pid and a pidfd. It never receives a request. As root, first a network
    namespace of its own: no interface is up, so no program reaches any network."""
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != config["worker"]:
        os._exit(0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # P is reaped by the kernel; the worker waits on its pidfd
    if config["namespaces"]:
        _unshare(CLONE_NEWNET)
    config = {**config, "zygote": os.getpid()}
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
        if not message:
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            sock.close()
            _namespace_parent(*fds, {**config, **json.loads(message)})
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        socket.send_fds(sock, [str(pid).encode()], [pidfd])
        os.close(pidfd)


class Zygote:
    """The worker's end of its zygote: a copy of the worker forked before the worker reads any request."""

    def __init__(self, config):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            ours.close()
            for fd in config["protocol_fds"]:
                os.close(fd)
            zygote(theirs, {key: config[key] for key in ZYGOTE_CONFIG})
        theirs.close()
        self.sock = ours

    def fork(self, fds, command):
        """A new P with the pipe ends ``fds``: (pid, pidfd)."""
        socket.send_fds(self.sock, [json.dumps(command).encode()], fds)
        message, pidfds, _, _ = socket.recv_fds(self.sock, 64, 1)
        if not pidfds:
            raise OSError("the zygote did not fork a program process")
        return int(message), pidfds[0]


ZYGOTE_CONFIG = ("read", "landlock", "namespaces", "seccomp", "memory_group", "worker")
"""What a zygote and its program processes know: paths and capabilities of the machine, nothing of any request."""


class Program:
    """A program process P forked by a zygote and waiting for its program, in its own cgroups, with the worker's ends
    of its three pipes and a pidfd of P."""

    count = 0

    def __init__(self, config, zygote):
        Program.count += 1
        self.group = Group(config["groups"], f"p{Program.count}") if config["groups"] else None
        self.folder = None
        if not config["namespaces"]:
            self.folder = os.path.join(config["base"], f"program-{os.urandom(8).hex()}")
            os.mkdir(self.folder, 0o700)
        cmd_r, self.cmd = os.pipe()
        self.report, report_w = os.pipe()
        self.out, out_w = os.pipe()
        try:
            self.pid, self.pidfd = zygote.fork([cmd_r, report_w, out_w], {
                "group": list(self.group.paths.values()) if self.group else [], "folder": self.folder})
        finally:
            for fd in (cmd_r, report_w, out_w):
                os.close(fd)

    def _over(self, req, config, start):
        """Why the program must stop now: CPU time, memory, processes, disk, the wall-clock backstop; else None."""
        limits = req["limits"]
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
        if cpu > req["cpu_budget"]:
            return "timeout"
        if time.monotonic() - start > req["wall_budget"]:
            return "wall"
        if pids > limits["processes"] + (2 if config["namespaces"] else 1):
            return "processes"
        if not config["namespaces"] and _folder_bytes(config["base"]) > limits["files"]:
            return "disk"
        return "oom" if memory > limits["memory"] else None

    def run(self, req, config, keep):
        """Send the program and its frames, collect output and reports -> (tests, output, total bytes, stop)."""
        limits, start, self.cpu = req["limits"], time.monotonic(), 0.0
        frames = req["frames"]
        header = {"source": req["source"], "func": req["func"], "frames": len(frames), "limits": limits,
                  "check_from": req["check_from"]}
        lines_due = len(frames) + (req["check_from"] is not None)
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
        while stop is None and done < lines_due:
            now = time.monotonic()
            if now > next_poll:
                next_poll = now + POLL_S
                stop = self._over(req, config, start)
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
                        if done < len(frames):
                            found += _report_line(line, sizes[done], answer_bytes)
                        else:
                            found = _check_line(line, found, req["check_from"])
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
        _kill_tree(self, self.group, keep)
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


def _check_line(line, found, check_from):
    """The tests after I's determinism check: each case it lists (one that answered otherwise the second time) becomes
    ``nondeterministic`` with I's detail."""
    try:
        index, changed = json.loads(line)
        if index != "check" or type(changed) is not list:
            raise ValueError
        found = list(found)
        for case, detail in changed:
            if type(case) is not int or not check_from <= case < len(found) or type(detail) is not str:
                raise ValueError
            found[case] = ["nondeterministic", detail[:DETAIL_CHARS], None]
        return found
    except (ValueError, TypeError):
        return found[:check_from] + [["crash", "malformed determinism report", None]] * (len(found) - check_from)


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


def run_program(program, req, config, keep):
    """Run one request on a pre-forked P; the answer dict of the protocol."""
    start = time.monotonic()
    try:
        tests, output, total, stop = program.run(req, config, keep)
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
    config = {**setup, "protocol_fds": [requests.fileno(), answer_fd, devnull], "worker": os.getpid(),
              "memory_group": bool(setup["groups"]) and group_kinds(setup["groups"])["memory"] is not None}
    zygote = Zygote(config)  # forked before the first request is read
    keep = {zygote.pid}
    program = Program(config, zygote)
    while line := requests.readline():
        answer = run_program(program, json.loads(line), config, keep)
        finished, program = program, Program(config, zygote)  # the next one, before the answer: it holds no id
        data = (json.dumps(answer) + "\n").encode()
        while data:
            data = data[os.write(answer_fd, data):]
        if finished.group is not None:  # emptied by the kill; removed off the caller's critical path
            finished.group.remove()
    _kill_tree(program, program.group, keep)
    if program.group is not None:
        program.group.remove()


if __name__ == "__main__":
    sys.exit(main())
