"""frozenlake-static and frozenlake-race at reduced size: the ladder of estimators and the race's ordering."""

import numpy as np
import pytest

from pglab.experiments import run_experiment
from pglab.experiments.frozenlake_race import trailing_mean, updates_to_target


@pytest.fixture(scope="module")
def static():
    return run_experiment("frozenlake-static", quick=True)


@pytest.fixture(scope="module")
def race():
    return run_experiment("frozenlake-race", quick=True)


def test_static_claims_hold(static):
    assert static.checks and static.passed, [c for c in static.checks if not c.passed]


def test_four_divisors(static):
    rows = {r["divisor"]: r for r in static.tables["four_divisors"]}
    assert rows["total steps"]["cos to episodes"] == pytest.approx(1.0, abs=1e-12)
    assert rows["a constant"]["cos to episodes"] == pytest.approx(1.0, abs=1e-12)
    assert rows["own length"]["cos to episodes"] < 1.0
    assert rows["total steps"]["grad norm"] < rows["episodes"]["grad norm"]


def test_five_estimator_ladder(static):
    rows = {r["estimator"]: r for r in static.tables["five_estimators"]}
    assert all(r["cos(mean, exact)"] >= 0.9 for r in rows.values())
    rel = {k: r["relative variance"] for k, r in rows.items()}
    assert rel["reward-to-go"] > rel["centred"] > rel["exact baseline"]
    assert rel["reward-to-go"] > rel["normalised"] > rel["exact baseline"]


def test_race_claims_hold(race):
    assert race.checks and race.passed, [c for c in race.checks if not c.passed]
    rows = {r["variant"]: r for r in race.tables["race"]}
    medians = {v: r["median updates to 90%"] for v, r in rows.items()}
    assert min(medians, key=medians.get) == "normalised"
    assert set(race.figures) == {"success_rate", "entropy"}
    assert all(r["final entropy (median)"] < np.log(4) for r in rows.values())  # every arm spent entropy


def test_updates_to_target_counts_windows():
    success = np.array([[0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]], dtype=float)
    assert trailing_mean(success, 2).tolist() == [[0, 0.5, 1, 1, 1], [0, 0, 0, 0, 0]]
    assert updates_to_target(success, 2, 0.9).tolist() == [2, 6]  # never reached: the number of updates
