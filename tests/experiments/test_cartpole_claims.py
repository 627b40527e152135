"""cartpole's negative control: a weighting that pushes the wrong way fails the book's ordering."""

import pytest

import pglab.trainers.cartpole as trainer
from pglab.experiments import get_experiment
from pglab.runtime.threads import single_torch_thread


@pytest.mark.experiment
def test_a_flipped_advantage_fails_the_ordering(monkeypatch):
    right = trainer.weights_and_targets

    def flipped(batch, weighting, gamma, value):
        weights, targets = right(batch, weighting, gamma, value)
        return (-weights if weighting == "advantage" else weights), targets

    monkeypatch.setattr(trainer, "weights_and_targets", flipped)
    with single_torch_thread():
        result = get_experiment("cartpole").run(quick=True, updates=6, envs=4)
    failed = {c.claim for c in result.failed_checks()}
    assert failed == {"final return: G_t - V(s_t) not below G_0 (whole return) (one-sided rank-sum p of the reverse "
                      "order)"}
