"""Closed-form scores: course-ch7 exercises 7.2, 7.3 and 7.5, and agreement with autograd."""

import math

import pytest
import torch

from pglab.estimators import discounted_returns, gaussian_score, softmax_score


def test_exercise_7_2_softmax_score_with_temperature():
    theta = torch.zeros(3, dtype=torch.float64)
    assert softmax_score(theta, torch.tensor(2)).tolist() == pytest.approx([-1 / 3, -1 / 3, 2 / 3])
    for tau in (0.5, 0.1, 2.0):  # at theta = 0 the policy is uniform, so the score scales as 1 / tau
        assert softmax_score(theta, torch.tensor(2), tau).tolist() == pytest.approx([-1 / 3 / tau, -1 / 3 / tau,
                                                                                   2 / 3 / tau])


def test_softmax_score_matches_autograd_and_has_zero_mean():
    theta = torch.tensor([0.3, -1.2, 0.8, 0.1], dtype=torch.float64, requires_grad=True)
    for tau in (1.0, 0.7):
        pi = torch.softmax(theta / tau, -1)
        scores = softmax_score(theta.detach(), torch.arange(4), tau)
        for a in range(4):
            grad = torch.autograd.grad(torch.log_softmax(theta / tau, -1)[a], theta)[0]
            torch.testing.assert_close(scores[a], grad)
        torch.testing.assert_close((pi.detach()[:, None] * scores).sum(0), torch.zeros(4, dtype=torch.float64))


def test_exercise_7_3_gaussian_score_and_update():
    score = gaussian_score(torch.tensor(0.0), torch.tensor(0.0), torch.tensor(1.5))
    assert score.tolist() == pytest.approx([1.5, 1.25])
    delta = 0.1 * (3.0 - 1.0) * score
    assert delta.tolist() == pytest.approx([0.3, 0.25])


def test_gaussian_score_matches_autograd():
    mu = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    log_sigma = torch.tensor(-0.3, dtype=torch.float64, requires_grad=True)
    a = torch.tensor(1.1, dtype=torch.float64)
    logp = torch.distributions.Normal(mu, log_sigma.exp()).log_prob(a)
    grads = torch.autograd.grad(logp, (mu, log_sigma))
    torch.testing.assert_close(gaussian_score(mu.detach(), log_sigma.detach(), a), torch.stack(grads))


def test_exercise_7_5_three_weightings():
    """Two states A, B with logits (left, right); A: right, r = 1; B: left, r = 0; gamma 0.9, alpha 0.5."""
    rewards, gamma, alpha, b = torch.tensor([1.0, 0.0], dtype=torch.float64), 0.9, 0.5, 0.5
    scores = softmax_score(torch.zeros(2, 2, dtype=torch.float64), torch.tensor([1, 0]))  # [step, (left, right)]
    to_go = discounted_returns(rewards, gamma)
    weightings = {
        "total return": to_go[0].expand(2),
        "reward-to-go": to_go,
        "reward-to-go - b": to_go - b,
        "gamma^t (reward-to-go - b)": gamma ** torch.arange(2) * (to_go - b),
    }
    expected = {"total return": 0.62, "reward-to-go": 0.50, "reward-to-go - b": 0.44,
                "gamma^t (reward-to-go - b)": 0.4440}
    for name, weights in weightings.items():
        theta_b = alpha * weights[1] * scores[1]
        p_left = 1 / (1 + math.exp(-(theta_b[0] - theta_b[1]).item()))
        digits = 4 if name.startswith("gamma") else 2
        assert round(p_left, digits) == expected[name], name
