"""BugFixEnv: call parsing, malformed calls, observations, revert, budget, reward, info and gymnasium."""

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from pglab.envs.bugfix import (
    BUDGET,
    CALLS,
    ENV_ID,
    OP_NAMES,
    BugFixEnv,
    EpisodeRecord,
    Grader,
    Sandbox,
    get_task,
    make_tasks,
    parse_call,
    protocol,
)

pytestmark = pytest.mark.integration

MALFORMED = {
    "empty": "",
    "unknown tool": "<call> run </call>",
    "unknown op": "<call> edit fix_everything </call>",
    "missing op": "<call> edit </call>",
    "unclosed tag": "<call> read",
    "argument to read": "<call> read now </call>",
    "three words": "<call> edit fix_init now </call>",
    "10,000 characters": "<call> " + "a" * 10_000 + " </call>",
    "invalid UTF-8": b"<call> read \xff</call>",
    "not text": 42,
}


@pytest.fixture(scope="module")
def grader():
    grader = Grader(Sandbox(workers=1))
    yield grader
    grader.sandbox.close()


@pytest.fixture()
def env(grader):
    return BugFixEnv("all", grader=grader)


def test_parse_call_accepts_exactly_the_nine_calls():
    parsed = [parse_call(c) for c in CALLS]
    assert len(set(parsed)) == 9
    assert parsed[0] == ("read", None) and ("edit", "fix_init") in parsed and parsed[-1] == ("submit", None)
    assert parse_call("<call>test</call>") == ("test", None)
    assert parse_call(b"  <call>  edit   swap_minmax\n</call> ") == ("edit", "swap_minmax")
    assert all(parse_call(text) is None for text in MALFORMED.values())


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300),
                 st.builds(lambda a, b: f"<call> {a} {b} </call>", st.text(max_size=20), st.text(max_size=20))))
def test_parse_call_never_raises(text):
    call = parse_call(text)
    assert call is None or call in {parse_call(c) for c in CALLS}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_call_costs_a_turn_and_gets_an_error(env, name):
    env.reset(options={"task": "clamp"})
    observation, reward, terminated, truncated, info = env.step(MALFORMED[name])
    assert observation.startswith("error:") and len(observation) < 300
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["n_turns"] == 1 and info["n_invalid"] == 1 and env.observation_space.contains(observation)


def test_error_messages_name_the_fix(env):
    env.reset(options={"task": "clamp"})
    assert "tools: read, test, edit, revert, submit" in env.step("<call> run </call>")[0]
    assert "ops: " + ", ".join(OP_NAMES) in env.step("<call> edit fix_everything </call>")[0]
    assert "(missing)" in env.step("<call> edit </call>")[0]
    assert "'" not in env.step("<call> edit f(x); </call>")[0].split(";")[0]


def test_observations_of_each_call(env):
    task = get_task("mean")
    prompt, info = env.reset(options={"task": task})
    assert prompt == f"{task.issue}\n{protocol('mean', BUDGET)}" and info["n_turns"] == 0 and info["stop"] is None
    assert env.step("<call> read </call>")[0] == task.source
    report = env.step("<call> test </call>")[0]
    assert report.splitlines()[0] == "visible tests: 1 of 2 pass"
    assert "ERROR mean([]) == 0: ZeroDivisionError" in report
    assert env.step("<call> edit swap_minmax </call>")[0] == "no change"
    assert env.step("<call> edit add_zero_guard </call>")[0] == "ok"
    assert env.source == task.fixed
    observation, reward, terminated, truncated, info = env.step("<call> submit </call>")
    assert observation == "submitted" and reward == 1.0 and terminated and not truncated
    assert info == {"task": "mean", "n_turns": 5, "n_invalid": 0, "submitted": True, "hidden_pass": True,
                    "stop": "submit", "outcome": "pass", "ops": ["swap_minmax", "add_zero_guard"],
                    "isolation": env.grader.sandbox.isolation, "invalid": [False] * 5,
                    "actions": ["<call> read </call>", "<call> test </call>", "<call> edit swap_minmax </call>",
                                "<call> edit add_zero_guard </call>", "<call> submit </call>"]}
    assert EpisodeRecord.of(info) == env.record and env.record.passed


