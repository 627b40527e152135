"""lm-kl and lm-beta-optimum end to end at reduced size (the quick embedded default is built in seconds)."""

import pytest

pytest.importorskip("transformers")
pytest.importorskip("vaderSentiment")

from test_experiments import check_quick


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """Build the quick embedded default in a fresh cache folder, as a first run in CI does."""
    patch = pytest.MonkeyPatch()
    patch.setenv("PGLAB_CACHE", str(tmp_path_factory.mktemp("pglab-cache")))
    yield
    patch.undo()


@pytest.mark.slow
def test_lm_beta_optimum_reaches_pi_star():
    result = check_quick("lm-beta-optimum")
    assert result.checks and result.passed, result.failed_checks()
    curve = [row["kl_pi_to_pi_star"] for row in result.tables["kl_to_optimum"]]
    assert curve[-1] < curve[0] / 5


@pytest.mark.slow
def test_lm_kl_quick_shows_the_collapse_and_the_leash():
    result = check_quick("lm-kl")
    rows = {(r["beta"], r["when"]): r for r in result.tables["before_after"]}
    assert rows[(0.0, "start")]["kl_exact"] == pytest.approx(0.0, abs=1e-9)
    assert rows[(0.0, "end")]["kl_exact"] > rows[(0.2, "end")]["kl_exact"]
    assert rows[(0.0, "end")]["distinct_1"] < rows[(0.0, "start")]["distinct_1"]
    check = result.tables["worked_example_check"][0]
    assert check["sums_agree"] and check["beta"] == 0.05
    assert {"curves"} <= set(result.figures)
    full_size_only = ("exact KL at the end", "beta = 0.05: exact KL stops growing")
    assert sum(c.claim.startswith(full_size_only) for c in result.checks) == 2
    held = [c for c in result.checks if not c.claim.startswith(full_size_only)]
    assert len(held) == 5 and all(c.passed for c in held), [c for c in held if not c.passed]
