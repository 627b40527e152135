"""total_variance and batch_cosine."""

import pytest
import torch

from pglab.estimators import batch_cosine, total_variance


def test_total_variance_is_trace_of_covariance():
    x = torch.randn(500, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert total_variance(x).item() == pytest.approx(torch.cov(x.T).trace().item(), rel=1e-12)


def test_batch_cosine_signal_and_noise():
    gen = torch.Generator().manual_seed(0)
    signal = torch.ones(400, 8, dtype=torch.float64)
    assert batch_cosine(signal, [10, 100], pairs=5, generator=gen) == pytest.approx({10: 1.0, 100: 1.0})
    noise = torch.randn(4000, 50, generator=gen, dtype=torch.float64)
    pairs = 200
    cos = batch_cosine(noise, [20], pairs=pairs, generator=gen)[20]
    # The cosine of two independent isotropic vectors in 50 dimensions has sd 1/sqrt(50).
    assert abs(cos) <= 3 * (1 / 50**0.5) / pairs**0.5
