"""kl-matrix: every claim at QUICK size and at first seed 100; the derived verdicts; negative controls."""

import pytest
import torch

from pglab.audit import audit_loss
from pglab.envs.enumerable import EnumerablePolicy
from pglab.estimators import kl_estimate, leave_one_out, reinforce_loss
from pglab.experiments import get_experiment
from pglab.experiments.kl_matrix import CONFIGURATIONS, Config, derived_follows, matrix_loss, objective_gradient
from pglab.runtime.threads import single_torch_thread
from support.experiments import check_quick

TOL = Config().tolerance


@pytest.mark.experiment("kl-matrix")
def test_kl_matrix_quick_run_holds_every_claim():
    result = check_quick("kl-matrix")
    rows = result.tables["matrix"]
    assert len(rows) == len(CONFIGURATIONS) * (1 + len(Config().behaviours))
    assert {r["sampler"] for r in rows} == {"on-policy", "noise:0.5", "stale:2"}


@pytest.mark.experiment
def test_claims_hold_at_another_first_seed():
    with single_torch_thread():
        result = get_experiment("kl-matrix").run(quick=True, first_seed=100)
    assert result.passed, [(c.claim, c.value) for c in result.failed_checks()]


def test_derived_verdicts():
    assert derived_follows("k1", "reward", "token", True) == derived_follows("k1", "reward", "token", False)
    assert derived_follows("k3", "loss", "token", True) == "tokenwise_forward_kl"
    assert derived_follows("k3", "loss", "sequence", True) == "forward_kl"
    assert derived_follows("k1+", "loss", "sequence", True) == derived_follows("k2", "loss", "sequence", True)
    assert derived_follows("k3 x ratio", "loss", "sequence", False) == "reverse_kl"
    assert derived_follows("k3 x ratio", "loss", "token", False) is None
    assert derived_follows("k1", "loss", "token", False) is None
    with pytest.raises(ValueError, match="no configuration"):
        matrix_loss("k3 x ratio", "reward", "token", 0.5)


def policy_and_sampler():
    policy = EnumerablePolicy(prompts=1, vocab=3, length=2, seed=3)
    sampler = policy.copy()
    with torch.no_grad():
        sampler.net.theta.add_(0.5 * torch.randn(sampler.net.theta.shape, dtype=torch.float64,
                                                 generator=torch.Generator().manual_seed(1)))
    return policy, sampler


def relative_gap(report, policy, objective, beta):
    target = objective_gradient(policy, objective, beta)
    return float((report.gradient - target).norm() / objective_gradient(policy, "reverse_kl", beta).norm())


def test_negative_control_k3_in_the_loss_is_not_the_reverse_tokenwise_kl():
    """The claim 'k3 in the loss follows the per-token forward KL' fails if the reverse one is claimed instead."""
    policy, _ = policy_and_sampler()
    report = audit_loss(matrix_loss("k3", "loss", "token", 0.5), policy, beta=0.5, group_size=2)
    assert relative_gap(report, policy, "tokenwise_forward_kl", 0.5) <= TOL
    assert relative_gap(report, policy, "tokenwise_reverse_kl", 0.5) > 1e-3


def test_negative_control_ratio_correction_without_the_ratio_gradient():
    """k3 x a detached ratio (the ratio's gradient dropped) is k3 itself on-policy, not k2: the identity claim fails."""
    policy, _ = policy_and_sampler()
    beta = 0.5

    def detached_ratio(logp, ref_logp, rewards, mask, group):
        score = leave_one_out(rewards.reshape(-1, 2)).reshape(-1)
        kl = kl_estimate(logp, ref_logp, "k3") * torch.exp(logp - logp).detach()
        return reinforce_loss(logp, score, mask, "seq_mean_token_sum") + beta * (kl * mask).sum(-1).mean()

    wrong = audit_loss(detached_ratio, policy, beta=beta, group_size=2)
    k2 = audit_loss(matrix_loss("k2", "loss", "token", beta), policy, beta=beta, group_size=2)
    right = audit_loss(matrix_loss("k3 x ratio", "loss", "token", beta), policy, beta=beta, group_size=2)
    norm = float(objective_gradient(policy, "reverse_kl", beta).norm())
    assert float((right.gradient - k2.gradient).norm()) / norm <= TOL
    assert float((wrong.gradient - k2.gradient).norm()) / norm > 1e-3


def test_negative_controls_off_policy():
    """Off-policy, k1 in the reward without the sequence ratio, and k3 with the token ratio, are biased; the
    sequence-ratio forms are exact."""
    policy, sampler = policy_and_sampler()
    beta = 0.5

    def k1_reward_unweighted(logp, ref_logp, rewards, mask, group):
        return matrix_loss("k1", "reward", "token", beta)(logp, ref_logp, rewards, mask, group)

    exact = [audit_loss(matrix_loss(*c, beta), policy, beta=beta, group_size=2, behaviour=sampler).relative_bias
             for c in (("k1", "reward", "token"), ("k3 x ratio", "loss", "sequence"))]
    biased = [audit_loss(loss, policy, beta=beta, group_size=2, behaviour=sampler).relative_bias
              for loss in (k1_reward_unweighted, matrix_loss("k3 x ratio", "loss", "token", beta))]
    assert max(exact) <= TOL
    assert min(biased) > 1e-3
