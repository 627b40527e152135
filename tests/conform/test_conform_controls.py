"""Negative controls of the loss level with a synthetic framework: its loss and its documented preset are
patched into pglab.conform.loss_checks, so each check runs as it does on a real framework.

The synthetic framework is RLOO (leave-one-out advantages on each reply's token sum, no KL): unbiased on-policy,
and off-policy too when it importance-weights by the sampler's sequence probability. Each control breaks one
invariance: the importance weight (the objective off-policy), the documented scale (a factor 2), a loss that is
not finite (the framework loss itself).
"""

import pytest
import torch

from pglab.conform import loss_checks as module
from pglab.conform.checks import Check
from pglab.conform.configs import FrameworkConfig
from pglab.conform.loss_checks import AuditSetup, loss_checks
from pglab.estimators import advantages


def rloo(importance_weighted: bool = True, scale: float = 1.0):
    """RLOO on each reply's token sum; weighted by exp(sum logp - sum rollout_logp) where a sampler is given."""
    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        seq = (logp * mask).sum(-1)
        weight = torch.ones_like(seq)
        if importance_weighted and rollout_logp is not None:
            weight = (seq - (rollout_logp * mask).sum(-1)).exp().detach()
        adv = advantages(rewards, "rloo", int(torch.bincount(group)[0])).to(logp.dtype)
        return -scale * (weight * adv * seq).mean()
    return loss_fn


def not_finite(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
    return (logp * mask).sum() / 0.0


def checks_of(monkeypatch, loss_fn) -> dict[str, Check]:
    """loss_checks on a synthetic 'trl' whose code is ``loss_fn`` and whose documented loss is rloo()."""
    monkeypatch.setattr(module, "framework_loss", lambda config: loss_fn)
    monkeypatch.setattr(module, "documented_preset", lambda config: (rloo(), "synthetic-rloo"))
    config = FrameworkConfig("trl", None, "GRPOTrainer", 0.0, "synthetic", None)
    return {check.name: check for check in loss_checks(config, AuditSetup(prompts=1, group_size=2))}


def test_the_documented_synthetic_framework_passes_every_loss_check(monkeypatch):
    checks = checks_of(monkeypatch, rloo())
    assert len(checks) == 6 and all(check.status == "pass" for check in checks.values()), checks


def test_a_loss_without_its_importance_weight_follows_another_objective_off_policy(monkeypatch):
    checks = checks_of(monkeypatch, rloo(importance_weighted=False))
    assert checks["objective, on-policy"].status == "pass"
    for where in ("sampled by noise:0.3", "sampled by stale:1"):
        assert checks[f"objective, {where}"].status == "warn", checks[f"objective, {where}"]
        assert checks[f"documented loss, {where}"].status == "fail"


def test_a_loss_at_twice_its_documented_scale_fails_with_factor_2_and_keeps_its_objective(monkeypatch):
    checks = checks_of(monkeypatch, rloo(scale=2.0))
    for where in ("on-policy", "sampled by noise:0.3", "sampled by stale:1"):
        assert checks[f"documented loss, {where}"].status == "fail"
        assert checks[f"documented loss, {where}"].factor == pytest.approx(2.0, rel=1e-12)
        assert checks[f"objective, {where}"].status == "pass"


def test_a_loss_that_is_not_finite_fails_the_framework_loss_check(monkeypatch):
    checks = checks_of(monkeypatch, not_finite)
    assert set(checks) == {"framework loss, on-policy", "framework loss, sampled by noise:0.3",
                           "framework loss, sampled by stale:1"}
    assert all(check.status == "fail" and "finite" in check.detail for check in checks.values())
