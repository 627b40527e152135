"""The grader's caller side: any answer becomes a verdict, limits on size and nesting, fork safety, CPU-time
verdicts that do not depend on load, and a cache that holds only verdicts that cannot depend on load."""

import os
import signal
import threading

import pytest

from pglab.envs.bugfix import BugFixEnv, Case, Grader, Job, Limits, Sandbox, Task
from pglab.envs.bugfix._worker_os import MAX_DEPTH, RESULT_BYTES
from pglab.envs.bugfix.grader import source_key
from pglab.envs.bugfix.layers import layer_problem

pytestmark = pytest.mark.integration

LAYERS = [layer for layer in ("bwrap", "landlock", "process") if layer_problem(layer) is None]
LIMITS = Limits(timeout=0.5, cpu=1, memory=256 * 2**20, output=1024)
WRITE_REPORT = """import os
def f(k):
    data = {data!r}
    for fd in range(3, 64):
        try:
            os.write(fd, data)
        except OSError:
            pass
    os._exit(0)
"""
HOSTILE_ANSWERS = {
    "nested 985 levels": b"[" * 985 + b"]" * 985,
    "nested 5000 levels in a value": b'[["value", "", ' + b"[" * 5000 + b"]" * 5000 + b"]]",
    "2 MiB of brackets": b"[" * (2 << 20),
    "invalid UTF-8": b'[["value", "", "\xff\xfe"]]',
    "a lone surrogate escape": b'[["value", "", "\\ud800"]]',
    "a forged status": b'[["pass", "", null]]',
    "a huge int tag": b'[["value", "", {"i": "0x' + b"f" * 100000 + b'"}]]',
    "NaN literal": b'[["value", "", NaN]]',
}


@pytest.fixture(scope="module", params=LAYERS)
def box(request):
    sandbox = Sandbox(workers=1, limits=LIMITS, isolation=request.param)
    yield sandbox
    sandbox.close()


def task_f(expected, source="def f(k):\n    return None\n") -> Task:
    return Task("f", "init", "t", source, "", "Issue: f", (), tuple(Case((k,), expected) for k in range(2)))


def submit(box: Sandbox, task: Task, source: str) -> tuple[float, dict]:
    """Submit ``source`` as the task's program (longer than a write call allows) through BugFixEnv."""
    task = task_f(task.hidden[0].expected, source)
    env = BugFixEnv([task], grader=Grader(box, cache=False))
    env.reset(options={"task": task})
    _, reward, terminated, _, info = env.step("<call> submit </call>")
    assert terminated
    return reward, info


@pytest.mark.parametrize("name", HOSTILE_ANSWERS)
def test_a_hostile_report_becomes_a_verdict_never_an_exception(box, name):
    reward, info = submit(box, task_f(1), WRITE_REPORT.format(data=HOSTILE_ANSWERS[name]))
    assert reward == 0.0 and info["outcome"] in ("bad_result", "fail", "nondeterministic"), info
    assert submit(box, task_f(1), "def f(k):\n    return 1\n")[0] == 1.0


def test_results_too_deep_or_too_large_are_bad_results_with_the_reason(box):
    deep = "def f(k):\n    x = []\n    for _ in range(150):\n        x = [x]\n    return x\n"
    result = box.run(Job(deep, "f", (((0,), []),)))
    assert result.outcome == "bad_result" and f"deeper than {MAX_DEPTH}" in result.tests[0].detail
    big = f"def f(k):\n    return 'x' * {RESULT_BYTES + 10}\n"
    assert box.run(Job(big, "f", (((0,), ""),))).tests[0].status == "bad_result"


def test_large_correct_answers_pass_and_tasks_refuse_answers_over_the_limit(box):
    long_text, wide_text = "ab" * 35_000, "\u00e9\u4e2d" * 6_000  # 70,000 characters; 12,000 escaped to 72 KB
    for text in (long_text, wide_text):
        assert submit(box, task_f(text), f"def f(k):\n    return {text!r}\n")[0] == 1.0
    with pytest.raises(ValueError, match="answer limit"):
        task_f("x" * RESULT_BYTES)
    nested = []
    for _ in range(MAX_DEPTH + 5):
        nested = [nested]
    with pytest.raises(ValueError, match="nested at most"):
        task_f(nested)


def test_a_deep_answer_line_from_the_worker_replaces_it_and_the_program_is_retried(box):
    box.run(Job("def f():\n    return 1\n", "f", (((), 1),)))
    worker = box._workers[0]
    forger = os.open(f"/proc/self/fd/{worker.fileno()}", os.O_WRONLY)
    os.write(forger, b"[" * 50_000 + b"\n")  # under the pipe's 64 KiB: the caller reads it
    os.close(forger)
    failures = box.infra_failures
    assert box.run(Job("def f():\n    return 2\n", "f", (((), 2),))).outcome == "pass"
    assert box.infra_failures == failures + 1


