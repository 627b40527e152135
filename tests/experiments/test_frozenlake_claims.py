"""frozenlake-static and frozenlake-race negative controls: a plausible wrong implementation fails a claim."""

import pytest

import pglab.experiments.frozenlake_static as static
from pglab.experiments import get_experiment
from pglab.runtime.threads import single_torch_thread


@pytest.mark.experiment
def test_an_added_baseline_fails_the_static_ordering(monkeypatch):
    """'exact baseline' that adds V(s_t) instead of subtracting it: still unbiased, but its variance climbs above
    normalised's and the book's ordering reverses."""
    right = static.step_weights

    def added(batch, variant, gamma, values=None, groups=None):
        if variant == "exact baseline":
            return batch.reward_to_go(gamma) + values[batch.states]
        return right(batch, variant, gamma, values, groups)

    monkeypatch.setattr(static, "step_weights", added)
    with single_torch_thread():
        result = get_experiment("frozenlake-static").run(quick=True, sweep_draws=400, bootstrap=200)
    failed = {c.claim for c in result.failed_checks()}
    assert "sweep, the book's ordering is not reversed at any probe with 0.25 <= J <= 0.55" in failed


@pytest.mark.experiment
def test_normalised_without_its_sd_fails_the_race_step_ratio(monkeypatch):
    """'normalised' that forgets to divide by the sd is 'centred': its steps no longer outgrow centred's."""
    import pglab.trainers.tabular as tabular

    right = tabular.step_weights

    def undivided(batch, variant, gamma, values=None, groups=None):
        return right(batch, "centred" if variant == "normalised" else variant, gamma, values, groups)

    monkeypatch.setattr(tabular, "step_weights", undivided)
    with single_torch_thread():
        result = get_experiment("frozenlake-race").run(quick=True, seeds=5, updates=40,
                                                       variants=("centred", "normalised"))
    failed = {c.claim for c in result.failed_checks()}
    assert "mean step norm over the first 40 updates: normalised / centred: at least half the book's 5.07x on a log " \
        "scale" in failed
