"""tokenworld-training's negative control: a leave-one-out baseline that is never subtracted fails the book's
spread under the +5 shift."""

import pytest

import pglab.trainers.tokenworld as trainer
from pglab.experiments import get_experiment
from pglab.runtime.threads import single_torch_thread


@pytest.mark.experiment
def test_a_dropped_leave_one_out_baseline_fails_the_spread(monkeypatch):
    monkeypatch.setattr(trainer, "leave_one_out", lambda returns, dim: returns)
    with single_torch_thread():
        result = get_experiment("tokenworld-training").run(quick=True, updates=25, robustness_lrs=(0.5,),
                                                           lambdas=(0.0, 0.95))
    failed = {c.claim for c in result.failed_checks()}
    assert "leave-one-out, +5: sd over runs at update 25 vs llm-ch6 §6.10 (log)" in failed
