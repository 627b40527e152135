"""Diagnostics: total variance, squared deviations, cosines, batch cosines, and the bootstrap."""

import numpy as np
import pytest
import torch

from pglab.estimators import batch_cosine, cosine, pair_cosines, squared_deviations, total_variance
from pglab.stats import bootstrap_se, standard_error


def test_total_variance_is_trace_of_covariance():
    x = torch.randn(500, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert total_variance(x).item() == pytest.approx(torch.cov(x.T).trace().item(), rel=1e-12)


def test_squared_deviations_give_the_variance_and_its_standard_error():
    x = torch.randn(4000, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    sq = squared_deviations(x)
    assert sq.mean().item() * 4000 / 3999 == pytest.approx(total_variance(x).item(), rel=1e-12)
    # For standard normal draws in 3 dimensions |g - mean|^2 is ~ chi^2_3: variance 2 * 3.
    assert (sq.std() / 4000**0.5).item() == pytest.approx((6 / 4000) ** 0.5, rel=0.1)


def test_cosine():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert cosine(x, x) == pytest.approx(1.0)
    assert cosine(x, -x) == pytest.approx(-1.0)
    assert cosine(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0])) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="as many elements"):
        cosine(x, torch.ones(3))


def test_standard_error_of_a_mean():
    x = torch.tensor([[1.0, 2.0], [3.0, 2.0], [5.0, 2.0]], dtype=torch.float64)
    assert standard_error(x).tolist() == pytest.approx([2.0 / 3**0.5, 0.0])


def test_bootstrap_se_of_a_mean():
    rng = np.random.default_rng(0)
    samples = rng.normal(size=400)
    se = bootstrap_se(np.mean, samples, resamples=400, rng=rng)
    # The bootstrap se of a mean estimates sd / sqrt(n); its own relative error is about 1 / sqrt(2 * 400).
    assert se == pytest.approx(samples.std() / 400**0.5, rel=0.15)


def test_batch_cosine_signal_and_noise():
    gen = torch.Generator().manual_seed(0)
    signal = torch.ones(400, 8, dtype=torch.float64)
    assert batch_cosine(signal, [10, 100], pairs=5, generator=gen) == pytest.approx({10: 1.0, 100: 1.0})
    noise = torch.randn(4000, 50, generator=gen, dtype=torch.float64)
    pairs = 200
    cos = batch_cosine(noise, [20], pairs=pairs, generator=gen)[20]
    # The cosine of two independent isotropic vectors in 50 dimensions has sd 1/sqrt(50).
    assert abs(cos) <= 3 * (1 / 50**0.5) / pairs**0.5


def test_pair_cosines_equal_the_plain_loop_over_batch_means():
    """The Gram-matrix cosines equal forming both [P] means and taking their cosine, with the same draws."""
    per_sample = torch.randn(30, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64) + 0.3
    fast = pair_cosines(per_sample, 6, 25, torch.Generator().manual_seed(2))
    gen = torch.Generator().manual_seed(2)
    for value in fast:
        order = torch.randperm(30, generator=gen)
        first, second = per_sample[order[:6]].mean(0), per_sample[order[6:12]].mean(0)
        assert float(value) == pytest.approx(cosine(first, second), abs=1e-12)


def test_pair_cosines_refuse_bad_sizes():
    x = torch.ones(10, 3)
    for size, pairs in ((6, 1), (0, 1), (2, 0)):
        with pytest.raises(ValueError, match="batch size|pairs"):
            pair_cosines(x, size, pairs, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"\[N, P\]"):
        pair_cosines(torch.ones(10), 2, 1, torch.Generator().manual_seed(0))
