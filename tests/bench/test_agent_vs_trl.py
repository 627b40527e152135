"""bench agent-vs-trl: the environment through train-agent's trl: adapter, the timers, the chat template both sides
share, and a quick race that reports the ratio after both sides trained on the same episodes."""

import random

import pytest

from pglab.bench.agent_vs_trl import PHASES, Clock, VaultEnv, phases, scripted_play
from pglab.envs.adapters.trl import TRLEnv


def test_the_environment_pays_for_the_right_room_and_more_for_the_open_door():
    env = TRLEnv(VaultEnv(), "test")
    prompt = env.reset(3)
    room = env.env.room
    assert f"Open the {room} door" in prompt and "<call> unlock code </call>" in prompt
    seen, reward, done, _ = env.step(f"<call> lookup room={room} </call>")
    assert seen.startswith(f"the {room} code is") and reward == 0.5 and not done
    code = seen.split()[-1]
    assert env.step(f"<call> unlock code={int(code) % 99 + 10} </call>")[:3] == ("wrong code", 0.0, False)
    assert env.step(f"<call> unlock code={code} </call>")[:3] == ("the door opens", 0.5, False)
    assert env.step("done")[1:3] == (0.0, True)


def test_scripted_play_is_a_lookup_then_an_unlock():
    prompt, calls, observations = scripted_play(5, random.Random(0))
    assert [c.split()[1] for c in calls] == ["lookup", "unlock"] and len(observations) == 2
    assert prompt.startswith("Open the")


def test_the_clock_times_and_counts_without_changing_results():
    clock = Clock()
    double = clock.wrap(lambda x: 2 * x, "work", lambda result: {"items": result})
    assert double(3) == 6 and double(1) == 2
    env = clock.instrument(VaultEnv())
    env.reset(seed=1)
    assert env.lookup.__name__ == "lookup" and env.get_reward() == 0.0
    seconds, counts = clock.take()
    assert counts == {"items": 8} and set(seconds) == {"work", "environment"} and clock.take() == ({}, {})


def test_the_phases_add_up_to_the_step():
    side = {"step": 1.0, "seconds": {"rollout": 0.5, "environment": 0.1, "rollout+scores": 0.6,
                                     "scoring forward": 0.2}}
    split = phases(side)
    assert list(split) == list(PHASES) and sum(split.values()) == pytest.approx(1.0, abs=1e-12)
    assert split["generation"] == pytest.approx(0.4) and split["rewards and advantages"] == pytest.approx(0.1)


def test_both_sides_render_the_same_prompt_and_observation_ids(tmp_path):
    pytest.importorskip("trl")
    from pglab.bench.agent_vs_trl import build_agent
    from pglab.models.hf import load_causal_lm
    from pglab.sampling.text_episodes import TextLayout

    build_agent(tmp_path, seed=0, episodes=16, steps=1)
    _, tokenizer = load_causal_lm(str(tmp_path))
    env, adapted = VaultEnv(), TRLEnv(VaultEnv(), "test")
    trl_prompt = tokenizer.apply_chat_template([{"role": "user", "content": env.reset(seed=7)}],
                                               tools=[env.lookup, env.unlock], add_generation_prompt=True,
                                               tokenize=True, return_dict=True)["input_ids"]
    layout = TextLayout(tokenizer, chat=True)
    prompt = adapted.reset(7)
    assert layout.prompt_ids(prompt) == list(trl_prompt)
    call = [{"type": "function", "function": {"name": "lookup", "arguments": {}}}]
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": call}]
    tool = [{"role": "tool", "name": "lookup", "content": "the fig code is 42"}]
    before = tokenizer.apply_chat_template(dummy, tokenize=True, return_dict=False)
    after = tokenizer.apply_chat_template(dummy + tool, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert after[len(before):] == layout.observation_ids([{"role": "user", "content": prompt}],
                                                         "<call> lookup room=fig </call>", "the fig code is 42")


@pytest.mark.experiment
def test_a_quick_race_trains_both_sides_on_the_same_episodes_and_ends_with_the_ratio():
    pytest.importorskip("trl")
    from pglab.bench.agent_vs_trl import QUICK, run

    result = run(quick=True)
    assert list(result.metrics)[-1] == "ratio = pglab/TRL episodes/s" and result.metrics["ratio q1"] > 0
    sides = {row["side"]: row for row in result.tables["throughput"]}
    assert set(sides) == {"pglab", "TRL"}
    assert sides["pglab"]["episodes"] == sides["TRL"]["episodes"] == QUICK.episodes * QUICK.rounds
    for row in result.tables["rounds"]:
        assert row["pglab episodes"] == row["TRL episodes"] == QUICK.episodes
    for side in sides:
        shares = [r for r in result.tables["breakdown"] if r["side"] == side]
        assert [r["phase"] for r in shares] == list(PHASES) and all(r["median_s"] >= -1e-9 for r in shares)
        assert sides[side]["tokens_per_s"] > 0 and sides[side]["turns_per_episode"] >= 1
