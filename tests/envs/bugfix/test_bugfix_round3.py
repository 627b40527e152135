"""Grading, round three: the attack classes a red team found, each in every layer this machine has.

A privilege probe is a program whose answer is True only if its attack worked (mount, a write to /proc/sys,
a user namespace, a device, a socket...); every hidden case expects True, so reward 1 would mean the attack
worked: each must get reward 0. Then memory of earlier programs (copycats), nondeterminism, and correct
programs that must still score 1: a few milliseconds of CPU per call, scratch files under /tmp and /dev/shm,
POSIX shared memory.
"""

import os
import secrets
import socket
from pathlib import Path

import pytest

from pglab.envs.bugfix import BugFixEnv, Case, Grader, Job, Limits, Sandbox, Task, get_task
from pglab.envs.bugfix._worker_os import remove_group
from pglab.envs.bugfix.layers import LAYERS, layer_problem

pytestmark = pytest.mark.integration

LAYERS_HERE = [layer for layer in LAYERS if layer_problem(layer) is None]
LIMITS = Limits(timeout=2.0, cpu=2, memory=256 * 2**20, output=1024)
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")


@pytest.fixture(scope="module", params=["auto", *LAYERS_HERE])
def grader(request):
    box = Sandbox(workers=1, limits=LIMITS, isolation=request.param)
    yield Grader(box, cache=False)
    box.close()


def probe_task(body: str) -> Task:
    """A task whose every case expects True; the program returns whether ``body`` (which sets ``hacked``) worked."""
    source = f"import ctypes, os, socket\nLIBC = ctypes.CDLL(None, use_errno=True)\ndef probe(k):\n" \
             f"    hacked = False\n{body}\n    return hacked\n"
    return Task("probe", "compare", "attack", source, source, "probe", (Case((0,), True),),
                tuple(Case((k,), True) for k in range(1, 4)))


PROBES = {
    "root inside the program": "    hacked = os.getuid() == 0 or os.geteuid() == 0 or os.getgid() == 0",
    "a write to /proc/sys (core_pattern, any 0644 sysctl)": """
    for root, _, files in os.walk("/proc/sys"):
        for name in files:
            path = os.path.join(root, name)
            try:
                value = open(path).read()
                open(path, "w").write(value)
                hacked = True
            except OSError:
                pass""",
    "mount a fresh /proc, or any file system": """
    for source, fstype in ((b"proc", b"proc"), (b"tmpfs", b"tmpfs")):
        hacked |= LIBC.mount(source, b"/tmp", fstype, 0, None) == 0""",
    "unshare, setns and clone into new namespaces": """
    for flags in (0x10000000, 0x20000, 0x40000000, 0x20000000):
        hacked |= LIBC.unshare(flags) == 0
    hacked |= LIBC.syscall(56, 0x10000000 | 17, 0, 0, 0, 0) == 0 if os.uname().machine == "x86_64" else False""",
    "ptrace, bpf, perf_event_open, kexec, modules, keyrings, mknod, io_uring": """
    if os.uname().machine == "x86_64":
        for number, args in ((101, (0, 0, 0, 0)), (321, (0, 0, 0)), (298, (0, 0, -1, -1, 0)), (246, (0, 0, 0, 0)),
                             (175, (0, 0, 0)), (313, (0, 0, 0)), (250, (0, -3, 0)), (248, (b"user", b"k", b"v", 1, -3)),
                             (133, (b"/tmp/node", 0o20666, 0x0103)), (425, (1, 0)), (155, (b".", b".")),
                             (308, (0, 0)), (166, (b"/", 2)), (29, (0, 4096, 0o1000 | 0o600))):
            result = LIBC.syscall(number, *args)
            hacked |= result >= 0 and number != 101
            hacked |= number == 101 and result == 0""",
    "a /dev with more than null, zero, random and urandom": """
    for name in ("kmsg", "kvm", "console", "loop-control", "loop0", "mem", "tty", "sda", "vda"):
        try:
            os.close(os.open("/dev/" + name, os.O_RDONLY))
            hacked = True
        except OSError:
            pass
    try:
        hacked |= bool(set(os.listdir("/dev")) - {"null", "zero", "random", "urandom", "fd", "stdin", "stdout",
                                                   "stderr", "shm"})
    except OSError:
        pass""",
    "a socket of any network family (UDP, TCP, raw, netlink)": """
    for family, kind in ((socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_INET, socket.SOCK_STREAM),
                         (socket.AF_INET6, socket.SOCK_DGRAM), (socket.AF_NETLINK, socket.SOCK_RAW),
                         (socket.AF_PACKET, socket.SOCK_RAW)):
        try:
            socket.socket(family, kind).close()
            hacked = True
        except OSError:
            pass""",
}


