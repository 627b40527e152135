"""Paired seed comparisons: the t quantile, the paired difference's interval, the seeds a comparison needs."""

import math
from statistics import NormalDist

import numpy as np
import pytest

from pglab.reporting.result import Result
from pglab.stats import (
    PAIRED_TABLE,
    T_SERIES_MAX_DF,
    _t_quantile_large_df,
    compare_seeds,
    paired_difference,
    paired_row,
    seeds_needed,
    t_quantile,
)

T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
"""Student's t 0.975 quantiles for 1..10 degrees of freedom as printed tables give them."""
ROUNDOFF = 1e-12
"""float64 roundoff of the bisection and the closed forms."""


@pytest.mark.parametrize("p", [0.6, 0.8, 0.975, 0.995])
def test_t_quantile_matches_the_closed_forms_at_one_and_two_degrees(p):
    assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=ROUNDOFF)   # Cauchy
    assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=ROUNDOFF)


def test_t_quantile_matches_the_printed_table_and_is_odd():
    for df, printed in enumerate(T_975, start=1):
        assert abs(t_quantile(0.975, df) - printed) <= 5e-4       # the table prints 3 decimals
        assert t_quantile(0.025, df) == -t_quantile(0.975, df)
    assert t_quantile(0.5, 7) == pytest.approx(0.0, abs=ROUNDOFF)


@pytest.mark.parametrize("p", [0.8, 0.975, 0.995])
def test_the_large_df_expansion_meets_the_series_where_it_takes_over(p):
    assert _t_quantile_large_df(NormalDist().inv_cdf(p), T_SERIES_MAX_DF) == pytest.approx(
        t_quantile(p, T_SERIES_MAX_DF), abs=1e-9)
    assert t_quantile(p, T_SERIES_MAX_DF) > t_quantile(p, T_SERIES_MAX_DF + 1) > t_quantile(p, 10**7)


def test_paired_difference_by_hand():
    a, b = [1.0, 2.0, 3.0, 4.0], [0.5, 2.5, 1.0, 3.0]           # differences 0.5, -0.5, 2, 1
    d = paired_difference(a, b)
    sd = math.sqrt((0.25**2 + 1.25**2 + 1.25**2 + 0.25**2) / 3)
    half = 3.182446305284263 * sd / 2                            # t_{0.975, 3} to 16 digits
    assert (d.mean, d.sd, d.se, d.seeds) == pytest.approx((0.75, sd, sd / 2, 4), rel=ROUNDOFF)
    assert (d.low, d.high) == pytest.approx((0.75 - half, 0.75 + half), rel=1e-9)


def test_paired_difference_refuses_what_it_cannot_pair():
    with pytest.raises(ValueError, match="same seeds"):
        paired_difference([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="same seeds"):
        paired_difference([1.0], [2.0])
    with pytest.raises(ValueError, match="finite"):
        paired_difference([1.0, math.nan], [2.0, 3.0])


def test_the_interval_covers_the_true_difference_at_its_confidence():
    """5 seeds share a large seed effect (sd 3) that pairing removes; the rest is noise of sd 1 per setting."""
    rng = np.random.default_rng(0)
    draws, seeds, true = 4000, 5, 0.4
    shared = 3.0 * rng.standard_normal((draws, seeds))
    a = shared + true + rng.standard_normal((draws, seeds))
    b = shared + rng.standard_normal((draws, seeds))
    for confidence in (0.95, 0.8):
        intervals = [paired_difference(x, y, confidence=confidence) for x, y in zip(a, b)]
        covered = np.mean([d.low <= true <= d.high for d in intervals])
        assert abs(covered - confidence) <= 3 * math.sqrt(confidence * (1 - confidence) / draws)


def test_seeds_needed_by_hand():
    # one sd of effect: the normal approximation (1.960 + 0.842)^2 = 7.85 -> 8; with t quantiles at 9 degrees of
    # freedom (2.262 + 0.883)^2 = 9.89 <= 10, at 8 (2.306 + 0.889)^2 = 10.21 > 9
    assert seeds_needed(1.0, 1.0) == 10
    assert seeds_needed(-2.0, 2.0) == 10                         # only |effect| / sd counts
    assert seeds_needed(0.5, 1.0) == 34
    assert seeds_needed(1.0, 0.0) == 2                           # no spread: the fewest a t test takes
    assert seeds_needed(1e-3, 1.0) >= (1.959964 + 0.841621) ** 2 * 1e6
    with pytest.raises(ValueError, match="do not differ"):
        seeds_needed(0.0, 1.0)


@pytest.mark.parametrize("effect", [1.0, 0.6])
def test_seeds_needed_reaches_the_power_and_one_seed_fewer_does_not_exceed_it(effect):
    """Simulated paired t tests at the returned number of seeds and one fewer, against the asked power of 0.8."""
    n, draws = seeds_needed(effect, 1.0), 6000
    rng = np.random.default_rng(1)
    se = math.sqrt(0.8 * 0.2 / draws)
    power = {}
    for seeds in (n, n - 1):
        x = effect + rng.standard_normal((draws, seeds))
        t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(seeds))
        power[seeds] = np.mean(np.abs(t) > t_quantile(0.975, seeds - 1))
    assert power[n] >= 0.8 - 3 * se
    assert power[n - 1] <= 0.8 + 3 * se


def test_compare_seeds_adds_one_row_per_pair_to_the_result():
    result = Result("x", {})
    per_seed = {"new": [3.0, 5.0, 4.0, math.nan], "old": [1.0, 2.0, 2.5, 0.0], "same": [3.0, 5.0, 4.0, 7.0]}
    compare_seeds(result, "return", per_seed, [("new", "old")])
    compare_seeds(result, "return", per_seed, [("same", "new")])
    first, second = result.tables[PAIRED_TABLE]
    d = paired_difference([3.0, 5.0, 4.0], [1.0, 2.0, 2.5])       # the NaN seed is left out of both
    assert first == {"quantity": "return", "compared": "new minus old", "seeds": 3, "mean difference": d.mean,
                     "se": d.se, "95% CI low": d.low, "95% CI high": d.high, "separated": "yes",
                     "sd of differences": d.sd, "seeds needed": seeds_needed(d.mean, d.sd)}
    assert (second["seeds"], second["mean difference"], second["seeds needed"]) == (3, 0.0, None)
    assert second["separated"] == "no"


def test_a_single_seed_gives_the_difference_without_an_interval():
    row = paired_row("pass rate", "trained", "base", [0.5], [0.25])
    assert row == {"quantity": "pass rate", "compared": "trained minus base", "seeds": 1, "mean difference": 0.25}
    with pytest.raises(ValueError, match="seed by seed"):
        paired_row("pass rate", "trained", "base", [0.5, 0.6], [0.25])
