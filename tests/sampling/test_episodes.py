"""The episode collector: the KV-cache path against recomputing every prefix, the token layout, log-probs, stats."""

import pytest
import torch

from pglab.batch import POLICY, PROMPT, TOOL
from pglab.envs.bugfix import BugFixEnv, make_tasks, parse_call, scripted_policy, scripted_rollout
from pglab.envs.text import BugFixText
from pglab.models import TinyAgentPolicy
from pglab.sampling.episodes import (
    EpisodeLog,
    WordLayout,
    collate,
    collect_episodes,
    encode_episode,
    episode_stats,
    render_episode,
)
from pglab.sampling.scoring import length_chunks, sequence_log_probs
from pglab.trainers.episodes import format_costs

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("one_thread")]


def play(cloned_agent, tok, n, seed, use_cache=True, max_call_tokens=6):
    tasks = make_tasks("train")
    picked = [i % len(tasks) for i in range(n)]
    return collect_episodes(TinyAgentPolicy(cloned_agent, use_cache=use_cache), WordLayout(tok, max_call_tokens),
                            [BugFixText(tasks) for _ in picked], picked, torch.Generator().manual_seed(seed))


def test_kv_cache_episodes_equal_recomputing_every_prefix(cloned_agent, tok):
    fast, slow = play(cloned_agent, tok, 12, seed=3), play(cloned_agent, tok, 12, seed=3, use_cache=False)
    assert torch.equal(fast.ids, slow.ids) and torch.equal(fast.owner, slow.owner)
    assert torch.allclose(fast.logp_old, slow.logp_old, atol=1e-5)
    recomputed = sequence_log_probs(cloned_agent, fast).detach()
    assert torch.allclose(recomputed * fast.action_mask, fast.logp_old, atol=1e-5)


def test_layout_matches_the_env_transcript(cloned_agent, tok):
    batch = play(cloned_agent, tok, 10, seed=4)
    assert torch.equal(batch.action_mask, (batch.owner == POLICY).float()) and not batch.action_mask[:, 0].any()
    for b, info in enumerate(batch.info):
        ids, owner = batch.ids[b].tolist(), batch.owner[b].tolist()
        assert ids[0] == tok.start_id and owner[0] == PROMPT
        calls, current = [], []
        for i, o in zip(ids, owner):
            if o == POLICY:
                current.append(i)
            elif current:
                calls.append(tok.decode(current))
                current = []
        calls += [tok.decode(current)] if current else []
        assert calls == info.calls == info.record.actions and len(calls) == info.record.n_turns
        tool_starts = [i for i, (t, o) in enumerate(zip(ids, owner)) if o == TOOL and t == tok.obs_id]
        assert len(tool_starts) == info.record.n_turns - 1                  # no answer after the last call
        assert float(batch.rewards[b]) == float(info.record.passed)
        assert render_episode(info, float(batch.rewards[b])).startswith("reward")


def test_scripted_episode_encoding_matches_the_collected_layout(tok):
    env = BugFixEnv(make_tasks("train"))
    episode = scripted_rollout(scripted_policy("oracle"), env, "clamp")
    ids, owner = encode_episode(tok, episode)
    policy = [i for i, o in zip(ids, owner) if o == POLICY]
    assert tok.decode(policy) == " ".join(episode.calls)
    assert tok.decode(ids).startswith("<start> Issue : clamp")
    log = EpisodeLog(episode.prompt, calls=list(episode.calls), observations=list(episode.observations),
                     info=dict(episode.info))
    batch = collate([(ids, owner)], [episode.reward], tok.pad_id, info=[log])
    stats = episode_stats(batch)
    assert stats == {"reward": 1.0, "pass_rate": 1.0, "valid_calls": 1.0, "submit_rate": 1.0, "turns": 4.0,
                     "action_tokens": 13.0}


def test_chunked_log_probs_equal_one_padded_pass(cloned_agent, tok):
    batch = play(cloned_agent, tok, 9, seed=5)
    whole = sequence_log_probs(cloned_agent, batch.ids)
    chunked = sequence_log_probs(cloned_agent, batch, chunk_tokens=64)
    assert torch.allclose(whole * batch.attention_mask, chunked * batch.attention_mask, atol=1e-5)
    lengths = torch.tensor([5, 50, 7, 49, 1])
    chunks = length_chunks(lengths, 100)
    assert sorted(torch.cat(chunks).tolist()) == [0, 1, 2, 3, 4] and chunks[0].tolist() == [1, 3]
    grouped = length_chunks(torch.tensor([5, 50, 7, 9, 1, 2]), 100, group_size=2)     # groups' longest: 50, 9, 2
    assert [c.tolist() for c in grouped] == [[0, 1], [2, 3, 4, 5]]


def test_finished_rows_leave_the_batch(cloned_agent, tok):
    seen = []
    hook = cloned_agent.register_forward_pre_hook(lambda m, args, kwargs: seen.append(args[0].shape[0]),
                                                  with_kwargs=True)
    try:
        batch = play(cloned_agent, tok, 8, seed=6)
    finally:
        hook.remove()
    turns = [len(log.calls) for log in batch.info]
    assert min(turns) < max(turns)
    assert seen[0] == 8 and min(seen) < 8


def test_a_format_cost_sits_on_each_malformed_calls_last_token_not_in_the_score(cloned_agent, tok):
    plain = play(cloned_agent, tok, 24, seed=5)
    batch = format_costs(plain, 0.5)
    assert torch.equal(batch.ids, plain.ids) and torch.equal(batch.rewards, plain.rewards)
    assert sum(log.record.n_invalid for log in batch.info) > 0 and plain.token_rewards is None
    assert format_costs(plain, 0.0) is plain
    for b, log in enumerate(batch.info):
        owner = batch.owner[b]
        last_of_call = [t for t in range(len(owner)) if owner[t] == POLICY and (t + 1 == len(owner)
                                                                               or owner[t + 1] != POLICY)]
        assert last_of_call == log.call_ends
        costs = batch.token_rewards[b, last_of_call]
        assert costs.tolist() == [-0.5 if parse_call(call) is None else 0.0 for call in log.calls]
        assert float(batch.token_rewards[b].sum()) == -0.5 * log.record.n_invalid
