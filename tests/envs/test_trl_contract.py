"""--env trl:module:factory: a class written for TRL GRPOTrainer's environment_factory as a text-turn environment."""

import textwrap

import pytest

from pglab.envs.adapters.trl import TRLEnv, tools_of
from pglab.envs.text import env_factory
from pglab.runtime.options import SettingsError

# Written as TRL's docs write an environment: reset(**kwargs) returns the task, the public methods with type hints
# and Google docstrings are the tools, get_reward() is the rollout's reward, the task drawn with Python's random.
COUNTER = textwrap.dedent('''
    import random


    class CounterEnv:
        def reset(self, **kwargs) -> str:
            self.counter, self.target, self.reward = 0, random.randint(2, 9), 0.0
            return f"Bring the counter from 0 to {self.target}."

        def increment(self, step: int) -> int:
            """
            Add a value to the counter.

            Args:
                step: The value to add.

            Returns:
                The counter after the addition.
            """
            self.counter += step
            self.reward = float(self.counter == self.target)
            return self.counter

        def shout(self, message: str) -> str:
            """
            Say something.

            Args:
                message: What to say.
            """
            return message.upper()

        def divide(self, by: float) -> dict:
            """
            Divide the counter.

            Args:
                by: The divisor.
            """
            self.counter = self.counter / by
            return {"counter": self.counter}

        def odd(self) -> object:
            """Return something that cannot be shown."""
            class Unprintable:
                def __str__(self):
                    raise RuntimeError("no text")
            return Unprintable()

        def get_reward(self) -> float:
            return self.reward


    def reward_func(completions, environments, **kwargs):
        return [env.reward * 2 for env in environments]


    class NoReward:
        def reset(self, **kwargs):
            return "hi"
''')


@pytest.fixture
def counter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trl_counter_env.py").write_text(COUNTER)
    return "trl:trl_counter_env:CounterEnv"


def test_tools_are_the_public_methods_as_trl_lists_them(counter):
    env = env_factory(counter)("train")
    assert list(tools_of(env.env)) == ["divide", "increment", "odd", "shout"]
    prompt = env.reset(3)
    assert prompt.startswith("Bring the counter from 0 to ") and "<call> increment step </call>: Add a value" in prompt
    assert env.tools()[1]["function"]["parameters"]["properties"] == {"step": {"type": "integer"}}
    transformers = pytest.importorskip("transformers")
    # TRL renders each tool through transformers' schema reader: the test's class is one TRL accepts
    assert transformers.utils.get_json_schema(env.env.increment)["function"]["name"] == "increment"


def test_one_seed_poses_one_task_and_leaves_the_global_generators_alone(counter):
    import random

    make = env_factory(counter)
    random.seed(11)
    before = random.random()
    random.seed(11)
    first, again, other = make("train"), make("train"), make("train")
    assert first.reset(5) == again.reset(5)
    assert {other.reset(s) for s in range(20)} != {first.reset(5)}
    assert random.random() == before


@pytest.mark.parametrize("call, observation", [
    ("<call> increment 2 </call>", "2"),
    ("<call> increment step=3 </call>", "3"),
    ("<call> shout hello there </call>", "HELLO THERE"),
    ("<call> divide 2 </call>", "{'counter': 0.0}"),
    ("<call> increment </call>", "error: increment needs step: write <call> increment step </call>"),
    ("<call> increment 1 2 </call>", "error: increment takes 1 argument(s), got 2: write <call> increment step"),
    ("<call> increment two </call>", "error: argument step must be int, got 'two'"),
    ("<call> divide 0 </call>", "error: divide raised ZeroDivisionError: float division by zero"),
    ("<call> odd </call>", "error: odd raised RuntimeError: no text"),
    ("<call> fly </call>", "error: unknown tool fly; tools: divide, increment, odd, shout"),
    ("<call> </call>", "error: an empty call; tools: divide, increment, odd, shout"),
    ('<call> shout "open </call>', 'error: No closing quotation in the call; quote an argument that holds spaces'),
])
def test_a_call_runs_its_method_and_a_bad_call_is_an_observation_not_a_crash(counter, call, observation):
    env = env_factory(counter)("train")
    env.reset(0)
    answer, reward, done, info = env.step(call)
    assert answer.startswith(observation) and reward == 0.0 and done is False and info == {}


def test_the_reward_is_trls_read_after_every_turn_and_summed_to_its_last_value(counter):
    env = env_factory(counter)("train")
    env.reset(1)
    target = env.env.target
    steps = [env.step(f"<call> increment {target} </call>"), env.step("<call> increment 1 </call>"),
             env.step(f"<call> increment {-1} </call>"), env.step("the counter is there")]
    assert [s[1] for s in steps] == [1.0, -1.0, 1.0, 0.0]
    assert [s[2] for s in steps] == [False, False, False, True] and sum(s[1] for s in steps) == 1.0
    with_func = env_factory(counter + ":reward_func")("train")
    with_func.reset(1)
    assert with_func.step(f"<call> increment {target} </call>")[1] == 2.0


def test_an_environment_that_breaks_the_contract_is_refused_in_one_line(counter):
    with pytest.raises(SettingsError, match="has no get_reward"):
        env_factory("trl:trl_counter_env:NoReward")
    with pytest.raises(SettingsError, match="cannot import Nothing from trl_counter_env"):
        env_factory("trl:trl_counter_env:Nothing")
    env = env_factory(counter)("train")
    env.reset(0)
    env.env.reward = "high"
    with pytest.raises(SettingsError, match="the reward must be a finite float"):
        env.step("<call> shout a </call>")
    env.env.reward = None
    assert env.step("<call> shout a </call>")[1] == 0.0                # TRL's NaN-sum counts a None reward as 0
    with pytest.raises(SettingsError, match="has no reset method"):
        TRLEnv(object(), "--env trl:x:y")


@pytest.mark.experiment
@pytest.mark.usefixtures("one_thread")
def test_train_agent_trains_a_trl_environment_unchanged(counter, tmp_path, capsys):
    pytest.importorskip("transformers")
    import json

    from pglab.cli import main

    out = tmp_path / "run"
    assert main(["train-agent", "--env", counter, "--quick", "--episodes-per-step", "4", "--max-call-tokens", "6",
                 "--max-obs-tokens", "16", "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["config"]["env"] == counter and len((out / "train.jsonl").read_text().splitlines()) == 3
    episodes = (out / "report.md").read_text()
    assert "Bring the counter from 0 to" in episodes and "<call> increment step </call>" in episodes
