"""loo-enumeration: the sharpness of the enumeration, and the sampled batches beside it."""

import pytest
import torch

from pglab.envs.tabular import enumerate_trajectories, table_score, two_state_problem
from pglab.experiments.loo_enumeration import batch_expectations
from support.experiments import check_quick


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


@pytest.mark.experiment("loo-enumeration")
def test_tables_show_enumeration_and_sampling():
    result = check_quick("loo-enumeration")
    rows = result.tables["enumeration"]
    assert {r["n"] for r in rows} == {2, 3}
    assert all(r["max abs difference (enumeration)"] < 1e-12 for r in rows)
    assert all(0 < r["max abs difference (sampled)"] < 0.01 for r in rows)
    probabilities = [r["probability"] for r in result.tables["trajectories"]]
    assert len(probabilities) == 4 and sum(probabilities) == pytest.approx(1.0, abs=1e-12)
