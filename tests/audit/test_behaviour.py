"""behaviour_pair: each spec kind against its definition written out here, combinations in one order, refusals."""

import itertools

import pytest
import torch

from pglab.audit.behaviour import NOISE_SEED_OFFSET, STALE_STEP_SIZE, behaviour_pair, describe, parse_spec
from pglab.envs.enumerable import EnumerablePolicy
from pglab.runtime.options import SettingsError


def make_policy(eos=False, vocab=4, seed=3):
    return EnumerablePolicy(prompts=2, vocab=vocab, length=2, eos=eos, seed=seed)


def sampler_logp(policy):
    """Log-probs [P, N, L, V] of every token at every position, as the policy's sampler draws them."""
    with torch.no_grad():
        return torch.log_softmax(policy.net(), -1)


def nucleus(probs, p):
    """Plain loop: the tokens of the smallest most-likely-first set whose mass reaches p (ties: lower index first)."""
    kept, mass = set(), 0.0
    for token in sorted(range(len(probs)), key=lambda v: (-probs[v], v)):
        kept.add(token)
        mass += probs[token]
        if mass >= p:
            return kept
    return kept


@pytest.mark.parametrize("spec", [None, "", " , "])
def test_no_spec_is_on_policy(spec):
    policy = make_policy()
    assert behaviour_pair(policy, spec, beta=0.1) == (policy, policy)
    assert describe(spec).startswith("on-policy")


