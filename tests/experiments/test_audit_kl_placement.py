"""kl-placement: every claim at QUICK size and at a second first seed; the derived verdicts it checks against."""

import pytest

from pglab.experiments import get_experiment
from pglab.experiments.kl_placement import CONFIGURATIONS, derived_follows
from pglab.runtime.threads import single_torch_thread
from support.experiments import check_quick


@pytest.mark.experiment("kl-placement")
def test_kl_placement_quick_run_holds_every_claim():
    result = check_quick("kl-placement")
    rows = result.tables["placements"]
    assert len(rows) == 2 * 3 * 2 * len(CONFIGURATIONS)
    assert {r["follows"] for r in rows} == {"reverse_kl", "reward_only", "tokenwise_reverse_kl",
                                            "tokenwise_forward_kl", "forward_kl", "none found"}
    training = {r["trained with"]: r for r in result.tables["training"]}
    assert training["k1 in the reward"]["kl_to_pi_star"] < training["k3 in the loss"]["kl_to_pi_star"]


@pytest.mark.experiment
def test_claims_hold_at_another_first_seed():
    with single_torch_thread():
        result = get_experiment("kl-placement").run(quick=True, first_seed=100)
    assert result.passed, [(c.claim, c.value) for c in result.failed_checks()]


def test_derived_verdicts():
    assert derived_follows("k1", "reward", False, 2) == "reverse_kl"
    assert derived_follows("k3", "reward", False, 1) is None
    assert derived_follows("k1", "loss", False, 1) == "reward_only"
    assert derived_follows("k3", "loss", False, 1) == "forward_kl"
    assert derived_follows("k3", "loss", True, 2) == derived_follows("k2", "loss", False, 2) == "tokenwise_reverse_kl"
