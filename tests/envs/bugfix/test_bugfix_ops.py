"""Repair ops: every op on every family of the shipped tasks, each op on its own, and how ops compose."""

import ast

import pytest

from pglab.envs.bugfix import FAMILIES, FIX_OPS, OP_NAMES, apply_op, make_tasks
from pglab.envs.bugfix.ops import add_zero_guard, fix_comparison, fix_init, fix_range_end, swap_minmax
from pglab.envs.bugfix.scripted import reachable_sources

ALL = make_tasks("all")
GUARD = "        if d == 0:\n            return 0\n"
CHANGES = {
    ("clamp", "fix_comparison"): [("lo > hi", "lo >= hi")],
    ("count_positive", "fix_comparison"): [("x > 0", "x >= 0")],
    ("dot", "fix_range_end"): [("range(len(a))", "range(len(a) + 1)")],
    ("power_of", "fix_range_end"): [("range(m)", "range(m + 1)")],
    ("is_sorted", "fix_range_end"): [("range(len(xs) - 1)", "range(len(xs))")],
    ("count_multiples", "add_zero_guard"): [("        if i % d", GUARD + "        if i % d")],
}
"""The wrong ops that change a shipped task's buggy source, and how; every other wrong op leaves it unchanged."""


def expected(task, op):
    if op == task.fix_op:
        return task.fixed
    source = task.source
    for old, new in CHANGES.get((task.name, op), []):
        assert source.count(old) == 1
        source = source.replace(old, new)
    return source


@pytest.mark.parametrize("op", OP_NAMES)
@pytest.mark.parametrize("family", FAMILIES)
def test_op_on_family(family, op):
    tasks = [t for t in ALL if t.family == family]
    for task in tasks:
        assert apply_op(op, task.source) == expected(task, op), (task.name, op)
    if op != FIX_OPS[family]:
        assert any(apply_op(op, t.source) == t.source for t in tasks), "a wrong op often says no change"


def test_fix_init_sets_the_identity_of_the_loop_update():
    source = ("def f(xs):\n    s = 5\n    p = 0.0\n    c = -1\n    for x in xs:\n"
              "        s += x\n        p *= x\n        c -= 1\n")
    repaired = source.replace("s = 5", "s = 0").replace("p = 0.0", "p = 1.0").replace("c = -1", "c = 0")
    assert fix_init(source) == repaired
    untouched = "def f(xs):\n    best = 3\n    for x in xs:\n        best = max(best, x)\n    n = 2\n    return n\n"
    assert fix_init(untouched) == untouched


def test_fix_range_end_adds_one_to_every_range_stop():
    source = ("def f(n, a, b):\n    for i in range(n - 1):\n        pass\n"
              "    for j in range(2, n + 1, 2):\n        pass\n    return [k for k in range(a | b)]\n")
    assert fix_range_end(source) == ("def f(n, a, b):\n    for i in range(n):\n        pass\n"
                                     "    for j in range(2, n + 2, 2):\n        pass\n"
                                     "    return [k for k in range((a | b) + 1)]\n")
    no_range = "def f(xs):\n    for x in xs:\n        pass\n"
    assert fix_range_end(no_range) == no_range


def test_add_zero_guard_guards_each_divisor_once_inside_functions():
    source = "k = 1 / 2\ndef f(a, b, c):\n    x = a // (b - c)\n    y = a % (b - c) + a / 3\n    return x + y\n"
    once = add_zero_guard(source)
    assert once == ("k = 1 / 2\ndef f(a, b, c):\n    if b - c == 0:\n        return 0\n    x = a // (b - c)\n"
                    "    y = a % (b - c) + a / 3\n    return x + y\n")
    assert add_zero_guard(once) == once
    chain = "def f(a, b):\n    if a:\n        return 1\n    elif a / b:\n        return 2\n"
    assert add_zero_guard(chain) == chain.replace("    if a:", "    if b == 0:\n        return 0\n    if a:")


def test_token_ops_leave_strings_comments_and_other_operators_alone():
    source = 'def f(a, b) -> int:\n    """min < max"""\n    # max > min\n    return min(a << 1, b) < max(a, b >> 1)\n'
    assert swap_minmax(source) == source.replace("min(a", "MIN").replace("max(a", "min(a").replace("MIN", "max(a")
    assert fix_comparison(source) == source.replace(") < max", ") <= max")


@pytest.mark.parametrize("op", OP_NAMES)
def test_ops_keep_sources_parsing_and_leave_broken_sources_alone(op):
    for task in ALL:
        for source in reachable_sources(task, 3):
            ast.parse(apply_op(op, source))
    assert apply_op(op, "def f(:\n    return min(1 < 2)\n") == "def f(:\n    return min(1 < 2)\n"


def test_ops_compose():
    for task in ALL:
        for source in reachable_sources(task, 2):
            assert swap_minmax(swap_minmax(source)) == source
            for idempotent in (fix_init, add_zero_guard, fix_comparison):
                assert idempotent(idempotent(source)) == idempotent(source)
    sum_to = make_tasks("train")[2]
    assert "range(1, n + 2)" in fix_range_end(fix_range_end(sum_to.source))  # extending twice overshoots
    both = fix_comparison(add_zero_guard(fix_comparison(sum_to.source)))
    assert both == sum_to.source  # neither op touches a range_end task: stacking ops cannot repair it


def test_unknown_op_is_a_value_error():
    with pytest.raises(ValueError, match="fix_init"):
        apply_op("fix_everything", "x = 1\n")
