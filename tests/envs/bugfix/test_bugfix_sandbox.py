"""The sandbox: outcomes, per-test results, the grade cache, and faults that must not harm the caller."""

import builtins
import os
import sys
import time

import pytest

from pglab.envs.bugfix import BugFixEnv, Case, Grader, Job, Limits, Sandbox, Task, make_tasks
from pglab.envs.bugfix.sandbox import OUTCOMES
from support.processes import descendants, worker_trees

pytestmark = pytest.mark.integration

FAULT_LIMITS = Limits(timeout=0.75, cpu=1, memory=256 * 2**20, output=1024)
ONE = (((), 1),) * 3


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def settled(sandbox: Sandbox, others: set[int], tries: int = 50) -> tuple[set[int], set[int]]:
    """(our live descendants outside ``others``, the workers' trees), read until both agree over two reads of the
    trees: a worker forks its next program in advance, which can fall between two reads. A process left behind
    stays in the first set at every try, so the caller's comparison still fails on it."""
    for _ in range(tries):
        trees = worker_trees(sandbox)
        live = set(descendants()) - others
        if live == trees == worker_trees(sandbox):
            break
        time.sleep(0.05)
    return live, trees


def fault_task(source: str) -> Task:
    """A task whose buggy source is the fault; f() should return 1."""
    cases = (Case((), 1),)
    return Task("f", "init", "test", source, source, "Issue: f", cases, cases * 4)


@pytest.fixture(scope="module")
def sandbox():
    box = Sandbox(workers=2, limits=FAULT_LIMITS)
    yield box
    box.close()


@pytest.fixture()
def unharmed(sandbox, capfd):
    """Asserts after the test that the caller is intact: builtins, stdout, no process left, and a normal program."""
    saved, before = dict(builtins.__dict__), set(descendants())
    yield
    assert dict(builtins.__dict__) == saved
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert sandbox.run(Job("def f():\n    return 1\n", "f", ONE)).outcome == "pass"
    assert set(descendants()) - before <= worker_trees(sandbox)


def submit(sandbox, source: str) -> tuple[float, dict]:
    """Submit a fault task unchanged through BugFixEnv: (reward, info)."""
    env = BugFixEnv([fault_task(source)], grader=Grader(sandbox, cache=False))
    env.reset(options={"task": env.tasks[0]})
    _, reward, terminated, _, info = env.step("<call> submit </call>")
    assert terminated and info["stop"] == "submit"
    return reward, info


FAULTS = {
    "infinite loop": ("def f():\n    while True:\n        pass\n", "timeout"),
    "deep recursion": ("def f():\n    return f() + 1\n", "error"),
    "deep C recursion": ("import sys\nsys.setrecursionlimit(10**6)\nclass A:\n    def __repr__(self):\n"
                         "        return repr(A())\ndef f():\n    return repr(A())\n", "crash"),
    "memory bomb": ("def f():\n    blocks = [0] * 10**10\n    return 1\n", "oom"),
    "output flood": ("def f():\n    while True:\n        print('x' * 4096)\n", "timeout"),
    "sys.exit(0)": ("import sys\ndef f():\n    sys.exit(0)\n    assert False\n", "error"),
    "os._exit(0)": ("import os\ndef f():\n    os._exit(0)\n    assert False\n", "crash"),
    "syntax error": ("def f(:\n    return 1\n", "error"),
    "sleeping grandchild": ("import os, time\ndef f():\n    if os.fork() == 0:\n        time.sleep(60)\n"
                            "    return 2\n", "fail"),
    "escaping grandchild": ("import subprocess\ndef f():\n"
                            "    subprocess.Popen(['sleep', '60'], start_new_session=True)\n    return 2\n", "fail"),
}


@pytest.mark.parametrize("name", FAULTS)
def test_fault_is_contained(name, sandbox, unharmed):
    source, outcome = FAULTS[name]
    start = time.monotonic()
    result = sandbox.run(Job(source, "f", ONE))
    assert result.outcome == outcome, result
    assert len(result.output.encode()) <= FAULT_LIMITS.output
    reward, info = submit(sandbox, source)
    assert reward == 0.0 and info["outcome"] == outcome and not info["hidden_pass"]
    assert time.monotonic() - start < 30, "the sandbox waited for a sleeping process"


def test_output_is_capped_and_never_graded(sandbox, unharmed):
    flood = "def f():\n    print('x' * 10**6)\n    print('[0, \"pass\", \"\"]')\n    return 2\n"
    result = sandbox.run(Job(flood, "f", ONE))
    assert result.outcome == "fail" and result.output == "x" * FAULT_LIMITS.output
    assert result.output_bytes == 3 * (10**6 + 1 + len('[0, "pass", ""]\n'))
    faked = "def f():\n    print('visible tests: 1 of 1 pass')\n    print('PASS f() == 1')\n    return 2\n"
    reward, info = submit(sandbox, faked)
    assert reward == 0.0 and info["outcome"] == "fail"


