"""offpolicy-bias: every claim at QUICK size and at first seed 100; the corrections' losses; negative controls."""

import pytest
import torch

from pglab.audit import audit_loss
from pglab.envs.enumerable import EnumerablePolicy
from pglab.experiments import get_experiment
from pglab.experiments.offpolicy_bias import CORRECTIONS, Config, correction_loss, inside, steps_up
from pglab.runtime.threads import single_torch_thread
from support.experiments import check_quick

TOL = Config().tolerance


@pytest.mark.experiment("offpolicy-bias")
def test_offpolicy_bias_quick_run_holds_every_claim():
    result = check_quick("offpolicy-bias")
    table = result.tables["corrections"]
    assert {r["correction"] for r in table} == set(CORRECTIONS)
    assert all(r["total_variance"] > 0 for r in table + result.tables["cap_sweep"])


@pytest.mark.experiment
def test_claims_hold_at_another_first_seed():
    with single_torch_thread():
        result = get_experiment("offpolicy-bias").run(quick=True, first_seed=100)
    assert result.passed, [(c.claim, c.value) for c in result.failed_checks()]


def noisy_pair(scale: float):
    policy = EnumerablePolicy(prompts=1, vocab=3, length=2, seed=2)
    sampler = policy.copy()
    with torch.no_grad():
        sampler.net.theta.add_(scale * torch.randn(sampler.net.theta.shape, dtype=torch.float64,
                                                   generator=torch.Generator().manual_seed(4)))
    return policy, sampler


def audited(name: str, scale: float, **extra) -> float:
    policy, sampler = noisy_pair(scale)
    return audit_loss(correction_loss(name, Config(), **extra), policy, beta=0.0, group_size=2, behaviour=sampler,
                      proximal=policy.copy()).relative_bias


def test_every_correction_is_exact_on_policy():
    """With the sampler equal to the policy every ratio is 1 and nothing is truncated or masked."""
    policy = EnumerablePolicy(prompts=1, vocab=3, length=2, seed=2)
    for name in CORRECTIONS:
        report = audit_loss(correction_loss(name, Config()), policy, beta=0.0, group_size=2, proximal=policy.copy())
        assert report.relative_bias <= TOL, name


def test_negative_control_token_ratio_is_not_sequence_is():
    """The claim 'sequence IS is unbiased' fails on the plausible wrong implementation with the token ratio
    (decoupled PPO at pi's parameters) and on the truncated one."""
    assert audited("sequence IS", 1.0) <= TOL
    assert audited("decoupled PPO", 1.0) > 1e-3
    assert audited("sequence TIS", 1.0, cap=1.0) > 1e-3


def test_negative_control_monotone_and_inside_checks():
    assert steps_up([0.1, 0.2, 0.3]) == 0 and steps_up([0.1, 0.3, 0.2]) == 1 and steps_up([0.1, 0.1]) == 1
    assert steps_up([0.1, 0.1], strict=False) == 0
    row = {"correction": "sequence TIS", "cap": 2.0, "smallest_sequence_ratio": 0.3, "largest_sequence_ratio": 2.5}
    assert not inside(row, Config()) and inside({**row, "cap": 4.0}, Config())
    assert not inside({**row, "correction": "sequence mask"}, Config())   # 0.3 < mask_low 0.5


def test_settings_refused():
    from pglab.runtime.options import SettingsError

    with pytest.raises(SettingsError, match="two values"):
        Config(noise_scales=(1.0,))
    with pytest.raises(ValueError, match="unknown correction"):
        correction_loss("gspo", Config())
