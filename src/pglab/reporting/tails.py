"""Tails and quantiles of Student's t and the chi-square distribution, in plain Python (no scipy).

The claims of an experiment turn statistics into p-values here (:meth:`pglab.reporting.result.Result.check_z`), and
:mod:`pglab.stats` re-exports these functions for everything else.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

T_SERIES_MAX_DF = 200
"""Above this many degrees of freedom :func:`t_quantile` uses the Cornish-Fisher expansion (error below 1e-10)."""


def _t_central_mass(theta: float, df: int) -> float:
    """P(|T| < sqrt(df) tan theta) for Student's t with integer ``df`` >= 1, theta in [0, pi/2].

    The finite series in cos(theta) of Abramowitz & Stegun 26.7.3 (odd df) and 26.7.4 (even df).
    """
    sin, cos = math.sin(theta), math.cos(theta)
    if df % 2 == 0:
        term = total = 1.0
        for k in range(1, df // 2):
            term *= cos * cos * (2 * k - 1) / (2 * k)
            total += term
        return sin * total
    term = total = cos if df > 1 else 0.0
    for k in range(1, (df - 1) // 2):
        term *= cos * cos * (2 * k) / (2 * k + 1)
        total += term
    return 2.0 / math.pi * (theta + sin * total)


def _t_quantile_large_df(z: float, df: int) -> float:
    """Cornish-Fisher expansion of the t quantile in the normal quantile z (Abramowitz & Stegun 26.7.5), to 1/df^4."""
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def t_upper_tail(t: float, df: int) -> float:
    """P(T >= t) for Student's t with integer ``df`` >= 1, from the exact finite series of :func:`t_quantile`."""
    if int(df) != df or df < 1:
        raise ValueError(f"t_upper_tail needs an integer df >= 1, got {df}")
    one_side = (1.0 - _t_central_mass(math.atan(abs(t) / math.sqrt(df)), int(df))) / 2
    return one_side if t >= 0 else 1.0 - one_side


def chi2_upper_tail(x: float, df: int) -> float:
    """P(X >= x) for a chi-square X with integer ``df`` >= 1, from its exact finite series (Poisson terms for even
    df, the normal tail plus terms for odd df); chi2_upper_tail(9.488, 4) = 0.05."""
    if int(df) != df or df < 1:
        raise ValueError(f"chi2_upper_tail needs an integer df >= 1, got {df}")
    if x <= 0:
        return 1.0
    half = x / 2
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= half / i
            total += term
        return min(1.0, math.exp(-half) * total)
    term, total = math.sqrt(x), 0.0
    for i in range(1, (df + 1) // 2):
        total += term
        term *= x / (2 * i + 1)
    return min(1.0, math.erfc(math.sqrt(half)) + math.sqrt(2 / math.pi) * math.exp(-half) * total)


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (an integer >= 1): t with P(T <= t) = p.

    Up to T_SERIES_MAX_DF the exact finite series of the t distribution is inverted by bisection in the angle
    theta = atan(t / sqrt(df)) (to float64 roundoff); above it, the Cornish-Fisher expansion around the normal
    quantile. t_quantile(0.975, 4) = 2.776.
    """
    if not 0.0 < p < 1.0 or int(df) != df or df < 1:
        raise ValueError(f"t_quantile needs 0 < p < 1 and an integer df >= 1, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df > T_SERIES_MAX_DF:
        return _t_quantile_large_df(NormalDist().inv_cdf(p), df)
    target, low, high = 2.0 * p - 1.0, 0.0, math.pi / 2
    while True:
        middle = (low + high) / 2
        if not low < middle < high:
            return math.sqrt(df) * math.tan(middle)
        low, high = (middle, high) if _t_central_mass(middle, df) < target else (low, middle)
