"""BugFix tasks: counts per split and family, sizes, disjoint held-out identifiers, and real bugs."""

import ast
import builtins

import pytest

from pglab.envs.bugfix import FAMILIES, Grader, Limits, Sandbox, get_task, make_tasks
from pglab.envs.bugfix.tasks import _task

ALL = make_tasks("all")


def identifiers(source: str) -> set[str]:
    """Function, argument and variable names of a source, builtins excluded."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
    return names - set(dir(builtins))


@pytest.fixture(scope="module")
def grades():
    grader = Grader(Sandbox(workers=2, limits=Limits(timeout=5.0)))
    programs = [(t, s) for t in ALL for s in (t.source, t.fixed)]
    yield {(t.name, s): g for (t, s), g in zip(programs, grader.grade_many(programs))}
    grader.sandbox.close()


def test_split_sizes_and_every_family_in_both_splits():
    train, heldout = make_tasks("train"), make_tasks("heldout")
    assert len(train) >= 20 and len(heldout) >= 10
    assert len(ALL) == len(train) + len(heldout) == len({t.name for t in ALL})
    for split in (train, heldout):
        assert {t.family for t in split} == set(FAMILIES)
    assert {t.split for t in train} == {"train"} and {t.split for t in heldout} == {"heldout"}


@pytest.mark.parametrize("task", ALL, ids=lambda t: t.name)
def test_task_shape(task):
    assert 5 <= len(task.fixed.splitlines()) <= 15
    assert 1 <= len(task.visible) <= 2 and len(task.hidden) >= 4
    assert task.name in task.issue
    functions = [n.name for n in ast.walk(ast.parse(task.source)) if isinstance(n, ast.FunctionDef)]
    assert functions == [task.name]


def test_heldout_names_never_appear_in_training_tasks():
    train = set().union(*(identifiers(t.fixed) for t in make_tasks("train")))
    heldout = set().union(*(identifiers(t.fixed) for t in make_tasks("heldout")))
    assert heldout and not heldout & train


def test_issue_text_carries_no_family_information():
    templates = {t.issue.replace(t.name, "NAME") for t in ALL}
    assert len(templates) == 1


@pytest.mark.integration
@pytest.mark.parametrize("task", ALL, ids=lambda t: t.name)
def test_buggy_source_fails_and_fixed_source_passes(task, grades):
    fixed, buggy = grades[task.name, task.fixed], grades[task.name, task.source]
    assert fixed.result.outcome == "pass" and fixed.hidden_pass
    assert not buggy.hidden_pass
    assert any(t.status != "pass" for t in buggy.result.tests[: len(task.visible)]), "a visible test shows the bug"


def test_the_bug_is_one_textual_change():
    with pytest.raises(ValueError, match="exactly once"):
        _task("train", "init", "def f(x):\n    total = 0\n    total = 0\n", ("total = 0", "total = 1"), [], [])


def test_split_and_name_errors():
    with pytest.raises(ValueError, match="train, heldout, all"):
        make_tasks("test")
    with pytest.raises(ValueError, match="make_tasks"):
        get_task("no_such_function")
    assert get_task("clamp").family == "minmax" and make_tasks("train")[0].name == "clamp"