def test_a_forked_caller_grades_while_another_thread_holds_the_lock(box):
    busy = Job("import time\ndef f():\n    time.sleep(0.5)\n    return 1\n", "f", (((), 1),))
    thread = threading.Thread(target=box.run, args=(busy,))
    thread.start()
    while not box._lock.locked():
        pass
    pid = os.fork()
    if pid == 0:  # the child inherits a held lock unless the fork hook resets it
        signal.alarm(60)
        ok = box.run(Job("def f():\n    return 3\n", "f", (((), 3),))).outcome == "pass"
        box.close()
        os._exit(0 if ok else 1)
    thread.join()
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_limits_are_cpu_time_with_a_wall_clock_backstop_and_timeouts_are_not_cached(box):
    assert LIMITS.wall == 10 * LIMITS.timeout + 2
    spin = "import time\ndef f(k):\n    while time.process_time() < 2:\n        pass\n    return 1\n"
    sleep = "import time\ndef f(k):\n    time.sleep(0.7)\n    return 1\n"  # longer than timeout, little CPU
    task, grader = task_f(1), Grader(box)
    spun = grader.grade(task, spin).result
    assert spun.outcome == "timeout" and spun.tests[0].detail.startswith(("CPU time", "killed by SIGXCPU"))
    assert source_key(task, spin, LIMITS, box.isolation) not in grader.cache
    assert grader.grade(task, sleep).result.outcome == "pass"
    backstop = Limits(timeout=0.1, cpu=1, memory=256 * 2**20, wall=0.3)
    stalled = box.run(Job(sleep, "f", (((0,), 1),)), backstop)
    assert stalled.outcome == "timeout" and stalled.tests[0].detail == "wall-clock backstop"
    with pytest.raises(ValueError, match="Limits.wall"):
        Limits(timeout=2.0, wall=1.0)


WORK = "def f(k):\n    total = 0\n    for i in range(250_000):\n        total += i % 7\n    return k + 1\n  # {n}\n"


def grade_in_parallel(programs: int, graders: int = 6) -> list[str]:
    """Outcomes of ``programs`` correct programs (each test about 25 ms of CPU on an idle core), graded by
    ``graders`` graders at once, each with its own sandbox."""
    task = Task("f", "init", "t", "def f(k):\n    return k\n", "", "Issue: f", (Case((0,), 1),),
                tuple(Case((k,), k + 1) for k in range(1, 6)))
    outcomes: list[str] = []

    def work(g: int) -> None:
        grader = Grader(Sandbox(workers=1), cache=False)
        for n in range(g, programs, graders):
            outcomes.append(grader.grade(task, WORK.format(n=n)).result.outcome)
        grader.sandbox.close()

    threads = [threading.Thread(target=work, args=(g,)) for g in range(graders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_verdicts_do_not_depend_on_load():
    """Six graders at once on this machine's cores: every correct program passes (CPU time, not wall clock).
    PGLAB_LOAD_PROGRAMS=200 runs the acceptance's full size."""
    programs = int(os.environ.get("PGLAB_LOAD_PROGRAMS", "36"))
    outcomes = grade_in_parallel(programs)
    assert outcomes == ["pass"] * programs, {o: outcomes.count(o) for o in set(outcomes)}


def test_the_warning_is_one_line_once_and_only_when_the_isolation_is_weaker(caplog, monkeypatch):
    import pglab.envs.bugfix.layers as layers_module

    monkeypatch.setattr(layers_module, "_WARNED", set())
    with caplog.at_level("WARNING", logger="pglab.sandbox"):
        Sandbox(workers=1)  # auto: the strongest layer here
        auto_lines = [r.getMessage() for r in caplog.records]
        weaker = LAYERS[1:]
        for layer in weaker * 2:
            Sandbox(workers=1, isolation=layer)
    lines = [r.getMessage() for r in caplog.records]
    lacking = [m for m in layers_module.describe(LAYERS[0])["not_applied"]]
    assert len(auto_lines) == (1 if lacking else 0)
    assert len(lines) == len(set(lines)) and all("\n" not in line for line in lines)
    assert all(any(f"isolation={layer!r} is weaker" in line for line in lines) for layer in weaker)
    env = BugFixEnv("train", grader=Grader(Sandbox(workers=1)))
    assert env.reset(options={"task": "clamp"})[1]["isolation"] == LAYERS[0]


FALLBACK = {
    "a CPU loop": ("def f():\n    while True:\n        pass\n", "timeout"),
    "a fork bomb": ("import os\ndef f():\n    while True:\n        try:\n            os.fork()\n"
                    "        except OSError:\n            pass\n", ("oom", "crash", "timeout")),
    "memfd_create": ("import os\ndef f():\n    os.memfd_create('x')\n    return 1\n", "error"),
    "20 MB beside the folder": ("def f():\n    open('../leak', 'wb').write(bytes(20 * 2**20))\n    return 1\n",
                                ("crash", "error")),
}


@pytest.mark.parametrize("layer", [layer for layer in LAYERS if layer != "bwrap"])
def test_without_namespaces_or_cgroups_the_sampled_limits_still_hold(layer, monkeypatch):
    """An ordinary user's machine, simulated: no namespaces, no cgroups; the worker samples, refuses memfd_create,
    measures and empties its base folder, and kills the process tree."""
    import pglab.envs.bugfix.sandbox as sandbox_module
    from support.processes import descendants

    monkeypatch.setattr(sandbox_module, "_probe", lambda layer: {"namespaces": False, "seccomp": True, "keyring": True})
    monkeypatch.setattr(sandbox_module, "make_worker_group", lambda name: {})
    box, before = Sandbox(workers=1, limits=LIMITS, isolation=layer), set(descendants())
    for name, (source, outcome) in FALLBACK.items():
        result = box.run(Job(source, "f", (((), 1),)))
        assert result.outcome in ((outcome,) if isinstance(outcome, str) else outcome), (name, result)
        base = box._workers[0].base
        left = os.listdir(base)  # only the next program's folder, made in advance, empty
        assert len(left) == 1 and left[0].startswith("program-") and not os.listdir(os.path.join(base, left[0]))
    assert box.run(Job("def f():\n    return 1\n", "f", (((), 1),))).outcome == "pass"
    worker = box._workers[0].proc.pid
    assert set(descendants()) - before <= {worker, *descendants(worker)} and len(descendants(worker)) == 2  # Z, P
    box.close()
