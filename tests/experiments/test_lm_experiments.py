"""lm-kl and lm-beta-optimum end to end at reduced size (the quick embedded default is built in seconds)."""

import pytest

pytest.importorskip("transformers")
pytest.importorskip("vaderSentiment")

from support.experiments import check_quick


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """Build the quick embedded default in a fresh cache folder, as a first run in CI does."""
    patch = pytest.MonkeyPatch()
    patch.setenv("PGLAB_CACHE", str(tmp_path_factory.mktemp("pglab-cache")))
    yield
    patch.undo()


@pytest.mark.experiment("lm-beta-optimum")
def test_lm_beta_optimum_reaches_pi_star():
    result = check_quick("lm-beta-optimum")
    assert result.checks and result.passed, result.failed_checks()
    curve = [row["kl_pi_to_pi_star"] for row in result.tables["kl_to_optimum"]]
    assert curve[-1] < curve[0] / 5


@pytest.mark.experiment("lm-kl")
def test_lm_kl_quick_states_every_claim_over_three_seeds():
    result = check_quick("lm-kl")
    rows = {(r["seed"], r["beta"], r["when"]): r for r in result.tables["before_after"]}
    assert {seed for seed, _, _ in rows} == {0, 1, 2}
    for seed in (0, 1, 2):
        assert rows[(seed, 0.0, "start")]["kl_exact"] == pytest.approx(0.0, abs=1e-9)
        assert rows[(seed, 0.0, "end")]["kl_exact"] > rows[(seed, 0.2, "end")]["kl_exact"]
    check = result.tables["worked_example_check"][0]
    assert check["sums_agree"] and check["beta"] == 0.05
    assert {"curves"} <= set(result.figures)
    claims = [c.claim for c in result.checks]
    assert len(claims) == 3 + 2 * 3 + 2 + 3 and all(c.tolerance for c in result.checks)
    assert sum(c.startswith("beta = 0: ") and "k1" not in c for c in claims) == 3
    k1 = [c for c in result.checks if "k1 estimate" in c.claim]
    assert len(k1) == 3 and all(c.passed for c in k1), k1
    assert all(c.passed is None for c in result.checks if c not in k1) and result.passed   # not evaluated at quick size
