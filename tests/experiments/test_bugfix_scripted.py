"""Scripted policies, rollouts, statistics, exact pass rates (checked by enumeration), the experiment and CLI."""

import dataclasses
import itertools
import json

import pytest

from pglab.cli import main
from pglab.envs.bugfix import (
    CALLS,
    BugFixEnv,
    Episode,
    EpisodeRecord,
    Grader,
    Sandbox,
    exact_pass_rate,
    get_task,
    make_tasks,
    rollout_stats,
    scripted_policy,
    scripted_rollout,
)
from support.experiments import check_quick


@pytest.fixture(scope="module")
def grader():
    grader = Grader(Sandbox(workers=2))
    yield grader
    grader.sandbox.close()


@pytest.mark.integration
def test_oracle_reads_fixes_tests_and_submits_on_every_task(grader):
    env, oracle = BugFixEnv("all", grader=grader), scripted_policy("oracle")
    for task in env.tasks:
        episode = scripted_rollout(oracle, env, task)
        assert episode.calls == ("<call> read </call>", f"<call> edit {task.fix_op} </call>",
                                 "<call> test </call>", "<call> submit </call>")
        assert episode.reward == 1.0 and episode.observations[0] == task.source
        assert episode.observations[2].startswith(f"visible tests: {len(task.visible)} of {len(task.visible)} pass")


@pytest.mark.integration
def test_blind_guesses_one_op_then_submits(grader):
    env, blind = BugFixEnv("train", grader=grader), scripted_policy("blind", seed=3)
    episodes = [scripted_rollout(blind, env, "clamp") for _ in range(50)]
    assert all(len(e.calls) == 2 and e.calls[0].startswith("<call> edit ") and e.calls[1] == CALLS[-1]
               for e in episodes)
    assert len({e.calls[0] for e in episodes}) == 5
    assert all(e.reward == (e.info["ops"] == ["swap_minmax"]) for e in episodes)


@pytest.mark.integration
def test_random_play_is_uniform_over_the_nine_calls_and_reproducible(grader):
    env = BugFixEnv("train", grader=grader)
    first = scripted_rollout(scripted_policy("random", seed=7), env, "dot")
    assert scripted_rollout(scripted_policy("random", seed=7), env, "dot").calls == first.calls
    policy = scripted_policy("random", seed=1)
    calls = [policy.act(get_task("dot"), []) for _ in range(9000)]
    assert set(calls) == set(CALLS)
    assert all(abs(calls.count(c) / 9000 - 1 / 9) < 4 * (1 / 9 * 8 / 9 / 9000) ** 0.5 for c in CALLS)


@pytest.mark.integration
def test_exact_random_pass_rate_equals_enumeration_of_every_call_sequence(grader):
    budget = 3
    for name in ("clamp", "dot", "sum_to", "is_sorted"):
        task, env = get_task(name), BugFixEnv("all", budget=budget, grader=grader)
        total = 0.0
        for calls in itertools.product(CALLS, repeat=budget):
            env.reset(options={"task": task})
            for call in calls:
                _, reward, terminated, truncated, _ = env.step(call)
                if terminated or truncated:
                    break
            total += reward
        assert exact_pass_rate("random", task, grader, budget) == pytest.approx(total / len(CALLS) ** budget)


@pytest.mark.integration
def test_exact_rates_of_blind_and_oracle(grader):
    for task in make_tasks("all"):
        assert exact_pass_rate("blind", task, grader) == pytest.approx(0.2)
        assert exact_pass_rate("oracle", task, grader) == 1.0
    assert exact_pass_rate("oracle", get_task("clamp"), grader, budget=3) == 0.0


def test_rollout_stats():
    def played(reward, submitted, turns, invalid, outcome="fail"):
        record = EpisodeRecord(task="t", n_turns=turns, n_invalid=invalid, submitted=submitted,
                               hidden_pass=bool(reward), stop="submit" if submitted else "budget", actions=[], ops=[],
                               outcome=outcome, isolation="process", invalid=[])
        return Episode("", (), (), reward, dataclasses.asdict(record))

    stats = rollout_stats([played(1.0, True, 2, 0), played(0.0, True, 4, 1, "infra_error"), played(0.0, False, 6, 3)])
    assert stats == pytest.approx({"reward": 1 / 3, "pass_rate": 1 / 3, "valid_calls": 1 - 4 / 12,
                                   "submit_rate": 2 / 3, "turns": 4.0, "infra_error": 1 / 3})
    with pytest.raises(ValueError, match="at least one"):
        rollout_stats([])
    with pytest.raises(ValueError, match="BugFixEnv episodes"):
        rollout_stats([Episode("", (), (), 0.0, {"n_turns": 1})])


def test_unknown_policy_kind():
    with pytest.raises(ValueError, match="random, blind, oracle"):
        scripted_policy("greedy")
    with pytest.raises(ValueError, match="random, blind, oracle"):
        exact_pass_rate("greedy", get_task("clamp"))


@pytest.mark.experiment("bugfix-scripted")
def test_bugfix_scripted_quick_meets_the_acceptance_bands():
    result = check_quick("bugfix-scripted")
    assert result.passed, [c for c in result.checks if not c.passed]
    rows = {(r["policy"], r["split"]): r for r in result.tables["policies"]}
    assert rows["oracle", "train"]["pass_rate"] >= 0.98 and rows["oracle", "train"]["episodes"] == 20 * 16
    assert 0.05 <= rows["random", "train"]["pass_rate"] <= 0.15
    assert 0.15 <= rows["blind", "train"]["pass_rate"] <= 0.30
    assert len(result.tables["ops_by_family"]) == 25


@pytest.mark.experiment
def test_reproduce_cli_writes_the_report(tmp_path):
    assert main(["reproduce", "bugfix-scripted", "--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "result.json").read_text())
    assert report["passed"] and (tmp_path / "pass_rates.png").exists() and (tmp_path / "ops_by_family.csv").exists()
