"""grpo-bias: every claim at QUICK size and at a second first seed; the std-weight closed form by hand."""

import math

import pytest
import torch

from pglab.envs.enumerable import EnumerablePolicy
from pglab.experiments import get_experiment
from pglab.experiments.grpo_bias import pass_fail_rewards, std_weight
from pglab.runtime.threads import single_torch_thread
from support.experiments import check_quick


@pytest.mark.experiment("grpo-bias")
def test_grpo_bias_quick_run_holds_every_claim():
    result = check_quick("grpo-bias")
    assert {r["K"] for r in result.tables["aggregation"]} == {2, 4, 8}
    assert all(r["total_variance"] > 0 for table in ("group_mean", "std_scaling", "aggregation")
               for r in result.tables[table])


@pytest.mark.experiment
def test_claims_hold_at_another_first_seed():
    with single_torch_thread():
        result = get_experiment("grpo-bias").run(quick=True, first_seed=100)
    assert result.passed, [(c.claim, c.value) for c in result.failed_checks()]


def test_std_weight_closed_forms():
    """K = 2: a split group gets advantages +-(1/2) / (sqrt(1/2) + eps), so the weight is the same for every p."""
    eps = 1e-6
    for p in (0.1, 0.5, 0.9):
        assert std_weight(p, 2, eps) == pytest.approx(0.5 / (math.sqrt(0.5) + eps), rel=1e-12)
    # K = 3 by hand: m ~ Binomial(2, p) other passes; std of {1,0,0} and {1,1,0} is sqrt(1/3)
    p, s = 0.3, math.sqrt(1 / 3)
    by_hand = ((1 - p) ** 2 * (2 / 3) / (s + eps) + 2 * p * (1 - p) * ((1 / 3) / (s + eps) + (1 / 3) / (s + eps))
               + p ** 2 * (2 / 3) / (s + eps))
    assert std_weight(p, 3, eps) == pytest.approx(by_hand, rel=1e-12)
    assert std_weight(0.5, 8) != pytest.approx(std_weight(0.1, 8), rel=1e-3)


def test_pass_fail_rewards_mix_passes_and_failures():
    policy = EnumerablePolicy(prompts=3, vocab=2, length=2, seed=0)
    rewards = pass_fail_rewards(policy, (0.1, 0.5, 0.9))
    assert set(rewards.unique().tolist()) == {0.0, 1.0}
    assert bool((rewards.sum(-1) >= 1).all() and (rewards.sum(-1) <= rewards.shape[1] - 1).all())
    assert rewards.dtype == torch.float64
