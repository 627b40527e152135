"""tokenworld-gae's negative control: a GAE that ignores its lambda fails the book's printed advantages."""

import pytest

import pglab.experiments.tokenworld_gae as tokenworld_gae
from pglab.experiments import get_experiment
from pglab.runtime.threads import single_torch_thread


@pytest.mark.experiment
def test_a_gae_that_ignores_lambda_fails_the_printed_episode(monkeypatch):
    right = tokenworld_gae.gae
    monkeypatch.setattr(tokenworld_gae, "gae", lambda rewards, values, gamma, lam, **kw: right(rewards, values, gamma,
                                                                                               1.0, **kw))
    with single_torch_thread():
        result = get_experiment("tokenworld-gae").run(quick=True)
    failed = {c.claim for c in result.failed_checks()}
    assert any("from the book's V column = the printed one" in claim for claim in failed), failed
