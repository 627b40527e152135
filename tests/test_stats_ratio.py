"""The paired ratio of means and its delta-method standard error."""

import numpy as np
import pytest

from pglab.stats import paired_mean_ratio


def test_the_delta_method_se_matches_the_spread_of_the_ratio_over_repeats():
    """Correlated positive pairs, N = 50, 3,000 repeats: the mean predicted se equals the sd of the ratios within 4
    standard errors of that sd (its relative se is 1 / sqrt(2 (repeats - 1)))."""
    rng = np.random.default_rng(0)
    ratios, ses = [], []
    for _ in range(3000):
        b = rng.gamma(4.0, 1.0, 50)
        a = 2.0 * b + rng.normal(0.0, 1.5, 50)
        ratio, se = paired_mean_ratio(a, b)
        ratios.append(ratio)
        ses.append(se)
    spread = np.std(ratios, ddof=1)
    assert abs(np.mean(ses) - spread) < 4 * spread / np.sqrt(2 * 2999)


def test_runs_that_are_zero_in_both_keep_the_se_finite():
    a, b = np.array([0.0, 0.0, 0.0, 3.0, 5.0]), np.array([0.0, 0.0, 0.0, 1.0, 2.0])
    ratio, se = paired_mean_ratio(a, b)
    assert ratio == pytest.approx(8 / 3) and np.isfinite(se) and se > 0


def test_a_ratio_needs_paired_samples():
    with pytest.raises(ValueError, match="paired"):
        paired_mean_ratio(np.ones(3), np.ones(4))