def test_revert_undoes_the_last_edit(env):
    task = get_task("clamp")
    env.reset(options={"task": task})
    assert env.step("<call> revert </call>")[0] == "no change"
    env.step("<call> edit swap_minmax </call>")
    env.step("<call> edit fix_comparison </call>")
    assert env.step("<call> revert </call>")[0] == "ok" and env.source == task.fixed
    assert env.step("<call> revert </call>")[0] == "ok" and env.source == task.source
    assert env.step("<call> submit </call>")[1] == 0.0


def test_budget_ends_the_episode_without_reward(env):
    task = get_task("product")
    env.reset(options={"task": task})
    calls = ["<call> edit fix_init </call>"] + ["<call> read </call>"] * (BUDGET - 1)
    for k, call in enumerate(calls):
        observation, reward, terminated, truncated, info = env.step(call)
        assert truncated == (k == BUDGET - 1) and not terminated
    assert observation.endswith("budget exhausted") and reward == 0.0
    assert info["stop"] == "budget" and not info["submitted"] and info["hidden_pass"]
    with pytest.raises(ValueError, match="reset"):
        env.step("<call> read </call>")


def test_wrong_submission_gets_no_reward(env):
    env.reset(options={"task": "count_at_least"})
    env.step("<call> edit fix_init </call>")
    _, reward, terminated, _, info = env.step("<call> submit </call>")
    assert reward == 0.0 and terminated and info["submitted"] and not info["hidden_pass"]
    assert info["outcome"] == "fail"


def test_reset_draws_tasks_with_the_seed(grader):
    env = BugFixEnv("train", grader=grader)
    first = [env.reset(seed=s)[1]["task"] for s in range(10)]
    assert first == [env.reset(seed=s)[1]["task"] for s in range(10)] and len(set(first)) > 3
    assert {env.reset()[1]["task"] for _ in range(40)} <= {t.name for t in env.tasks}


def test_gymnasium_registration_and_spaces(grader):
    env = gymnasium.make(ENV_ID, grader=grader)
    observation, info = env.reset(seed=0, options={"task": "spread"})
    assert env.observation_space.contains(observation)
    observation, *_ = env.step(env.action_space.sample())
    assert observation.startswith("error:") and env.observation_space.contains(observation)
    assert env.action_space.contains(CALLS[0])
    check_env(BugFixEnv(grader=grader), skip_render_check=True)


def test_first_observation_states_the_protocol(env):
    prompt, _ = env.reset(options={"task": "clamp"})
    for text in (*(c for c in CALLS if "edit" not in c), "<call> edit OP </call>", *OP_NAMES, f"budget : {BUDGET}"):
        assert text in prompt
    assert "write" not in prompt and len(prompt.split()) < 80
    writer = BugFixEnv("train", grader=env._grader(), allow_write=True, budget=4)
    prompt, _ = writer.reset(options={"task": "clamp"})
    assert "<call> write SOURCE </call>" in prompt and "budget : 4 calls" in prompt


def test_render_returns_the_episode_as_text(grader):
    env = gymnasium.make(ENV_ID, grader=grader, render_mode="ansi").unwrapped
    prompt, _ = env.reset(options={"task": "clamp"})
    env.step("<call> read </call>")
    env.step("<call> submit </call>")
    text = env.render()
    assert text.startswith(prompt) and "> <call> read </call>\n" + get_task("clamp").source in text
    assert text.endswith("> <call> submit </call>\nsubmitted\nreward 0 (fail)")
    assert BugFixEnv(grader=grader).render() is None


WRITE_CASES = {
    "indented block": ("<call> write\n    def clamp(x, lo, hi):\n        return max(lo, min(x, hi))\n</call>", "ok"),
    "inline": ("<call> write def clamp(x, lo, hi): return max(lo, min(x, hi)) </call>", "ok"),
    "no body": ("<call> write </call>", "error: the written source defines no function clamp"),
    "syntax error": ("<call> write def clamp(x:\n</call>", "error: the written source does not parse"),
    "another function": ("<call> write def g(): return 1 </call>", "error: the written source defines no function"),
    "null byte": ("<call> write def clamp(): return '\0' </call>", "error: the written source does not parse"),
}


