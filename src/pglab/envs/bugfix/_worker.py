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

import json
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time

try:  # as a module; in the sandbox these names are defined by the parts before this one
    from pglab.envs.bugfix._worker_os import (  # noqa: I001
        ANSWER_BYTES,
        Group,
        LIBC,
        POLL_S,
        PR_SET_CHILD_SUBREAPER,
        PR_SET_DUMPABLE,
        RESULT_BYTES,
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
