"""bandit-lab: the exact helpers it relies on, and the lab's claims at reduced size."""

import pytest
import torch

from pglab.envs.bandit import GaussianBandit
from pglab.experiments import get_experiment
from pglab.stats import standard_error
from pglab.trainers.bandit import train_bandit
from support.experiments import check_quick

BANDIT = GaussianBandit([1.0, 2.0, 4.0], 1.0)
THETA = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)


def test_expected_estimate_with_a_constant_baseline_is_the_gradient():
    for b in (0.0, 2.5, -7.0):
        torch.testing.assert_close(BANDIT.exact_expected_estimate(THETA, b), BANDIT.exact_gradient(THETA))


def test_sampled_estimates_average_to_the_exact_expectation():
    """Per-arm baseline: the Monte Carlo mean lies within 4 standard errors of the closed form, per component."""
    b = torch.tensor([2.0, 2.0, 0.0], dtype=torch.float64)
    actions, estimates = BANDIT.sample_estimates(THETA, b, 20_000, torch.Generator().manual_seed(0))
    assert actions.shape == (20_000,) and estimates.shape == (20_000, 3)
    z = (estimates.mean(0) - BANDIT.exact_expected_estimate(THETA, b)).abs() / standard_error(estimates)
    assert (z < 4).all(), z


def test_train_bandit_starts_from_the_given_logits():
    start = torch.tensor([0.05, 0.9, 0.05], dtype=torch.float64).log()
    trajectory = train_bandit(BANDIT, "running", 5, 3, 0.1, torch.Generator().manual_seed(0), start=start)
    torch.testing.assert_close(BANDIT.policy(trajectory.thetas[0]), torch.tensor([[0.05, 0.9, 0.05]] * 5,
                                                                                 dtype=torch.float64))
    with pytest.raises(ValueError, match="finite logits"):
        train_bandit(BANDIT, "none", 5, 3, 0.1, torch.Generator(), start=torch.tensor([0.0, float("nan"), 0.0]))


def test_bad_race_start_is_refused():
    with pytest.raises(ValueError, match="summing to 1"):
        get_experiment("bandit-lab").run(quick=True, race_start=(0.5, 0.5, 0.5))


@pytest.mark.experiment("bandit-lab")
def test_quick_lab_holds_every_claim():
    result = check_quick("bandit-lab")
    assert result.passed, [c for c in result.checks if not c.passed]
    without, with_baseline = result.tables["race"]
    assert without["all runs: escape rate"] < 0.6 < with_baseline["all runs: escape rate"]
    assert set(result.figures) == {"variance_valley", "race_escapes"}