@pytest.mark.parametrize("name", WRITE_CASES)
def test_write_replaces_the_program_after_the_parser_checks(grader, name):
    env = BugFixEnv("train", grader=grader, allow_write=True)
    env.reset(options={"task": "clamp"})
    call, expected = WRITE_CASES[name]
    observation, *_, info = env.step(call)
    assert observation.startswith(expected) and info["n_invalid"] == (expected != "ok")
    assert env.source == get_task("clamp").source if expected != "ok" else env.source.startswith("def clamp")
    assert parse_call(call, allow_write=True)[0] == "write"


def test_write_is_off_by_default_and_costs_a_turn(env, grader):
    env.reset(options={"task": "clamp"})
    observation, *_, info = env.step("<call> write def clamp(x, lo, hi): return x </call>")
    assert observation.startswith("error: malformed call") and info["n_invalid"] == 1
    assert env.step("<call> write clamp </call>")[0].startswith("error: unknown tool 'write'")
    assert env.action_space.max_length == 200 and parse_call("<call> write def f(): pass </call>") is None
    indented = "<call> write\n  def f():\n    pass\n</call>"
    assert parse_call(indented, allow_write=True) == ("write", "  def f():\n    pass")
    writer = BugFixEnv("train", grader=grader, allow_write=True)
    writer.reset(options={"task": "clamp"})
    assert writer.step("<call> write " + "x" * 5000 + " </call>")[0].startswith("error: the call is longer than 4000")
    assert writer.step("<call> revert </call>")[4]["n_turns"] == 2


def test_reset_refuses_held_out_names_unless_asked(grader):
    env = BugFixEnv("train", grader=grader)
    with pytest.raises(ValueError, match="held out.*allow_heldout"):
        env.reset(options={"task": "tally_odd"})
    assert env.reset(options={"task": "tally_odd", "allow_heldout": True})[1]["task"] == "tally_odd"
    assert env.reset(options={"task": get_task("tally_odd")})[1]["task"] == "tally_odd"
    assert BugFixEnv("heldout", grader=grader).reset(options={"task": "tally_odd"})[1]["task"] == "tally_odd"
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"tsk": "clamp"})
    with pytest.raises(ValueError, match="Task or a task name"):
        env.reset(options={"task": 3})


def test_constructor_errors():
    with pytest.raises(ValueError, match="budget"):
        BugFixEnv(budget=0)
    with pytest.raises(ValueError, match="budget"):
        BugFixEnv(budget=2.5)
    with pytest.raises(ValueError, match="at least one task"):
        BugFixEnv([])
    with pytest.raises(ValueError, match="heldout"):
        BugFixEnv("validation")
    with pytest.raises(ValueError, match="list of Task"):
        BugFixEnv(["clamp"])
    with pytest.raises(ValueError, match="render_mode"):
        BugFixEnv(render_mode="human")
    with pytest.raises(ValueError, match="grader must be a Grader"):
        BugFixEnv(grader=Sandbox)
    with pytest.raises(ValueError, match="allow_write"):
        BugFixEnv(allow_write="yes")
    assert make_tasks("train")


def test_malformed_calls_are_reported_in_the_record_and_priced_by_no_one(grader):
    env = BugFixEnv("all", grader=grader)
    env.reset(options={"task": "product"})
    _, reward, _, _, info = env.step("<call> edit edit fix_init </call>")
    assert reward == 0.0 and info["invalid"] == [True] and info["n_invalid"] == 1
    _, reward, _, _, info = env.step("<call> edit fix_init </call>")
    assert reward == 0.0 and info["invalid"] == [True, False]
    _, reward, terminated, _, info = env.step("<call> submit </call>")
    assert terminated and reward == 1.0 and EpisodeRecord.of(info).invalid == [True, False, False]
    assert EpisodeRecord.of({"task": "product"}) is None                       # another environment's info
