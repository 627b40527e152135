"""framework-matrix: the QUICK run holds its claims; negative controls break each claim with the frameworks' own code
changed (a doubled TRL loss) or a setting that is not the unbiased one (verl's rloo with token-mean)."""

import pytest

from pglab.conform import frameworks
from pglab.experiments.framework_matrix import SETTINGS, Config, check_claims, setting_rows
from pglab.reporting.result import Result
from support.experiments import check_quick

QUICK = Config(**Config.QUICK)


def installed(name):
    found = frameworks.LOADERS[name]()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.mark.experiment("framework-matrix")
def test_framework_matrix_quick_run_holds_every_claim():
    result = check_quick("framework-matrix")
    rows = result.tables["matrix"]
    assert {r["sampler"] for r in rows} == {"on-policy"}
    assert all(r["documented"] in ("pass", "warn") for r in rows)


def claims(rows):
    result = Result("framework-matrix", {})
    check_claims(result, rows)
    return {c.claim: c for c in result.checks}


def test_a_doubled_framework_loss_breaks_the_reproduction_claim(monkeypatch):
    trl = installed("trl")
    own = trl.grpo.GRPOTrainer._compute_loss
    monkeypatch.setattr(trl.grpo.GRPOTrainer, "_compute_loss", lambda self, model, inputs: 2 * own(self, model, inputs))
    rows = setting_rows("trl dapo", QUICK)
    assert rows[0]["documented"] == "fail" and abs(rows[0]["factor"] - 2) <= 1e-6
    claim = next(c for name, c in claims(rows).items() if name.startswith("every setting"))
    assert claim.passed is False and abs(claim.value - 1) <= 1e-6


def test_a_biased_aggregation_breaks_the_unbiased_claim(monkeypatch):
    installed("verl")
    name = "verl rloo seq-mean-token-sum"
    monkeypatch.setitem(SETTINGS, name, ("verl", {"algorithm.adv_estimator": "rloo",
                                                  "actor_rollout_ref.actor.loss_agg_mode": "token-mean"}))
    rows = setting_rows(name, QUICK)
    assert rows[0]["objective"] == "warn"
    claim = next(c for text, c in claims(rows).items() if text.startswith("each framework"))
    assert claim.passed is False
