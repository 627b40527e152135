"""The token-world experiments at reduced size: their qualitative claims hold."""

import pytest

from pglab.experiments import run_experiment

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gae_result():
    return run_experiment("tokenworld-gae", quick=True)


@pytest.fixture(scope="module")
def training_result():
    return run_experiment("tokenworld-training", quick=True)


def test_tokenworld_gae_claims(gae_result):
    assert gae_result.passed, gae_result.failed_checks()
    rows = {(r["noise"], r["lambda"]): r for r in gae_result.tables["tradeoff"]}
    assert rows[(0.0, 0.0)]["bias2 exact"] < 1e-24 and rows[(0.0, 0.0)]["variance exact"] < 1e-24
    assert abs(rows[(0.0, 1.0)]["variance"] - 0.130) <= 0.005
    # Variance comes from the future tokens, not from the critic; bias at lambda 0 grows with the critic's noise.
    variances = [rows[(n, 1.0)]["variance exact"] for n in (0.0, 0.05, 0.15)]
    assert max(variances) - min(variances) < 1e-12
    assert rows[(0.0, 0.0)]["bias2 exact"] < rows[(0.05, 0.0)]["bias2 exact"] < rows[(0.15, 0.0)]["bias2 exact"]
    noisy = [r for r in gae_result.tables["tradeoff"] if r["noise"] == 0.15]
    assert 0.0 < min(noisy, key=lambda r: r["total exact"])["lambda"] < 1.0
    assert set(gae_result.figures) == {"tradeoff"}


def test_tokenworld_gae_episode_beside_the_seed(gae_result):
    rows = gae_result.tables["episode"]
    assert [r["V seed"] for r in rows] == [0.850, 0.553, 0.417, 0.572, 0.227, 0.456]
    for r in rows:
        assert r["GAE from seed V"] == pytest.approx(r["GAE seed"], abs=0.0015)
        assert r["exact A"] == pytest.approx(r["exact A seed"], abs=5e-4)


def test_tokenworld_training_claims(training_result):
    assert training_result.passed, training_result.failed_checks()
    plain = {r["method"]: r for r in training_result.tables["training"]}
    shifted = {r["method"]: r for r in training_result.tables["training_shifted"]}
    # Leave-one-out is blind to the shift: every number is identical (==, not approximately).
    ours = [k for k in plain["leave-one-out"] if not k.startswith("book")]
    assert [plain["leave-one-out"][k] for k in ours] == [shifted["leave-one-out"][k] for k in ours]
    assert shifted["no baseline"]["sd@25"] >= 5 * plain["no baseline"]["sd@25"]
    # A critic that starts at 0 slows lambda = 0 down; raising lambda removes the handicap.
    assert plain["GAE lambda 0"]["success@25"] < plain["GAE lambda 0.95"]["success@25"]
    assert plain["GAE lambda 0"]["success@25"] < plain["leave-one-out"]["success@25"]
    assert set(training_result.figures) == {"curves"}