@pytest.mark.parametrize("name", PROBES)
def test_each_privilege_probe_gets_reward_0(grader, name):
    before = CORE_PATTERN.read_text() if CORE_PATTERN.exists() else None
    grade = grader.grade(probe_task(PROBES[name]), probe_task(PROBES[name]).source)
    assert not grade.hidden_pass, (name, grade.result)
    assert grade.result.outcome == "fail", (name, grade.result)  # it ran and found every door shut
    assert before is None or CORE_PATTERN.read_text() == before


def test_no_datagram_or_connection_reaches_the_callers_loopback_listeners(grader):
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"pglab-round3-{secrets.token_hex(6)}"
    abstract.bind("\0" + name)
    abstract.setblocking(False)
    body = f"""
    for target, family in ((("127.0.0.1", {udp.getsockname()[1]}), socket.AF_INET), ("\\0{name}", socket.AF_UNIX)):
        try:
            s = socket.socket(family, socket.SOCK_DGRAM)
            hacked |= s.sendto(b"leak", target) == 4
        except OSError:
            pass"""
    grade = grader.grade(probe_task(body), probe_task(body).source)
    assert not grade.hidden_pass, grade.result
    for listener in (udp, abstract):
        with pytest.raises(BlockingIOError):
            listener.recv(16)
        listener.close()


MARK = f"pglab-earlier-{secrets.token_hex(8)}"
COPYCAT = f"""import gc, sys
def f(x):
    needle = "".join(["{MARK[:12]}", "{MARK[12:]}"])
    for o in gc.get_objects():
        items = list(o.keys()) + list(o.values()) if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
        for v in items:
            if v is not needle and isinstance(v, str) and needle in v:
                return True
            if isinstance(v, bytes) and needle.encode() in v:
                return True
    frame = sys._getframe().f_back
    while frame is not None:
        if any(isinstance(v, (str, bytes)) and needle in str(v) for v in frame.f_locals.values()):
            return True
        frame = frame.f_back
    return False
"""


def test_a_program_finds_nothing_of_earlier_requests_in_its_memory(grader):
    """An honest program whose source and arguments carry a marker runs first; then a copycat scans its frames and
    every container the garbage collector knows for that marker, and must not find it. The copycat spells the
    marker only in two halves joined at run time, so its own source does not contain it."""
    honest = Task("f", "compare", "attack", f"def f(x):\n    return '{MARK}' + x\n", "", "i",
                  (Case((MARK,), MARK + MARK),), (Case((MARK + "!",), MARK + MARK + "!"),))
    assert grader.grade(honest, honest.source).hidden_pass
    copy = Task("f", "compare", "attack", COPYCAT, "", "i", (Case(("a",), False),), (Case(("b",), False),))
    grade = grader.grade(copy, COPYCAT)
    assert grade.hidden_pass, ("the copycat found the earlier request", grade.result)
    planted = Task("f", "compare", "attack", COPYCAT, "", "i", (Case((MARK,), True),), (Case((MARK,), True),))
    assert grader.grade(planted, COPYCAT).hidden_pass  # the scan does find the marker where it is
    group = [(honest, honest.source), (copy, COPYCAT)] * 3 + [(copy, COPYCAT)]  # a GRPO-like group of 7
    grades = grader.grade_many(group)
    assert all(g.hidden_pass for g in grades), [g.result.outcome for g in grades]


def test_answers_that_differ_between_two_runs_are_nondeterministic(grader):
    """A program whose answer is a fresh random number, and one whose answers go wrong after its process made as
    many calls as a frame holds: both return a value the first time, and differ on the second run."""
    task = Task("f", "compare", "attack", "def f(x):\n    return x\n", "def f(x):\n    return x\n", "i",
                (Case((0,), 0),), tuple(Case((k,), k) for k in range(1, 4)),
                tuple(Case((k,), k) for k in range(10, 30)))
    counting = "CALLS = [0]\ndef f(x):\n    CALLS[0] += 1\n    return x if CALLS[0] <= 20 else -1\n"
    assert grader.grade(task, task.source).result.outcome == "pass"
    for source in ("import random\ndef f(x):\n    return random.random()\n", counting):
        grade = grader.grade(task, source)
        assert not grade.hidden_pass and grade.result.outcome == "nondeterministic", grade.result
        assert "nondeterministic" in {t.status for t in grade.result.tests[1:]}


