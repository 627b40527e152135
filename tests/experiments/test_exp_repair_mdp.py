"""repair-mdp-gradient end to end: the Monte Carlo gradient agrees with the exact one, baselines stay unbiased."""

import pytest

from pglab.cli import main
from support.experiments import check_quick

pytestmark = pytest.mark.experiment


@pytest.fixture(scope="module")
def result():
    return check_quick("repair-mdp-gradient")


@pytest.mark.experiment("repair-mdp-gradient")
def test_monte_carlo_gradient_and_surrogate_shift(result):
    rows = {r["quantity"]: r["ours"] for r in result.tables["monte_carlo"]}
    assert rows["cosine to the exact gradient"] >= 0.99
    assert 0.05 < rows["J exact"] < 0.5  # the policy passes in a minority of episodes
    shifts = {r["return shift"]: r for r in result.tables["surrogate_shift"]}
    assert set(shifts) == {"0", "-J", "+5"}
    # The value moves with the shift; the direction survives it, with more noise at +5.
    assert len({round(r["surrogate value"], 3) for r in shifts.values()}) == 3
    assert shifts["+5"]["noise level"] > 5 * shifts["0"]["noise level"]
    for row in shifts.values():
        assert "book value" in row and "book cosine" in row


@pytest.mark.experiment("repair-mdp-gradient")
def test_unbiasedness_table(result):
    rows = {r["baseline"]: r for r in result.tables["unbiasedness"]}
    assert list(rows) == ["none", "exact J", "batch mean", "constant 1"]
    for row in rows.values():
        assert row["relative error of the mean"] <= 2 * row["noise level"]
        assert "book variance" in row
    assert rows["exact J"]["per-batch variance"] < rows["none"]["per-batch variance"] < rows["constant 1"][
        "per-batch variance"]


def test_cli_writes_the_report(tmp_path):
    assert main(["reproduce", "repair-mdp-gradient", "--quick", "--out", str(tmp_path)]) == 0
    for name in ("result.json", "report.md", "monte_carlo.csv", "surrogate_shift.csv", "unbiasedness.csv"):
        assert (tmp_path / name).exists(), name
