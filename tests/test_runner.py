"""run_seeds: every backend gives the same stacked numbers for the same seeds."""

import importlib.util

import numpy as np
import pytest
import torch

from pglab.runner import run_seeds


def noisy_curve(seed, updates=5, scale=1.0):
    """A tiny training loop: a random walk whose every draw comes from the seed."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.zeros(3)
    for _ in range(updates):
        x = x + scale * torch.randn(3, generator=gen)
        yield {"x": x.clone().numpy(), "norm": float(x.norm())}


def test_serial_stacks_to_seeds_by_updates():
    out = run_seeds(noisy_curve, [0, 1, 2], updates=4)
    assert out["x"].shape == (3, 4, 3) and out["norm"].shape == (3, 4)
    again = run_seeds(noisy_curve, [2], updates=4)
    np.testing.assert_array_equal(out["x"][2], again["x"][0])


@pytest.mark.integration
def test_process_equals_serial():
    serial = run_seeds(noisy_curve, range(4), updates=6, scale=0.5)
    process = run_seeds(noisy_curve, range(4), backend="process", workers=2, updates=6, scale=0.5)
    for key in serial:
        np.testing.assert_array_equal(serial[key], process[key])


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")
def test_ray_equals_serial():
    serial = run_seeds(noisy_curve, range(3), updates=3)
    distributed = run_seeds(noisy_curve, range(3), backend="ray", workers=2, updates=3)
    for key in serial:
        np.testing.assert_array_equal(serial[key], distributed[key])


def test_plain_points_and_unequal_lengths():
    def counts(seed):
        yield from range(seed + 1)

    assert run_seeds(lambda seed: iter([seed, seed * 2]), [1, 2]).tolist() == [[1, 2], [2, 4]]
    with pytest.raises(ValueError, match="same number of points"):
        run_seeds(counts, [0, 1])
    with pytest.raises(ValueError, match="at least one seed"):
        run_seeds(counts, [])