def test_noise_adds_fixed_gaussian_noise_per_prefix_state_seeded_from_the_policy():
    policy = make_policy()
    audited, behaviour = behaviour_pair(policy, "noise:0.5", beta=0.1)
    assert audited is policy and behaviour.net.net is policy.net          # wraps the net itself
    generator = torch.Generator().manual_seed(NOISE_SEED_OFFSET + 3)
    noise = 0.5 * torch.randn(2, policy.replies.n_states, 4, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(behaviour.net(), policy.net() + noise[:, policy.replies.state])
    _, again = behaviour_pair(policy, "noise:0.5", beta=0.1)
    with torch.no_grad():
        assert torch.equal(again.net(), behaviour.net())
        policy.net.theta.add_(1.0)                                         # the sampler follows the parameters
        assert torch.equal(behaviour.net(), policy.net() + noise[:, policy.replies.state])


def test_stale_moves_the_audited_policy_k_exact_gradient_steps_and_keeps_the_behaviour():
    policy = make_policy()
    before = policy.net.theta.detach().clone()
    audited, behaviour = behaviour_pair(policy, "stale:2", beta=0.1)
    assert behaviour is policy and torch.equal(policy.net.theta, before)
    expected = policy.copy()
    for _ in range(2):
        grad, = torch.autograd.grad(expected.objective("reverse_kl", 0.1), [expected.net.theta])
        with torch.no_grad():
            expected.net.theta += STALE_STEP_SIZE * grad
    assert torch.allclose(audited.net.theta, expected.net.theta, rtol=0, atol=1e-15)
    assert float(audited.objective("reverse_kl", 0.1)) > float(policy.objective("reverse_kl", 0.1))
    unmoved, _ = behaviour_pair(policy, "stale:0", beta=0.1)
    assert unmoved is not policy and torch.equal(unmoved.net.theta, before)


def test_temperature_divides_the_logits():
    policy = make_policy()
    _, behaviour = behaviour_pair(policy, "temperature:0.7", beta=0.1)
    with torch.no_grad():
        assert torch.allclose(sampler_logp(behaviour), torch.log_softmax(policy.net() / 0.7, -1), atol=1e-14)


def test_top_k_keeps_the_k_most_likely_tokens_renormalised():
    policy = make_policy()
    _, behaviour = behaviour_pair(policy, "top-k:2", beta=0.1)
    probs, mu = sampler_logp(policy).exp(), sampler_logp(behaviour).exp()
    for index in itertools.product(*(range(d) for d in probs.shape[:-1])):
        row = probs[index]
        kept = set(sorted(range(4), key=lambda v: -float(row[v]))[:2])
        expected = torch.tensor([float(row[v]) if v in kept else 0.0 for v in range(4)], dtype=torch.float64)
        assert torch.allclose(mu[index], expected / expected.sum(), atol=1e-14)
    _, everything = behaviour_pair(policy, "top-k:4", beta=0.1)
    assert torch.allclose(sampler_logp(everything), sampler_logp(policy), atol=0)


@pytest.mark.parametrize("top_p", [0.3, 0.6, 0.9])
def test_top_p_keeps_the_smallest_set_reaching_p_renormalised(top_p):
    policy = make_policy(eos=True)
    _, behaviour = behaviour_pair(policy, f"top-p:{top_p}", beta=0.1)
    probs, mu = sampler_logp(policy).exp(), sampler_logp(behaviour).exp()
    for index in itertools.product(*(range(d) for d in probs.shape[:-1])):
        kept = nucleus(probs[index].tolist(), top_p)
        expected = torch.tensor([float(probs[index][v]) if v in kept else 0.0 for v in range(4)], dtype=torch.float64)
        assert torch.allclose(mu[index], expected / expected.sum(), atol=1e-14)
    with torch.no_grad():
        logp, _ = behaviour.sequence_logp()
    assert torch.allclose(logp.exp().sum(-1), torch.ones(2, dtype=torch.float64), atol=1e-14)
    assert (logp == -torch.inf).any() and not logp.isnan().any()


def test_top_p_of_one_and_noise_of_zero_change_nothing():
    policy = make_policy()
    for spec in ("top-p:1", "noise:0", "temperature:1"):
        _, behaviour = behaviour_pair(policy, spec, beta=0.1)
        assert torch.allclose(sampler_logp(behaviour), sampler_logp(policy), rtol=0, atol=0)


def test_combinations_act_in_one_order_whatever_the_spec_says():
    """noise, then temperature, then top-k, then top-p; stale moves the audited policy, not the sampler."""
    policy = make_policy(vocab=5)
    audited, behaviour = behaviour_pair(policy, "top-p:0.8,top-k:3,temperature:0.5,noise:0.3,stale:1", beta=0.1)
    _, reordered = behaviour_pair(policy, "stale:1,noise:0.3,temperature:0.5,top-k:3,top-p:0.8", beta=0.1)
    _, noisy = behaviour_pair(policy, "noise:0.3", beta=0.1)
    with torch.no_grad():
        logits = noisy.net() / 0.5
    probs = torch.softmax(logits, -1)
    mu = sampler_logp(behaviour).exp()
    for index in itertools.product(*(range(d) for d in probs.shape[:-1])):
        row = probs[index].tolist()
        top3 = sorted(range(5), key=lambda v: -row[v])[:3]
        within = [row[v] / sum(row[u] for u in top3) if v in top3 else 0.0 for v in range(5)]
        kept = nucleus(within, 0.8)
        expected = torch.tensor([within[v] if v in kept else 0.0 for v in range(5)], dtype=torch.float64)
        assert torch.allclose(mu[index], expected / expected.sum(), atol=1e-13)
    assert torch.equal(sampler_logp(reordered), sampler_logp(behaviour))
    assert not torch.equal(audited.net.theta, policy.net.theta) and behaviour.net.net is policy.net
    assert describe("top-p:0.8,stale:1") == "sampled by stale:1, top-p:0.8"


def test_parse_spec_reads_each_kind():
    assert parse_spec("noise:0.5, stale:2,TOP-P:0.9,top-k:3,temperature:1.5") == {
        "noise": 0.5, "stale": 2, "top-p": 0.9, "top-k": 3, "temperature": 1.5}


@pytest.mark.parametrize("spec", ["noise", "noise:", "noise:abc", "fuzz:1", "top-p:0", "top-p:1.5", "top-k:0",
                                  "top-k:1.5", "temperature:0", "temperature:-1", "stale:-1", "stale:1.5",
                                  "noise:nan", "noise:1,noise:2", "stale 2"])
def test_a_bad_spec_is_refused_in_one_line_naming_the_syntax(spec):
    with pytest.raises(SettingsError) as err:
        behaviour_pair(make_policy(), spec, beta=0.1)
    assert "KIND:VALUE" in str(err.value) and "\n" not in str(err.value)
