"""bandit-variance: the closed forms beside the book's Monte Carlo numbers."""

import pytest

from support.experiments import check_quick


@pytest.mark.experiment("bandit-variance")
def test_book_numbers():
    result = check_quick("bandit-variance")
    sweep = {row["b"]: row for row in result.tables["baseline_sweep"]}
    assert sweep[0.0]["exact"] == pytest.approx(33.0625)
    assert sweep[6.5]["exact"] == pytest.approx(1.375)
    rows = {r["quantity"]: r["ours"] for r in result.tables["optimal_baseline_and_skewed_policy"]}
    assert rows["skewed theta: V"] == pytest.approx(7.4225, abs=5e-5)
    assert rows["skewed theta: variance, no baseline"] == pytest.approx(19.48, abs=0.01)
    assert rows["skewed theta: variance, b = V"] == pytest.approx(1.291, abs=5e-4)
    cases = {r["case"]: r["exact"] for r in result.tables["course_ch7_worked_example"]}
    assert cases["3 arms, c = 10, b = J"] == pytest.approx(cases["3 arms, c = 0, b = J"])  # the baseline absorbs c
