"""The agents-ch6 experiments at reduced size, and the probe helpers they share."""

import pytest
import torch

from pglab.batch import TokenBatch
from pglab.estimators import discounted_returns
from pglab.trainers.probe import call_ends, call_starts, step_cost_rewards


def test_call_costs_and_reward_to_go():
    # prompt, call of 2 tokens, tool, call of 3 tokens, pad
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 1, 1, 0]], dtype=torch.float32)
    zeros = torch.zeros(1, 9, dtype=torch.long)
    batch = TokenBatch(ids=zeros, attention_mask=zeros + 1, action_mask=mask, owner=zeros,
                       group=torch.zeros(1, dtype=torch.long), rewards=torch.tensor([1.0]))
    assert call_ends(mask).tolist() == [[0, 0, 1, 0, 0, 0, 0, 1, 0]]
    assert call_starts(mask).tolist() == [[0, 1, 0, 0, 0, 1, 0, 0, 0]]
    rewards = step_cost_rewards(batch, 0.1)
    assert torch.allclose(rewards, torch.tensor([[0, 0, -0.1, 0, 0, 0, 0, 0.9, 0]]))
    to_go = discounted_returns(rewards, 1.0, mask=mask)
    assert torch.allclose(to_go[0, 1], rewards.sum()) and torch.allclose(to_go[0, 5], torch.tensor(0.9))
    assert to_go[0, 3] == 0


def test_detached_baseline_is_unbiased_and_attached_is_not():
    from pglab.experiments.design_problems import Config, detach_errors

    errors = detach_errors(Config(bandit_samples=50_000))
    assert errors["detached"] < 0.02 < 0.5 < errors["attached"]       # noise ~ 1/sqrt(50k) relative


@pytest.mark.integration
def test_the_loss_reaches_only_successful_policy_tokens_directly(cloned_agent, tok):
    """agents-ch6 §6.3: logit gradients exactly on the policy tokens of rewarded episodes; tool tokens only through
    attention (a non-zero embedding gradient)."""
    from pglab.batch import TOOL
    from pglab.envs.bugfix import make_tasks
    from pglab.experiments.tinyagent_masking import loss_gradients
    from pglab.trainers.tinyagent import sample_episodes

    batch = sample_episodes(cloned_agent, tok, make_tasks("train")[:8], 2, seed=1)
    batch.rewards = torch.tensor([1.0, 0.0] * 8)                   # any pattern of outcomes: the mask decides
    direct, norms = loss_gradients(cloned_agent, batch)
    assert torch.equal(direct, (batch.action_mask > 0) & (batch.rewards[:, None] > 0))
    assert norms[(batch.owner == TOOL) & (batch.rewards[:, None] > 0)].mean() > 0


def test_the_variance_parabola_has_its_vertex_at_b_star():
    """V(b) = total variance of (R - b) g is the parabola through its values at 0, 0.5 and 1; its vertex is
    trace Cov(R g, g) / trace Cov(g, g), which b* = sum R |g|^2 / sum |g|^2 approximates by leaving out the mean
    gradient (tinyagent-baselines claims the two agree within b*'s standard error)."""
    from pglab.estimators import total_variance
    from pglab.experiments.tinyagent_baselines import parabola

    gen = torch.Generator().manual_seed(0)
    rewards = (torch.rand(50, generator=gen, dtype=torch.float64) < 0.2).double()
    scores = torch.randn(50, 7, generator=gen, dtype=torch.float64) * (1 + rewards[:, None])
    a, c1, c0 = parabola(rewards, scores)
    for b in (-0.3, 0.2, 1.7):
        assert a * b * b + c1 * b + c0 == pytest.approx(float(total_variance((rewards - b)[:, None] * scores)),
                                                        rel=1e-12)
    centred = scores - scores.mean(0)
    assert -c1 / (2 * a) == pytest.approx(float((rewards[:, None] * scores * centred).sum() / centred.pow(2).sum()),
                                          rel=1e-12)
