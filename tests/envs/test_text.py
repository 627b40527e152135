"""The text-turn protocol's checks: what gymnasium-style environments return is accepted, the rest is one line."""

import numpy as np
import pytest

from pglab.envs.text import check_reset, check_step, env_factory
from pglab.runtime.options import SettingsError

USER_ENV = '''
import numpy as np


class Counter:
    def reset(self, seed):
        self.turns = 0
        return f"task {seed}", {"seed": seed}                  # gymnasium's (observation, info)

    def step(self, text):
        self.turns += 1
        return "ok", np.float32(0.5), np.bool_(self.turns == 2), {}


def make_env():
    return Counter()
'''


def test_numpy_rewards_and_flags_are_accepted_as_python_numbers():
    observation, reward, done, info = check_step(("x", np.float32(0.25), np.bool_(True), {}), "Env.step")
    assert (observation, reward, done, info) == ("x", 0.25, True, {})
    assert type(reward) is float and type(done) is bool
    assert check_step(("x", np.int64(2), False, {}), "Env.step")[1] == 2.0


@pytest.mark.parametrize("answer, words", [
    (("x", 1.0), "got a tuple of 2"),
    (("x", "1", False, {}), "its reward is str '1'"),
    (("x", True, False, {}), "its reward is bool True"),
    (("x", 1.0, "yes", {}), "its done is str 'yes'"),
    (("x", 1.0, 1, {}), "its done is int 1"),
    ((3, 1.0, False, {}), "its observation is int 3"),
    (("x", 1.0, False, None), "its info is NoneType None"),
    (("x", float("nan"), False, {}), "its reward nan is not finite"),
])
def test_anything_else_is_one_line_naming_the_wrong_part(answer, words):
    with pytest.raises(SettingsError, match="Env.step: step\\(text\\) must return \\(observation: str, reward: float, "
                                            "done: bool, info: dict\\)") as caught:
        check_step(answer, "Env.step")
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_reset_may_return_gymnasiums_observation_and_info():
    assert check_reset("task", "Env") == check_reset(("task", {"seed": 1}), "Env") == "task"
    with pytest.raises(SettingsError, match="reset\\(seed\\) must return the first observation as str"):
        check_reset(("task", "not a dict"), "Env")


def test_a_users_gymnasium_style_environment_plays_through_the_factory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "counter_env.py").write_text(USER_ENV)
    env = env_factory("counter_env:make_env")("train")
    assert env.reset(3) == "task 3"
    assert env.step("a") == ("ok", 0.5, False, {}) and env.step("b") == ("ok", 0.5, True, {})
    assert not hasattr(env, "tools")
