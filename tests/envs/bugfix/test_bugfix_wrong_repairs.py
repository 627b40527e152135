"""Plausible wrong repairs get reward 0: the catalogue's exposing inputs are hidden or generated cases, the
reference and the repair differ on them, and the sandboxed grader fails every repair while the correct sources
pass all their generated cases. Also the boundary classes of the generated inputs, property by property."""

import copy
import math
import sys
import time
from collections import Counter

import pytest

from pglab.envs.bugfix import FAMILIES, BugFixEnv, Grader, Limits, Sandbox, get_task, make_tasks, same
from pglab.envs.bugfix.inputs import (
    BIG_INTS,
    BOUNDARY,
    CANCELLING,
    DELTAS,
    ELEMENT,
    GENERATED,
    INPUTS,
    INTEGRAL,
    LARGE_COUNT,
    TIE_DIVISORS,
    boundary_inputs,
    comparison_constants,
    generated_inputs,
)
from pglab.envs.bugfix.wrong_repairs import WRONG_REPAIRS

ALL = make_tasks("all")


@pytest.fixture(scope="module")
def grader():
    grader = Grader(Sandbox(workers=2))
    yield grader
    grader.sandbox.close()


def result(source: str, name: str, args: tuple) -> tuple:
    """("value", v) or ("raises", type name) of ``name(*args)`` run here (the catalogue is this project's code)."""
    namespace: dict = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)  # noqa: S102
    try:
        return "value", namespace[name](*copy.deepcopy(args))
    except Exception as err:  # noqa: BLE001
        return "raises", type(err).__name__


def agree(got: tuple, expected: tuple) -> bool:
    """Same outcome: equal results under the grader's ``same`` (exact types, 1e-9 tolerances), or the same error."""
    return got[0] == expected[0] and (same(got[1], expected[1]) if got[0] == "value" else got[1] == expected[1])


def scalars(args) -> list:
    """Every number in an argument tuple, list items included."""
    out = []
    for arg in args:
        out += scalars(arg) if type(arg) in (list, tuple) else [arg] if type(arg) in (int, float) else []
    return out


def test_catalogue_has_five_or_more_per_family_on_both_splits():
    per_family = Counter(w.family for w in WRONG_REPAIRS)
    assert set(per_family) == set(FAMILIES) and min(per_family.values()) >= 5
    assert {get_task(w.task).split for w in WRONG_REPAIRS} == {"train", "heldout"}
    assert all(get_task(w.task).family == w.family and w.why for w in WRONG_REPAIRS)
    assert len({w.source for w in WRONG_REPAIRS}) == len(WRONG_REPAIRS)


@pytest.mark.parametrize("wrong", WRONG_REPAIRS, ids=lambda w: f"{w.task}: {w.why}")
def test_the_exposing_input_is_a_hidden_case_and_the_repair_differs_on_it(wrong):
    task = get_task(wrong.task)
    assert any(repr(c.args) == repr(wrong.exposing) for c in task.hidden + task.generated)
    assert not agree(result(wrong.source, task.name, wrong.exposing), result(task.fixed, task.name, wrong.exposing))


@pytest.mark.parametrize("wrong", WRONG_REPAIRS, ids=lambda w: f"{w.task}: {w.why}")
def test_the_repair_passes_the_fixed_cases_so_only_generated_ones_catch_it(wrong):
    task = get_task(wrong.task)
    fixed = task.visible + task.hidden
    assert all(agree(result(wrong.source, task.name, c.args), ("value", c.expected)) for c in fixed)


@pytest.mark.integration
def test_every_wrong_repair_gets_reward_0_and_every_correct_source_reward_1(grader):
    wrong = grader.grade_many([(get_task(w.task), w.source) for w in WRONG_REPAIRS])
    assert [w.task for w, g in zip(WRONG_REPAIRS, wrong) if g.hidden_pass or g.result.outcome == "infra_error"] == []
    for w, g in zip(WRONG_REPAIRS, wrong):  # and the exposing case is one that fails
        task = get_task(w.task)
        cases = task.visible + task.hidden + task.generated
        index = next(k for k, c in enumerate(cases) if repr(c.args) == repr(w.exposing))
        assert g.result.tests[index].status != "pass", w
    correct = grader.grade_many([(task, task.fixed) for task in ALL])
    assert [t.name for t, g in zip(ALL, correct) if not (g.hidden_pass and g.result.outcome == "pass")] == []


@pytest.mark.integration
@pytest.mark.parametrize("family", FAMILIES)
def test_a_wrong_repair_written_through_the_env_gets_reward_0(family, grader):
    wrong = next(w for w in WRONG_REPAIRS if w.family == family)
    env = BugFixEnv("all", grader=grader, allow_write=True)
    env.reset(options={"task": get_task(wrong.task)})
    env.step(f"<call> write\n{wrong.source}</call>")
    _, reward, terminated, _, info = env.step("<call> submit </call>")
    assert terminated and info["ops"] == ["write"] and reward == 0.0 and info["outcome"] == "fail"


def test_comparison_constants_and_their_neighbours_are_generated():
    assert comparison_constants(get_task("grown_ups").fixed) == (18,)
    assert comparison_constants(get_task("tally_odd").fixed) == (1, 2)
    for task in ALL:
        numeric = {ELEMENT.get(kind, kind) for kind in INPUTS[task.name]} & set(BOUNDARY)
        if not numeric:  # average_length: lists of strings
            continue
        deltas = DELTAS["int" if numeric <= set(INTEGRAL) else "num"]
        seen = {repr(v) for c in task.generated for v in scalars(c.args)}
        for constant in comparison_constants(task.fixed):
            assert {repr(constant + d) for d in deltas} <= seen, task.name


def test_boundary_classes_fit_and_the_inputs_are_deterministic():
    for task in ALL:
        assert len({repr(v) for v in boundary_inputs(INPUTS[task.name], task.fixed)}) < GENERATED, task.name
    first = generated_inputs("clamp", source=get_task("clamp").fixed)
    assert first == generated_inputs("clamp", source=get_task("clamp").fixed) and len(first) == GENERATED
    assert first != generated_inputs("clamp", seed="-check", source=get_task("clamp").fixed)


def test_the_boundary_values_are_where_float_arithmetic_fails():
    assert all(abs(v) > 2**53 and (float(v) != v) == (v % 2 == 1) for v in BIG_INTS)
    assert max(BIG_INTS) > sys.maxsize and min(BIG_INTS) < -(10**9)
    assert len({sum(xs) for xs in CANCELLING}) > 1 and {math.fsum(xs) for xs in CANCELLING} == {1.0}
    exact = [m * (m + 1) * (2 * m + 1) for m in range(1, LARGE_COUNT + 1)]
    assert [m for m, e in enumerate(exact, 1) if int(e / 6) != e // 6] == [LARGE_COUNT]
    for d in TIE_DIVISORS:  # an odd numerator puts 100 * p / d on a tie of round(., 1)
        assert any(round(100 * p / d, 1) != math.floor(1000 * p / d + 0.5) / 10 for p in range(1, 30, 2))


def test_each_correct_source_runs_its_generated_cases_well_within_the_cpu_limit():
    for task in ALL:
        namespace: dict = {}
        exec(compile(task.fixed, task.name, "exec"), namespace)  # noqa: S102
        start = time.process_time()
        for case in task.generated:
            namespace[task.name](*case.args)
        assert time.process_time() - start < Limits().timeout / 4, task.name
