"""GaussianBandit: closed forms against autograd, enumeration, and its own sampler."""

import math

import pytest
import torch

from pglab.envs.bandit import GaussianBandit

BANDIT = GaussianBandit([5.0, 6.0, 7.0, 8.0], sd=1.0)
THETA = torch.tensor([0.3, -0.5, 1.0, 0.2], dtype=torch.float64)


def test_exact_gradient_matches_autograd():
    theta = THETA.clone().requires_grad_(True)
    grad = torch.autograd.grad(BANDIT.exact_value(theta), theta)[0]
    torch.testing.assert_close(BANDIT.exact_gradient(THETA), grad)


def test_exact_total_variance_by_enumeration():
    """Enumerate the arms; the noise adds sd^2 |score|^2 in expectation."""
    pi = BANDIT.policy(THETA)
    for b in (0.0, 6.5, 10.0):
        second = sum(pi[a] * (((BANDIT.means[a] - b) ** 2 + 1.0) * ((torch.eye(4)[a] - pi) ** 2).sum())
                     for a in range(4))
        mean = sum(pi[a] * (BANDIT.means[a] - b) * (torch.eye(4, dtype=torch.float64)[a] - pi) for a in range(4))
        torch.testing.assert_close(mean, BANDIT.exact_gradient(THETA))
        assert BANDIT.exact_total_variance(THETA, b).item() == pytest.approx((second - mean.pow(2).sum()).item())


def test_optimal_baseline_minimises_the_variance():
    b_star = BANDIT.optimal_baseline(THETA).item()
    at_best = BANDIT.exact_total_variance(THETA, b_star).item()
    for delta in (-0.1, 0.1):
        assert BANDIT.exact_total_variance(THETA, b_star + delta).item() > at_best


def test_batched_theta():
    thetas = torch.stack([THETA, torch.zeros(4, dtype=torch.float64)])
    assert BANDIT.exact_value(thetas).shape == (2,)
    assert BANDIT.exact_total_variance(thetas, torch.tensor([0.0, 6.5])).tolist() == pytest.approx(
        [BANDIT.exact_total_variance(THETA, 0.0).item(), 1.375])


def test_sampler_frequencies_and_rewards():
    gen = torch.Generator().manual_seed(0)
    n = 100_000
    actions = BANDIT.sample_actions(THETA, gen, n)
    rewards = BANDIT.sample_rewards(actions, gen)
    pi = BANDIT.policy(THETA)
    freq = torch.bincount(actions, minlength=4).double() / n
    se = (pi * (1 - pi) / n).sqrt()
    assert ((freq - pi).abs() <= 4 * se).all()
    value, sd = BANDIT.exact_value(THETA).item(), rewards.std().item()
    assert abs(rewards.mean().item() - value) <= 4 * sd / math.sqrt(n)


def test_bad_arguments():
    with pytest.raises(ValueError, match="at least 2"):
        GaussianBandit([1.0])
    with pytest.raises(ValueError, match="logits"):
        BANDIT.exact_value(torch.zeros(3))
