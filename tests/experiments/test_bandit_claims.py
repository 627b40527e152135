"""Claims of the bandit experiments: identities moved out of the experiments, and negative controls (a plausible
wrong implementation makes at least one claim fail)."""

import pytest
import torch

import pglab.envs.bandit
import pglab.experiments.bandit_variance as bandit_variance
from pglab.estimators import softmax_score
from pglab.experiments import get_experiment
from pglab.runtime.threads import single_torch_thread


def test_the_mean_score_is_zero_exactly():
    """E_pi[e_a - pi] = 0 at any policy: the identity bandit-variance used to test by sampling."""
    theta = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.3, -1.2, 2.0, 0.1]], dtype=torch.float64)
    for row in theta:
        pi = torch.softmax(row, -1)
        scores = softmax_score(row, torch.arange(len(row)))          # [K actions, K]
        assert (pi @ scores).abs().max() <= 4 * torch.finfo(torch.float64).eps


def forgot_the_mean(theta, actions, temperature=1.0):
    """A wrong score: e_a without the - pi (the policy's mean) subtracted."""
    return torch.nn.functional.one_hot(torch.as_tensor(actions), theta.shape[-1]).to(torch.float64)


@pytest.mark.experiment
def test_a_score_without_its_mean_fails_bandit_variance(monkeypatch):
    monkeypatch.setattr(pglab.envs.bandit, "softmax_score", forgot_the_mean)
    monkeypatch.setattr(bandit_variance, "softmax_score", forgot_the_mean)
    with single_torch_thread():
        result = get_experiment("bandit-variance").run(quick=True, samples=5000)
    failed = {c.claim for c in result.failed_checks()}
    assert "mean estimate = exact gradient, no baseline" in failed
    assert "llm-ch6 §6.6 one step by hand: score e_a - pi" in failed


def without_baseline(train):
    """A trainer that drops the baseline it is asked for (every method runs as 'none')."""
    return lambda bandit, baseline, *args, **kwargs: train(bandit, "none", *args, **kwargs)


@pytest.mark.experiment
def test_a_dropped_baseline_fails_bandit_race(monkeypatch):
    import pglab.experiments.bandit_race as bandit_race

    monkeypatch.setattr(bandit_race, "train_bandit", without_baseline(bandit_race.train_bandit))
    with single_torch_thread():
        result = get_experiment("bandit-race").run(quick=True)
    failed = {c.claim for c in result.failed_checks()}
    assert failed == {"running-average baseline: the book's 0 of 12 committed to a wrong arm, at our rate"}


@pytest.mark.experiment
def test_a_dropped_baseline_and_a_noiseless_spread_fail_bandit_lab(monkeypatch):
    import pglab.experiments.bandit_lab as bandit_lab

    exact = pglab.envs.bandit.GaussianBandit.exact_total_variance
    monkeypatch.setattr(bandit_lab, "train_bandit", without_baseline(bandit_lab.train_bandit))
    monkeypatch.setattr(pglab.envs.bandit.GaussianBandit, "exact_total_variance",
                        lambda self, theta, b: exact(pglab.envs.bandit.GaussianBandit(self.means, 0.0), theta, b))
    with single_torch_thread():
        result = get_experiment("bandit-lab").run(quick=True, samples=4000, race_runs=200)
    failed = {c.claim for c in result.failed_checks()}
    assert "race: running-average baseline: the book's 12 of 12 escaped, at our rate" in failed
    assert any(claim.startswith("valley: closed-form minimum") for claim in failed)


@pytest.mark.experiment
def test_a_dropped_baseline_fails_bandit_training(monkeypatch):
    import pglab.experiments.bandit_training as bandit_training

    monkeypatch.setattr(bandit_training, "train_bandit", without_baseline(bandit_training.train_bandit))
    with single_torch_thread():
        result = get_experiment("bandit-training").run(quick=True)
    failed = {c.claim for c in result.failed_checks()}
    assert "running: the book's 200 of 200 runs ending on the best arm, at our rate" in failed
