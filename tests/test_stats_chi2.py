"""pglab.stats.chi2_upper_tail against printed chi-square quantiles and its own series limits."""

import math

import pytest

from pglab.stats import chi2_upper_tail

QUANTILES = {1: (3.841459, 6.634897), 2: (5.991465, 9.210340), 3: (7.814728, 11.344867), 4: (9.487729, 13.276704),
             63: (82.528727, 92.010024)}
"""df -> the 95% and 99% quantiles of the chi-square (the standard tables, 6 decimals)."""


@pytest.mark.parametrize("df", sorted(QUANTILES))
def test_upper_tail_at_the_table_quantiles(df):
    q95, q99 = QUANTILES[df]
    assert chi2_upper_tail(q95, df) == pytest.approx(0.05, abs=2e-7)
    assert chi2_upper_tail(q99, df) == pytest.approx(0.01, abs=2e-7)


def test_closed_forms_and_edges():
    assert chi2_upper_tail(3.0, 2) == pytest.approx(math.exp(-1.5), rel=1e-14)           # df 2: exp(-x / 2)
    assert chi2_upper_tail(2.0, 1) == pytest.approx(math.erfc(1.0), rel=1e-14)           # df 1: 2 P(Z >= sqrt x)
    assert chi2_upper_tail(0.0, 5) == 1.0 and chi2_upper_tail(-1.0, 5) == 1.0
    assert chi2_upper_tail(500.0, 7) < 1e-90
    with pytest.raises(ValueError, match="integer df >= 1"):
        chi2_upper_tail(1.0, 0)
