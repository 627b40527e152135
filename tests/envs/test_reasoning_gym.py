"""--env reasoning-gym:TASK: a reasoning-gym task as a one-turn text environment scored by its own score_answer."""

import pytest

pytest.importorskip("reasoning_gym")

from pglab.envs.adapters.reasoning_gym import answer_of  # noqa: E402
from pglab.envs.text import env_factory  # noqa: E402
from pglab.runtime.options import SettingsError  # noqa: E402


@pytest.mark.parametrize("reply, answer", [("<call> submit -4 </call>", "-4"), ("<call> 17 </call>", "17"),
                                           ("  False\n", "False"), ("<call> submit </call>", "")])
def test_the_answer_is_the_reply_or_what_submit_holds(reply, answer):
    assert answer_of(reply) == answer


def test_a_task_is_posed_by_its_seed_and_scored_by_reasoning_gyms_own_scorer():
    import reasoning_gym

    env = env_factory("reasoning-gym:chain_sum")("train")
    prompt = env.reset(42)
    entry = reasoning_gym.create_dataset("chain_sum", seed=42, size=1)[0]
    assert prompt.startswith(entry["question"]) and prompt == env_factory("reasoning-gym:chain_sum")("x").reset(42)
    assert env.step(f"<call> submit {entry['answer']} </call>")[1:3] == (1.0, True)
    env.reset(42)
    wrong = str(int(entry["answer"]) + 1)
    assert env.step(f"<call> {wrong} </call>")[1] == 0.0
    env.reset(42)
    padded = f"{entry['answer']} or so"             # the scorer's own partial credit: len(answer) / len(reply)
    assert env.step(padded)[1] == pytest.approx(len(entry["answer"]) / len(padded), rel=1e-12)
    with pytest.raises(SettingsError, match="no such task; pass one of reasoning-gym's tasks, e.g. chain_sum"):
        env_factory("reasoning-gym:chainsum")


@pytest.mark.experiment
@pytest.mark.usefixtures("one_thread")
def test_train_agent_trains_on_a_reasoning_gym_task(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    import json

    from pglab.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train-agent", "--env", "reasoning-gym:chain_sum", "--quick", "--out", "run"]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["config"]["env"] == "reasoning-gym:chain_sum"
    rows = [json.loads(line) for line in (tmp_path / "run" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(row["turns"] == 1 for row in rows)          # one question, one reply
