"""The bandit-variance experiment end to end: every claim holds and the report is written."""

import pytest

from pglab.experiments import run_experiment


@pytest.fixture(scope="module")
def result():
    return run_experiment("bandit-variance", quick=True)


def test_every_claim_holds(result):
    assert result.checks and result.passed, [c for c in result.checks if not c.passed]


def test_seed_numbers(result):
    sweep = {row["b"]: row for row in result.tables["baseline_sweep"]}
    assert sweep[0.0]["exact"] == pytest.approx(33.0625)
    assert sweep[6.5]["exact"] == pytest.approx(1.375)
    for row in sweep.values():  # the book's 200,000-sample numbers are within 3 of their own standard errors
        assert abs(row["book"] - row["exact"]) <= 3 * row["se"] * (50_000 / 200_000) ** 0.5
    rows = {r["quantity"]: r["ours"] for r in result.tables["optimal_baseline_and_skewed_policy"]}
    assert rows["skewed theta: V"] == pytest.approx(7.4225, abs=5e-5)
    assert rows["skewed theta: variance, no baseline"] == pytest.approx(19.48, abs=0.01)
    assert rows["skewed theta: variance, b = V"] == pytest.approx(1.291, abs=5e-4)
