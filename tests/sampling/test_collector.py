"""One collector over a layout: any text-turn environment in TinyAgent's word layout, one reward semantics (the sum
of the step rewards), how episodes end, and one episode_stats for BugFixEnv's episodes and others'."""

import pytest
import torch

from pglab.envs.bugfix import make_tasks
from pglab.envs.text import BugFixText
from pglab.models import TinyAgentPolicy
from pglab.sampling.episodes import WordLayout, collect_episodes, episode_stats

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("one_thread")]


class Counting:
    """A user's environment: a reward of 0.25 at every call, done after ``turns`` calls (never when 0)."""

    def __init__(self, turns):
        self.turns = turns

    def reset(self, seed):
        self.calls = 0
        return f"task {seed}"

    def step(self, text):
        self.calls += 1
        return "read", 0.25, self.calls == self.turns, {"calls": self.calls}


def play(agent, tok, envs, seeds, **options):
    return collect_episodes(TinyAgentPolicy(agent), WordLayout(tok, max_call_tokens=4), envs, seeds,
                            torch.Generator().manual_seed(0), **options)


def test_the_reward_is_the_sum_of_the_step_rewards_and_every_end_is_named(cloned_agent, tok):
    batch = play(cloned_agent, tok, [Counting(3) for _ in range(4)], [0, 0, 1, 1])
    assert batch.rewards.tolist() == [0.75] * 4 and batch.group.tolist() == [0, 0, 1, 1]
    assert all(log.end == "env" and len(log.calls) == 3 and log.info == {"calls": 3} for log in batch.info)
    assert all(log.record is None for log in batch.info)
    capped = play(cloned_agent, tok, [Counting(0) for _ in range(2)], [5, 6], max_turns=2)
    assert capped.rewards.tolist() == [0.5, 0.5] and [log.end for log in capped.info] == ["turns", "turns"]


def test_calls_stop_at_the_layouts_closing_or_cap_and_end_where_logged(cloned_agent, tok):
    batch = play(cloned_agent, tok, [Counting(2) for _ in range(6)], range(6))
    for b, log in enumerate(batch.info):
        for ids, stop, end in zip(log.call_ids, log.stops, log.call_ends):
            assert stop == ("closing" if ids[-1] == tok.end_call_id else "cap") and len(ids) <= 4
            assert batch.ids[b, end - len(ids) + 1:end + 1].tolist() == ids
            assert bool(batch.action_mask[b, end - len(ids) + 1:end + 1].all())


def test_one_episode_stats_for_bugfix_and_other_episodes(cloned_agent, tok):
    tasks = make_tasks("train")
    bugfix = play(cloned_agent, tok, [BugFixText(tasks) for _ in range(4)], range(4))
    assert list(episode_stats(bugfix)) == ["reward", "pass_rate", "valid_calls", "submit_rate", "turns",
                                           "action_tokens"]
    assert all(float(r) == float(log.record.passed) for r, log in zip(bugfix.rewards, bugfix.info))
    other = play(cloned_agent, tok, [Counting(2) for _ in range(2)], [0, 1])
    stats = episode_stats(other, call_stops=True)
    assert list(stats) == ["reward", "turns", "closed_calls", "capped_calls", "eos_ends", "action_tokens"]
    assert stats["turns"] == 2 and stats["eos_ends"] == 0 and stats["closed_calls"] + stats["capped_calls"] == 1


class Verbose(Counting):
    """Answers every call with more words than the policy's context holds."""

    def step(self, text):
        return " ".join(["read"] * 400), 0.0, False, {}


def test_an_answer_longer_than_the_context_ends_the_episode_within_it(cloned_agent, tok):
    policy = TinyAgentPolicy(cloned_agent)
    layout = WordLayout(tok, max_call_tokens=4, max_obs_tokens=1000)
    batch = collect_episodes(policy, layout, [Verbose(0) for _ in range(2)], [0, 1], torch.Generator().manual_seed(0))
    assert [log.end for log in batch.info] == ["length", "length"]
    assert batch.ids.shape[1] == policy.max_length
    assert all(ids[-1] == batch.ids[b, end] for b, log in enumerate(batch.info)
               for ids, end in zip(log.call_ids, log.call_ends))
