"""The family-wise false-alarm rate of an experiment's statistical claims: Holm's step-down in Result."""

import math
import random
from statistics import NormalDist

import pytest

from pglab.reporting.result import Result
from pglab.stats import t_quantile, t_upper_tail


def holm_by_hand(p_values: list[float], alpha: float) -> list[bool]:
    """Which claims hold: Holm (1979) written as a loop over the sorted p-values."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    held = [True] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] >= alpha / (len(p_values) - rank):
            break
        held[i] = False
    return held


def test_holm_matches_the_loop_on_random_families():
    rng = random.Random(0)
    for _ in range(300):
        p = [rng.random() ** rng.choice([1, 3, 8]) for _ in range(rng.randint(1, 12))]
        result = Result("family", {})
        for i, value in enumerate(p):
            result.check_p(f"claim {i}", value, value, "")
        assert [c.passed for c in result.checks] == holm_by_hand(p, result.family_alpha)


def test_a_later_claim_rejudges_the_earlier_ones():
    result = Result("family", {})
    assert not result.check_p("first", 0.0, 0.006, "")              # m = 1: 0.006 < 0.01 fails
    result.check_p("second", 0.0, 0.5, "")
    assert result.checks[0].passed is True                           # m = 2: 0.006 >= 0.01 / 2 holds


def test_honest_reruns_fail_a_family_at_most_at_its_rate():
    """20 claims with true nulls (independent normal estimates at their targets), 4,000 reruns: the share of reruns
    with any failed claim is at most alpha within 3 binomial standard errors (Holm is exact for Bonferroni's
    bound, so the share is close to but below 1%)."""
    rng = random.Random(1)
    runs, failed = 4000, 0
    for _ in range(runs):
        result = Result("family", {})
        for i in range(20):
            result.check_z(f"claim {i}", rng.gauss(0.0, 1.0), 0.0, 1.0)
        failed += not result.passed
    alpha = Result("x", {}).family_alpha
    assert failed / runs <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)


def test_a_wrong_value_fails():
    result = Result("family", {})
    for i in range(10):
        result.check_z(f"claim {i}", 0.0, 0.0, 1.0)
    result.check_z("off by five standard errors", 5.0, 0.0, 1.0)
    assert [c.claim for c in result.failed_checks()] == ["off by five standard errors"]


@pytest.mark.parametrize("side, value, p", [("both", 2.0, 2 * NormalDist().cdf(-2.0)),
                                            ("at_least", -2.0, NormalDist().cdf(-2.0)),
                                            ("at_least", 2.0, NormalDist().cdf(2.0)),
                                            ("at_most", 2.0, NormalDist().cdf(-2.0))])
def test_check_z_sides(side, value, p):
    result = Result("family", {})
    result.check_z("claim", value, 0.0, 1.0, side=side)
    assert result.checks[0].p_value == pytest.approx(p, abs=1e-14)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 30, 250])
@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.999])
def test_t_upper_tail_inverts_t_quantile(df, p):
    t = t_quantile(p, df)
    assert t_upper_tail(t, df) == pytest.approx(1 - p, abs=1e-9)
    assert t_upper_tail(-t, df) == pytest.approx(p, abs=1e-9)


def test_exact_claims_are_counted_apart_and_quick_claims_not_at_all():
    result = Result("family", {}, quick=True)
    result.check_close("a closed form", 1.0, 1.0, 1e-12)
    result.check_z("an estimate", 0.1, 0.0, 1.0)
    result.check_z("a full-size estimate", 9.0, 0.0, 1.0, full_size=True)
    assert result.family == {"family_alpha": 0.01, "statistical_claims": 1, "exact_claims": 1}
    assert result.passed and "at most 1%" in result.family_line


@pytest.mark.parametrize("bad", [{"se": 0.0}, {"se": float("nan")}, {"side": "left"}])
def test_check_z_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        Result("family", {}).check_z("claim", 0.0, 0.0, **{"se": 1.0, **bad})