def test_mutating_inputs_and_builtins_does_not_reach_later_tests(sandbox, unharmed):
    source = ("import builtins\ndef f(xs, seen=[]):\n    n = len(xs) + len(seen)\n    xs.append(99)\n"
              "    seen.append(1)\n    builtins.len = lambda x: 0\n    return n\n")
    result = sandbox.run(Job(source, "f", ((([1, 2],), 2),) * 3))
    assert [t.status for t in result.tests] == ["pass", "pass", "pass"]
    cheat = ("import builtins\ndef f():\n    builtins.all = lambda it: True\n"
             "    builtins.len = lambda x: 1\n    return [5]\n")
    assert sandbox.run(Job(cheat, "f", (((), [7]),))).outcome == "fail"
    reward, info = submit(sandbox, "import builtins\ndef f():\n    builtins.abs = None\n    return abs(-2)\n")
    assert reward == 0.0 and info["outcome"] == "error"


def test_outcomes_and_per_test_results(sandbox):
    source = "def f(x):\n    if x == 0:\n        raise KeyError('zero')\n    return 10 // x\n"
    result = sandbox.run(Job(source, "f", (((5,), 2), ((3,), 2), ((0,), 0))))
    assert [t.status for t in result.tests] == ["pass", "fail", "error"]
    assert result.tests[1].detail == "got 3" and result.tests[2].detail.startswith("KeyError")
    assert result.outcome == "error" and set(OUTCOMES) >= {t.status for t in result.tests}
    assert sandbox.run(Job("def g():\n    return 1\n", "f", ONE)).tests[0].detail.startswith("NameError")
    floats = sandbox.run(Job("def f():\n    return 0.1 + 0.2\n", "f", (((), 0.3), ((), 1))))
    assert [t.status for t in floats.tests] == ["pass", "fail"]
    typed = sandbox.run(Job("def f():\n    return [True, (1, 2)]\n", "f", (((), [True, (1, 2)]), ((), [1, [1, 2]]))))
    assert [t.status for t in typed.tests] == ["pass", "fail"]


def test_run_many_keeps_order_and_uses_every_worker(sandbox):
    jobs = [Job(f"def f():\n    return {k}\n", "f", (((), k % 3),)) for k in range(8)]
    results = sandbox.run_many(jobs)
    assert [r.outcome for r in results] == ["pass" if k % 3 == k else "fail" for k in range(8)]
    assert len(sandbox._workers) == 2


def test_a_dead_worker_is_replaced(sandbox):
    sandbox.run(Job("def f():\n    return 1\n", "f", ONE))
    for worker in filter(None, sandbox._workers):
        worker.proc.kill()
        worker.proc.wait()
    assert sandbox.run(Job("def f():\n    return 1\n", "f", ONE)).outcome == "pass"


def test_cache_runs_each_distinct_program_once():
    task = make_tasks("train")[0]
    grader = Grader(Sandbox(workers=1))
    first = grader.grade(task, task.source)
    assert grader.grade(task, task.source) is first and grader.runs == 1
    grader.grade_many([(task, task.source), (task, task.fixed), (task, task.fixed)])
    assert grader.runs == 2 and len(grader.cache) == 2
    uncached = Grader(grader.sandbox, cache=False)
    uncached.grade(task, task.source)
    uncached.grade(task, task.source)
    assert uncached.runs == 2 and uncached.cache is None
    grader.sandbox.close()


def test_hidden_tests_never_reach_an_observation():
    env = BugFixEnv("all", grader=Grader(Sandbox(workers=1)))
    for task in env.tasks:
        env.reset(options={"task": task})
        seen = [env.step(call)[0] for call in ("<call> read </call>", "<call> test </call>",
                                                f"<call> edit {task.fix_op} </call>", "<call> test </call>")]
        hidden_only = [c for c in task.hidden if c not in task.visible]
        assert not any(c.call(task.name) in text for c in hidden_only for text in seen)
    env.grader.sandbox.close()


def test_the_caller_never_runs_candidate_code(sandbox, monkeypatch):
    monkeypatch.setattr(sys, "exit", lambda *a: pytest.fail("candidate code ran in the caller"))
    assert sandbox.run(Job("import sys\nsys.exit(3)\ndef f():\n    return 1\n", "f", ONE)).outcome == "error"


def test_invalid_sandbox_size():
    with pytest.raises(ValueError, match="at least one worker"):
        Sandbox(workers=0)


def test_no_process_or_fd_growth_after_300_episodes_with_30_percent_timeouts():
    """Robust to load: a worker replaced after a stall must leave nothing behind either (90 replacements: a leak
    of one descriptor or process each would show 90 times over)."""
    limits = Limits(timeout=0.03, cpu=1, memory=256 * 2**20, output=256)
    grader = Grader(Sandbox(workers=1, limits=limits), cache=False)
    looping = fault_task("def f():\n    while True:\n        pass\n")
    normal = Task("f", "init", "test", "def f():\n    return 1\n", "", "Issue: f", (Case((), 1),), (Case((), 1),))
    env = BugFixEnv([looping, normal], grader=grader)
    env.reset(options={"task": normal})
    env.step("<call> submit </call>")
    others, fds = set(descendants()) - worker_trees(grader.sandbox), open_fds()
    outcomes = []
    for episode in range(300):
        env.reset(options={"task": looping if episode % 10 < 3 else normal})
        outcomes.append(env.step("<call> submit </call>")[4]["outcome"])
    assert outcomes.count("timeout") >= 90 and set(outcomes) <= {"pass", "timeout", "infra_error"}
    live, trees = settled(grader.sandbox, others)
    assert live == trees
    assert open_fds() == fds, f"{grader.sandbox.infra_failures} workers were replaced"
    trees = worker_trees(grader.sandbox)
    grader.sandbox.close()
    assert not trees & set(descendants())
