"""The enumerable policy: its reply set, probabilities, and exact objectives against closed forms."""

import pytest
import torch

from pglab.envs.enumerable import OBJECTIVES, EnumerablePolicy, enumerate_replies


def flat_grad(value, params):
    return torch.cat([g.flatten() for g in torch.autograd.grad(value, params)])


def test_reply_counts_and_lengths():
    fixed = enumerate_replies(3, 2)
    assert len(fixed.tokens) == 9 and fixed.n_states == 1 + 3 and (fixed.lengths == 2).all()
    ended = enumerate_replies(3, 3, eos=True)
    # 1 reply of one token (the end), 2 of two (content + end), 2 * 2 * 3 of three (the last token is free)
    assert sorted(ended.lengths.tolist()) == [1.0] + [2.0] * 2 + [3.0] * 12
    assert ended.n_states == 1 + 2 + 4
    ends = ended.tokens[ended.lengths < 3].gather(1, (ended.lengths[ended.lengths < 3].long() - 1)[:, None])
    assert (ends == 2).all()


@pytest.mark.parametrize("parametrisation", ["table", "gpt2"])
def test_probabilities_sum_to_one_and_kl_is_positive(parametrisation):
    policy = EnumerablePolicy(prompts=2, vocab=3, length=2, eos=True, parametrisation=parametrisation, seed=1)
    logp, ref = policy.sequence_logp()
    assert torch.allclose(logp.exp().sum(-1), torch.ones(2, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(ref.exp().sum(-1), torch.ones(2, dtype=torch.float64), atol=1e-12)
    logp = logp.detach()
    assert float((logp.exp() * (logp - ref)).sum(-1).min()) > 0.01


def test_objective_is_the_brute_force_sum():
    policy = EnumerablePolicy(prompts=3, vocab=2, length=2, seed=2)
    logp, ref = (x.detach() for x in policy.sequence_logp())
    p = logp.exp()
    beta = 0.7
    expected = ((p * policy.rewards).sum(-1) - beta * (p * (logp - ref)).sum(-1)).mean()
    assert float(policy.objective("reverse_kl", beta).detach()) == pytest.approx(float(expected), abs=1e-12)
    forward = ((p * policy.rewards).sum(-1) - beta * (ref.exp() * (ref - logp)).sum(-1)).mean()
    assert float(policy.objective("forward_kl", beta).detach()) == pytest.approx(float(forward), abs=1e-12)
    assert float(policy.prompt_objectives(beta).sum().detach()) == pytest.approx(float(expected), abs=1e-12)


def test_tokenwise_objectives_are_the_sequence_ones_for_one_token():
    """With one token per reply the per-state KL is the sequence KL, in both directions."""
    policy = EnumerablePolicy(prompts=2, vocab=4, length=1, seed=3)
    params = policy.parameters()
    for direction in ("reverse", "forward"):
        a = flat_grad(policy.objective(f"tokenwise_{direction}_kl", 0.5), params)
        b = flat_grad(policy.objective(f"{direction}_kl", 0.5), params)
        assert torch.allclose(a, b, atol=1e-12)
    long = EnumerablePolicy(prompts=2, vocab=3, length=2, seed=3)
    a = flat_grad(long.objective("tokenwise_reverse_kl", 0.5), long.parameters())
    b = flat_grad(long.objective("reverse_kl", 0.5), long.parameters())
    assert (a - b).norm() > 1e-3 * b.norm()


def test_tokenwise_value_is_the_sequence_kl():
    """sum_s d(s) KL(pi(.|s) || ref(.|s)) = KL of the sequences (the chain rule of KL), at any length."""
    policy = EnumerablePolicy(prompts=2, vocab=3, length=3, eos=True, seed=4)
    assert float(policy.objective("tokenwise_reverse_kl", 1.0).detach()) == pytest.approx(
        float(policy.objective("reverse_kl", 1.0).detach()), abs=1e-12)


def test_optimal_policy_maximises_j():
    """J(pi*) = beta * mean_x log Z_x, and no other reply distribution does better (a perturbation loses)."""
    policy = EnumerablePolicy(prompts=2, vocab=2, length=2, seed=5)
    beta = 0.5
    star = policy.optimal_log_policy(beta)
    _, ref = policy.sequence_logp()
    log_z = torch.logsumexp(ref + policy.rewards / beta, -1)

    def j(logq):
        return float((logq.exp() * (policy.rewards - beta * (logq - ref))).sum(-1).mean())

    assert j(star) == pytest.approx(float(beta * log_z.mean()), abs=1e-12)
    other = torch.log_softmax(star + 0.1 * torch.randn(star.shape, generator=torch.Generator().manual_seed(0),
                                                       dtype=torch.float64), -1)
    assert j(other) < j(star)
    assert policy.kl_to(star) > 0


def test_gpt2_is_seeded_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = EnumerablePolicy(parametrisation="gpt2", seed=7)
    after = torch.rand(1)
    b = EnumerablePolicy(parametrisation="gpt2", seed=7)
    assert torch.equal(before, after)
    assert torch.equal(a.sequence_logp()[0].detach(), b.sequence_logp()[0].detach())


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="vocab >= 3"):
        enumerate_replies(2, 2, eos=True)
    with pytest.raises(ValueError, match="table' or 'gpt2"):
        EnumerablePolicy(parametrisation="lstm")
    with pytest.raises(ValueError, match=r"\[P, N\]"):
        EnumerablePolicy(rewards=torch.zeros(3))
    with pytest.raises(ValueError, match="one of"):
        EnumerablePolicy().objective("entropy")
    assert set(OBJECTIVES) >= {"reverse_kl", "forward_kl", "reward_only"}
