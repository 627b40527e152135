"""loo-enumeration and repair-mdp-gradient negative controls: a plausible wrong implementation fails a claim."""

import pytest

import pglab.experiments.loo_enumeration as loo
from pglab.estimators import group_normalize
from pglab.experiments import get_experiment
from pglab.runtime.threads import single_torch_thread


@pytest.mark.experiment
def test_a_mean_that_keeps_its_own_return_fails_loo(monkeypatch):
    """'leave-one-out' whose baseline averages every return, its own too: the centred estimate, shrunk by (n-1)/n."""
    monkeypatch.setattr(loo, "leave_one_out", lambda returns: group_normalize(returns, scale="none"))
    with single_torch_thread():
        result = get_experiment("loo-enumeration").run(quick=True)
    failed = {c.claim for c in result.failed_checks()}
    assert "n = 2: sampled E[leave-one-out] = grad J (largest |mean - target| / se over [S, A])" in failed


@pytest.mark.experiment
def test_a_score_without_its_mean_fails_repair(monkeypatch):
    """Trajectory scores from the visit counts alone, the - pi of every visit forgotten: the batches' mean is no
    longer grad J."""
    import pglab.experiments.repair_mdp_gradient as repair

    monkeypatch.setattr(repair, "trajectory_scores", lambda theta, episodes: episodes.counts().to(theta.dtype))
    with single_torch_thread():
        result = get_experiment("repair-mdp-gradient").run(quick=True, episodes=4000, batches=200)
    failed = {c.claim for c in result.failed_checks()}
    assert "baseline none: mean of 200 batches = grad J within its noise" in failed
