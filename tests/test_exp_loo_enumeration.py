"""loo-enumeration: exact enumeration proves E[leave-one-out] = grad J and E[centred] = (n-1)/n grad J."""

import pytest
import torch

from pglab.envs.tabular import enumerate_trajectories, table_score, two_state_problem
from pglab.experiments import run_experiment
from pglab.experiments.loo_enumeration import batch_expectations


def test_enumeration_identities_hold_exactly():
    result = run_experiment("loo-enumeration", quick=True)
    assert result.checks and result.passed, [c for c in result.checks if not c.passed]
    rows = result.tables["enumeration"]
    assert {(r["n"], r["ours"]) for r in rows} == {(2, True), (3, True)}
    assert all(r["max abs difference"] < 1e-12 for r in rows)
    assert [r["book"] for r in rows if r["n"] == 2] == [True, True]
    probabilities = [r["probability"] for r in result.tables["trajectories"]]
    assert len(probabilities) == 4 and sum(probabilities) == pytest.approx(1.0, abs=1e-12)


def test_the_check_is_sharp():
    """Centring is shrunk by exactly (n-1)/n: it does not equal the gradient itself."""
    mdp = two_state_problem()
    theta = torch.tensor([[0.3, -0.2], [1.0, 0.1], [0.0, 0.0]], dtype=torch.float64)
    probs, returns, counts = enumerate_trajectories(mdp, mdp.policy(theta))
    exact = mdp.exact_gradient(theta)
    loo, centred = batch_expectations(probs, returns, table_score(theta, counts), 2)
    assert torch.allclose(loo, exact, atol=1e-12)
    assert not torch.allclose(centred, exact, atol=1e-3)
    assert torch.allclose(centred, exact / 2, atol=1e-12)
