"""The TokenPolicy seam: a Hugging Face GPT-2 plays BugFixEnv through the same collector and update as TinyAgent."""

import pytest
import torch

pytest.importorskip("transformers")

from pglab.envs.bugfix import make_tasks  # noqa: E402
from pglab.envs.text import BugFixText  # noqa: E402
from pglab.models import HFPolicy, TinyAgentPolicy, as_policy  # noqa: E402
from pglab.sampling.episodes import WordLayout, collect_episodes, episode_stats  # noqa: E402
from pglab.sampling.scoring import sequence_log_probs  # noqa: E402
from pglab.trainers.update import UpdateSpec, pg_update  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def gpt2(tok):
    """A random-weight GPT2LMHeadModel over the word tokenizer's vocabulary (no dropout)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=tok.vocab_size, n_positions=512, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config).eval()


def play(policy, tok, n=8, seed=0):
    tasks = make_tasks("train")[:4]
    picked = [i % len(tasks) for i in range(n)]
    return collect_episodes(policy, WordLayout(tok, max_call_tokens=4, max_obs_tokens=12),
                            [BugFixText(tasks) for _ in picked], picked, torch.Generator().manual_seed(seed))


def test_hf_gpt2_plays_bugfix_through_the_collector_with_its_kv_cache(gpt2, tok):
    cached = play(HFPolicy(gpt2, pad_id=tok.pad_id), tok)
    recomputed = play(HFPolicy(gpt2, pad_id=tok.pad_id, use_cache=False), tok)
    assert torch.equal(cached.ids, recomputed.ids) and torch.equal(cached.owner, recomputed.owner)
    torch.testing.assert_close(cached.logp_old, recomputed.logp_old, atol=1e-5, rtol=0)
    lengths = cached.attention_mask.sum(-1)
    assert lengths.min() < lengths.max(), "rows of one length do not exercise the per-row positions"
    scored = sequence_log_probs(HFPolicy(gpt2), cached).detach()
    torch.testing.assert_close(scored * cached.action_mask, cached.logp_old, atol=1e-5, rtol=0)
    stats = episode_stats(cached)
    assert 0 <= stats["valid_calls"] <= 1 and stats["turns"] >= 1


def test_an_update_runs_on_the_hf_batch_and_moves_only_through_policy_tokens(gpt2, tok):
    import copy

    model = copy.deepcopy(gpt2)
    batch = play(HFPolicy(model, pad_id=tok.pad_id), tok, n=8, seed=1)
    batch.rewards = torch.arange(8, dtype=torch.float32) / 8        # scores that differ, so the step has a signal
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    metrics = pg_update(HFPolicy(model), optimizer, batch, UpdateSpec("reinforce"), baseline=0.5)
    assert not metrics["skipped"] and metrics["grad_norm"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_logit_gradient_sits_exactly_on_policy_tokens(gpt2, tok):
    batch = play(HFPolicy(gpt2, pad_id=tok.pad_id), tok, n=4, seed=2)
    ids = batch.ids
    embeddings = gpt2.transformer.wte(ids).detach().requires_grad_(True)
    logits = gpt2(inputs_embeds=embeddings).logits
    logits.retain_grad()
    logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
    (logp * batch.action_mask[:, 1:]).sum().backward()
    touched = logits.grad.abs().amax(-1)[:, :-1] > 0                  # position t-1 predicts token t
    assert torch.equal(touched, batch.action_mask[:, 1:].bool())


def test_as_policy_adapts_each_model_and_refuses_others(cloned_agent, gpt2):
    assert isinstance(as_policy(cloned_agent), TinyAgentPolicy) and isinstance(as_policy(gpt2), HFPolicy)
    with pytest.raises(ValueError, match="not a token policy"):
        as_policy(torch.nn.Linear(2, 2))
