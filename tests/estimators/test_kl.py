"""KL penalty: shaped rewards, k1/k2/k3, and the exact KL on an enumerable two-token toy."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pglab.estimators import exact_kl, kl_estimate, kl_shaped_rewards

VOCAB = 3


def toy_policies(seed):
    """First-token logits [V] and second-token logits [V, V] (conditioned on the first) for pi and ref."""
    gen = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    return (make(VOCAB), make(VOCAB, VOCAB)), (make(VOCAB), make(VOCAB, VOCAB))


def sequence_log_probs(policy, first, second):
    """log pi(x1) and log pi(x2 | x1) for one two-token sequence -> [2]."""
    l1, l2 = policy
    return torch.stack([torch.log_softmax(l1, -1)[first], torch.log_softmax(l2[first], -1)[second]])


def test_shaped_rewards_sum_to_score_minus_beta_log_ratio():
    gen = torch.Generator().manual_seed(0)
    logp, ref = torch.randn(4, 6, generator=gen), torch.randn(4, 6, generator=gen)
    mask = torch.tensor([[0, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 1, 0, 1, 0], [1, 0, 0, 0, 0, 0]]).float()
    score = torch.tensor([1.0, -2.0, 0.5, 3.0])
    rewards = kl_shaped_rewards(score, logp, ref, mask, beta=0.1)
    torch.testing.assert_close(rewards.sum(-1), score - 0.1 * ((logp - ref) * mask).sum(-1))
    assert (rewards[mask == 0] == 0).all()
    last = [3, 5, 4, 0]
    for b, t in enumerate(last):  # the score sits on the last policy token
        assert rewards[b, t].item() == pytest.approx(score[b].item() - 0.1 * (logp[b, t] - ref[b, t]).item(), abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_expected_summed_k1_is_the_exact_sequence_kl(seed):
    policy, reference = toy_policies(seed)
    expected_k1 = exact = 0.0
    for first, second in itertools.product(range(VOCAB), repeat=2):
        logp = sequence_log_probs(policy, first, second)
        ref_logp = sequence_log_probs(reference, first, second)
        prob = logp.sum().exp()
        expected_k1 += prob * kl_estimate(logp, ref_logp, "k1").sum()
        exact += prob * (logp.sum() - ref_logp.sum())
    # The chain rule: the sequence KL is KL at position 1 plus the expected KL at position 2.
    p1 = torch.softmax(policy[0], -1)
    chain = exact_kl(policy[0], reference[0]) + (p1 * exact_kl(policy[1], reference[1])).sum()
    assert expected_k1.item() == pytest.approx(chain.item(), abs=1e-12)
    assert exact.item() == pytest.approx(chain.item(), abs=1e-12)


def test_k3_is_unbiased_per_position():
    policy, reference = toy_policies(3)
    logp = torch.log_softmax(policy[0], -1)
    ref_logp = torch.log_softmax(reference[0], -1)
    expected = (logp.exp() * kl_estimate(logp, ref_logp, "k3")).sum()
    assert expected.item() == pytest.approx(exact_kl(policy[0], reference[0]).item(), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-30, 30, allow_nan=False), min_size=2, max_size=16))
def test_k3_and_k2_are_never_negative(values):
    half = len(values) // 2
    logp = torch.tensor(values[:half], dtype=torch.float64)
    ref = torch.tensor(values[half:2 * half], dtype=torch.float64)
    assert (kl_estimate(logp, ref, "k3") >= 0).all()
    assert (kl_estimate(logp, ref, "k2") >= 0).all()


def test_exact_kl_is_zero_for_identical_and_positive_otherwise():
    logits = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    assert exact_kl(logits, logits).abs().max() < 1e-6
    assert (exact_kl(logits, logits.flip(-1)) > 0).all()