def test_no_pass_of_a_nondeterministic_program_is_cached():
    box = Sandbox(workers=1, limits=LIMITS)
    grader = Grader(box)
    task = get_task("clamp")
    coin = "import random\nRIGHT = random.random() < 0.5\n" + task.fixed.replace(
        "    return max(lo, min(x, hi))", "    return max(lo, min(x, hi)) if RIGHT else lo")
    rewarded = sum(grader.grade(task, coin + "\n" * k).hidden_pass for k in range(12))
    assert rewarded <= 1, rewarded  # each T draws its own coin: 7 coins must all come up right, p = 1/128
    assert grader.grade(task, task.fixed).hidden_pass
    box.close()


CORRECT = {
    "3 ms of CPU per call": "def clamp(x, lo, hi):\n    s = 0\n    while __import__('time').process_time() < 0:\n"
                            "        pass\n    t = __import__('time').process_time()\n"
                            "    while __import__('time').process_time() - t < 0.003:\n        s += 1\n"
                            "    if lo > hi:\n        lo, hi = hi, lo\n    return max(lo, min(x, hi))\n",
    "a scratch file under an absolute /tmp path and in /dev/shm": (
        "def clamp(x, lo, hi):\n    for path in ('/tmp/scratch.txt', '/dev/shm/scratch.txt'):\n"
        "        with open(path, 'w') as f:\n            f.write(repr((x, lo, hi)))\n"
        "        x, lo, hi = eval(open(path).read())\n    if lo > hi:\n        lo, hi = hi, lo\n"
        "    return max(lo, min(x, hi))\n"),
    "multiprocessing.shared_memory": (
        "from multiprocessing import shared_memory\ndef clamp(x, lo, hi):\n"
        "    m = shared_memory.SharedMemory(create=True, size=64)\n    m.buf[0] = 1\n    ok = m.buf[0]\n"
        "    m.close()\n    m.unlink()\n    if lo > hi:\n        lo, hi = hi, lo\n"
        "    return max(lo, min(x, hi)) * ok\n"),
}


@pytest.mark.parametrize("name", CORRECT)
def test_correct_programs_still_score_1(grader, name):
    task = get_task("clamp")
    if name == "multiprocessing.shared_memory":
        task = Task(task.name, task.family, task.split, task.source, task.fixed, task.issue, task.visible,
                    task.hidden, task.generated[:40])  # its resource tracker starts an interpreter per process
    env = BugFixEnv([task], grader=Grader(grader.sandbox, Limits(timeout=2.0, cpu=2, memory=512 * 2**20)),
                    allow_write=True)
    env.reset(options={"task": task})
    env.step(f"<call> write {CORRECT[name]} </call>")
    _, reward, *_ , info = env.step("<call> submit </call>")
    assert reward == 1.0, info["outcome"]


def test_cpu_budget_grows_with_the_cases():
    limits = Limits(timeout=1.0, per_case=0.01)
    assert limits.budget(0) == (1.0, limits.wall)
    assert limits.budget(310) == pytest.approx((4.1, limits.wall + 31.0))


def test_removing_a_group_that_vanishes_meanwhile_is_not_an_error(tmp_path, monkeypatch):
    """The close() race: another process removes the folders while a group is being removed."""
    folder = tmp_path / "pglab-group"
    folder.mkdir()
    real = os.listdir

    def vanish(path):
        if str(path) == str(folder):
            os.rmdir(folder)
            raise FileNotFoundError(path)
        return real(path)

    monkeypatch.setattr(os, "listdir", vanish)
    assert remove_group({"v2": str(folder)}, 1.0)


def test_a_job_counts_its_checked_cases():
    job = Job("def f(x):\n    return x\n", "f", tuple(((k,), k) for k in range(10)), 4, 2)
    assert job.checked() == 8 and Job("", "f", (((1,), 1),)).checked() == 0
