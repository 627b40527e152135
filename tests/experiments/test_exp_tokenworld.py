"""The token-world experiments at reduced size: the episode beside the book, noise draws, the learning-rate table."""

import pytest

from support.experiments import check_quick


@pytest.fixture(scope="module")
def gae_result():
    return check_quick("tokenworld-gae")


@pytest.fixture(scope="module")
def training_result():
    return check_quick("tokenworld-training")


@pytest.mark.experiment("tokenworld-gae")
def test_tokenworld_gae_tradeoff(gae_result):
    rows = {(r["noise"], r["lambda"]): r for r in gae_result.tables["tradeoff"]}
    # Bias at lambda 0 grows with the critic's noise; the noisy critic's best lambda is inside (0, 1).
    assert rows[(0.0, 0.0)]["bias2 exact"] < rows[(0.05, 0.0)]["bias2 exact"] < rows[(0.15, 0.0)]["bias2 exact"]
    noisy = [r for r in gae_result.tables["tradeoff"] if r["noise"] == 0.15]
    assert 0.0 < min(noisy, key=lambda r: r["total exact"])["lambda"] < 1.0
    draws = gae_result.tables["noise_draws"]
    assert {(r["critic"], r["lambda"], r["quantity"]) for r in draws} >= {("V + noise 0.15", 0.0, "bias2")}
    assert all(r["min over draws"] <= r["book"] <= r["max over draws"] for r in draws)


@pytest.mark.experiment("tokenworld-gae")
def test_tokenworld_gae_episode_beside_the_book(gae_result):
    rows = gae_result.tables["episode"]
    assert [r["V book"] for r in rows] == [0.850, 0.553, 0.417, 0.572, 0.227, 0.456]
    for r in rows:
        assert r["GAE from book V"] == pytest.approx(r["GAE book"], abs=0.0015)
        assert r["exact A"] == pytest.approx(r["exact A book"], abs=5e-4)


@pytest.mark.experiment("tokenworld-training")
def test_tokenworld_training_tables(training_result):
    plain = {r["method"]: r for r in training_result.tables["training"]}
    shifted = {r["method"]: r for r in training_result.tables["training_shifted"]}
    assert shifted["no baseline"]["sd@25"] >= 5 * plain["no baseline"]["sd@25"]
    lrs = [r["lr"] for r in training_result.tables["learning_rates"]]
    assert lrs == ["0.25", "0.5 (fitted)", "1", "2"]
    assert all(r["no-baseline sd ratio under +5"] > 1 for r in training_result.tables["learning_rates"])
