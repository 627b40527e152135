"""bandit-training: the vectorised trainer against a plain per-run loop, and the qualitative claim at reduced size."""

import pytest
import torch

from pglab.envs.bandit import GaussianBandit
from pglab.trainers.bandit import BASELINES, replay_run, train_bandit
from support.experiments import check_quick


@pytest.mark.parametrize("baseline", BASELINES)
def test_vectorised_step_equals_plain_per_seed_loop(baseline):
    bandit = GaussianBandit([5.0, 6.0, 7.0, 8.0], 1.0)
    trajectory = train_bandit(bandit, baseline, runs=5, steps=60, lr=0.05, generator=torch.Generator().manual_seed(3))
    assert trajectory.thetas.shape == (61, 5, 4)
    for run in range(5):
        reference = replay_run(bandit, baseline, trajectory.actions[:, run], trajectory.rewards[:, run], lr=0.05)
        torch.testing.assert_close(trajectory.thetas[:, run], reference, rtol=0, atol=1e-12)


def test_running_baseline_starts_at_zero_and_averages_earlier_rewards():
    bandit = GaussianBandit([5.0, 6.0], 1.0)
    trajectory = train_bandit(bandit, "running", runs=2, steps=3, lr=0.1, generator=torch.Generator().manual_seed(0))
    theta, rewards, actions = torch.zeros(2, 2, dtype=torch.float64), trajectory.rewards, trajectory.actions
    for t, b in enumerate([torch.zeros(2), rewards[0], rewards[:2].mean(0)]):
        onehot = torch.nn.functional.one_hot(actions[t], 2).double()
        theta = theta + 0.1 * (rewards[t] - b)[:, None] * (onehot - torch.softmax(theta, -1))
        torch.testing.assert_close(trajectory.thetas[t + 1], theta)


def test_unknown_baseline_is_a_value_error():
    with pytest.raises(ValueError, match="pass one of none, running, value"):
        train_bandit(GaussianBandit([0.0, 1.0]), "ema", 2, 2, 0.1, torch.Generator())


@pytest.mark.experiment("bandit-training")
def test_quick_run_shows_the_baseline_claim():
    result = check_quick("bandit-training")
    m = result.metrics
    assert m["running: share ending on the best arm"] == 1.0
    assert m["value: share ending on the best arm"] == 1.0
    assert 0.05 <= 1.0 - m["none: share ending on the best arm"] <= 0.5
    assert m["none: mean J at step 400"] < m["running: mean J at step 400"] - 0.1
    rows = {(r["baseline"], r["quantity"]): r["ours"] for r in result.tables["training_summary"]}
    assert rows[("none", "share of runs with P(best) < 0.1")] > 0.05
    band = {b: rows[(b, "90th pct of J at step 400")] - rows[(b, "10th pct of J at step 400")] for b in BASELINES}
    assert band["running"] < 0.1 < band["none"]
    assert "mean_J_with_band" in result.figures
    assert all("book" in row for row in result.tables["final_most_likely_arm"])
