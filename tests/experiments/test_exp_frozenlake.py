"""frozenlake-static and frozenlake-race: the closed-form estimates, the freeze-point sweep, the race's ordering."""

import numpy as np
import pytest
import torch

from pglab.envs.tabular import Episodes, frozen_lake
from pglab.experiments.frozenlake_race import trailing_mean, updates_to_target
from pglab.experiments.frozenlake_static import ESTIMATORS, five_estimates, mean_cosines, relative_variances
from pglab.trainers.tabular import ascent_direction, step_weights
from support.experiments import check_quick


@pytest.fixture(scope="module")
def static():
    return check_quick("frozenlake-static")


@pytest.fixture(scope="module")
def race():
    return check_quick("frozenlake-race")


def test_closed_form_estimates_equal_the_reinforce_loss_gradient():
    """five_estimates (visit counts x score) = minus the autograd gradient of reinforce_loss, batch by batch."""
    mdp = frozen_lake(is_slippery=False, gamma=0.95)
    theta = 0.3 * torch.randn(16, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    values = mdp.values(mdp.policy(theta)).detach()
    estimates = five_estimates(mdp, theta, values, 3, 4, 0.95, torch.Generator().manual_seed(1))
    batch = mdp.sample(mdp.policy(theta), 12, torch.Generator().manual_seed(1))  # the same draws, one batch at a time
    for d in range(3):
        steps = (batch.episode // 4) == d
        one = Episodes(batch.episode[steps] - 4 * d, batch.time[steps], batch.states[steps], batch.actions[steps],
                       batch.rewards[steps], batch.truncated[4 * d:4 * d + 4], 16, 4)
        for i, name in enumerate(ESTIMATORS):
            expected = ascent_direction(theta, one, step_weights(one, name, 0.95, values), "seq_mean_token_sum")
            torch.testing.assert_close(estimates[d, i], expected.flatten(), rtol=0, atol=1e-12)


def test_relative_variance_and_cosine_closed_forms():
    estimates = np.array([[[1.0, 0.0]], [[3.0, 0.0]]])        # two draws, one estimator: mean (2, 0), deviations 1
    assert relative_variances(estimates, np.ones((1, 2)))[0, 0] == pytest.approx(1 / 4)
    assert relative_variances(estimates, np.array([[2, 0]]))[0, 0] == pytest.approx(0.0)   # a resample of draw 0
    assert mean_cosines(estimates, np.ones((1, 2)), np.array([0.0, 1.0]))[0, 0] == pytest.approx(0.0)


@pytest.mark.experiment("frozenlake-static")
def test_sweep_spans_the_probes_and_finds_the_band(static):
    rows = static.tables["freeze_point_sweep"]
    J = [r["J"] for r in rows]
    assert len(rows) >= 8 and min(J) < 0.15 and max(J) > 0.7 and J == sorted(J)
    assert all(r["book's ordering holds"] for r in rows if 0.25 <= r["J"] <= 0.4)
    assert not rows[0]["book's ordering holds"]  # J = 0.09: centring costs variance
    assert "relative_variance_vs_J" in static.figures


@pytest.mark.experiment("frozenlake-race")
def test_race_ordering(race):
    rows = {r["variant"]: r for r in race.tables["race"]}
    medians = {v: r["median updates to 90%"] for v, r in rows.items()}
    assert min(medians, key=medians.get) == "normalised"
    assert set(race.figures) == {"success_rate", "entropy"}
    assert all(r["final entropy (median)"] < np.log(4) for r in rows.values())  # every arm spent entropy


def test_updates_to_target_counts_windows():
    success = np.array([[0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]], dtype=float)
    assert trailing_mean(success, 2).tolist() == [[0, 0.5, 1, 1, 1], [0, 0, 0, 0, 0]]
    assert updates_to_target(success, 2, 0.9).tolist() == [2, 6]  # never reached: the number of updates
