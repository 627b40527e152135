"""grpo-weights: every claim at QUICK size and at first seed 100; the closed forms by hand; negative controls."""

import math

import pytest

from pglab.audit import audit_loss
from pglab.experiments import get_experiment
from pglab.experiments.grpo_bias import std_weight
from pglab.experiments.grpo_weights import (
    ESTIMATORS,
    Config,
    closed_form_weight,
    curve_rows,
    estimator_loss,
    pass_rate_policy,
    shape_failures,
    worst_gap,
)
from pglab.runtime.threads import single_torch_thread
from support.experiments import check_quick

TOL = Config().tolerance


@pytest.mark.experiment("grpo-weights")
def test_grpo_weights_quick_run_holds_every_claim():
    result = check_quick("grpo-weights")
    assert {r["G"] for r in result.tables["audited"]} == {2, 4, 8, 16, 32, 64}
    assert {r["estimator"] for r in result.tables["audited"]} == set(ESTIMATORS)
    assert result.metrics["grpo_edge_over_middle_G64"] > 3


@pytest.mark.experiment
def test_claims_hold_at_another_first_seed():
    with single_torch_thread():
        result = get_experiment("grpo-weights").run(quick=True, first_seed=100)
    assert result.passed, [(c.claim, c.value) for c in result.failed_checks()]


def test_closed_forms_by_hand():
    eps = 1e-6
    for p in (0.1, 0.5, 0.9):
        assert closed_form_weight("RLOO", p, 5, eps) == pytest.approx(1.0, rel=1e-14)
        assert closed_form_weight("Dr. GRPO", p, 5, eps) == pytest.approx(4 / 5, rel=1e-14)
        # grpo-bias derives the sample-std weight with its own sum
        assert closed_form_weight("GRPO (sample std)", p, 8, eps) == pytest.approx(std_weight(p, 8, eps), rel=1e-13)
    # G = 2, population std of {1, 0} is 1/2: advantages +-1 whatever p
    assert closed_form_weight("GRPO (population std)", 0.3, 2, 0.0) == pytest.approx(1.0, rel=1e-14)
    # eps = 0: the sample-std weight is the population one times sqrt((G-1)/G)
    assert closed_form_weight("GRPO (sample std)", 0.3, 6, 0.0) == pytest.approx(
        math.sqrt(5 / 6) * closed_form_weight("GRPO (population std)", 0.3, 6, 0.0), rel=1e-13)
    # the edges: a lone pass among G, population std sqrt(G-1)/G, weight sqrt(G-1)
    assert closed_form_weight("GRPO (population std)", 1e-12, 10, 0.0) == pytest.approx(3.0, rel=1e-9)


def audited_weight(estimator: str, p: float, g: int) -> float:
    return audit_loss(estimator_loss(estimator, g, 1e-6), pass_rate_policy(p, 0), beta=0.0, group_size=g).scale


def test_negative_control_sample_std_where_population_is_claimed():
    """The audited population-std weight is off the sample-std closed form by far more than the tolerance."""
    rows = [{"estimator": "GRPO (population std)", "G": g, "p": 0.2,
             "audited_weight": audited_weight("GRPO (population std)", 0.2, g)} for g in (4, 64)]
    right = worst_gap(rows, "GRPO (population std)",
                      lambda r: closed_form_weight("GRPO (population std)", r["p"], r["G"], 1e-6))
    wrong = worst_gap(rows, "GRPO (population std)",
                      lambda r: closed_form_weight("GRPO (sample std)", r["p"], r["G"], 1e-6))
    assert right <= TOL < 1e-3 < wrong


def test_negative_control_rloo_and_dr_grpo_swapped():
    """Dr. GRPO's audited weight fails RLOO's claim w = 1, and RLOO's fails Dr. GRPO's (G-1)/G."""
    rows = [{"estimator": e, "G": 4, "p": 0.5, "audited_weight": audited_weight(e, 0.5, 4)}
            for e in ("RLOO", "Dr. GRPO")]
    assert worst_gap(rows, "Dr. GRPO", lambda r: 1.0) > 0.2 > TOL
    assert worst_gap(rows, "RLOO", lambda r: (r["G"] - 1) / r["G"]) > 0.2 > TOL


def test_negative_control_shape_claim_fails_on_a_flat_curve():
    """Dr. GRPO's constant weight is not 'strictly decreasing on (0, 1/2]': the shape check counts every G >= 3."""
    curves = curve_rows(Config(group_sizes=(2, 4, 8), curve_points=21))
    assert shape_failures(curves, "GRPO (population std)") == 0
    assert shape_failures(curves, "Dr. GRPO") == 2


def test_settings_refused():
    from pglab.runtime.options import SettingsError

    with pytest.raises(SettingsError, match="group_sizes"):
        Config(group_sizes=(1, 4))
    with pytest.raises(SettingsError, match="inside"):
        Config(audited_pass_rates=(0.0, 0.5))
    with pytest.raises(ValueError, match="unknown estimator"):
        estimator_loss("PPO", 4, 1e-6)
