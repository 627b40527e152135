"""pglab.stats: closed forms, and simulations that land within bounds derived from the standard errors."""

import math

import numpy as np
import pytest
import torch

from pglab.reporting.result import Result
from pglab.stats import (
    binomial_se,
    book_tolerance,
    bootstrap_counts,
    bootstrap_se,
    check_one_more,
    count_tail_p,
    half_unit,
    mean_gap,
    prediction_half_width,
    rank_sum_p,
    sd_ratio,
    standard_error,
    variance_gap,
    variance_with_se,
)

REPEATS = 400
"""Simulated repetitions behind each calibration test: the sd of their estimates has relative se 1/sqrt(798) = 3.5%."""


def spread_of(estimates: list[float]) -> float:
    return float(np.std(estimates, ddof=1))


def test_standard_error_of_a_mean_closed_form():
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0]], dtype=torch.float64)
    expected = torch.tensor([math.sqrt(2) / math.sqrt(2), math.sqrt(8) / math.sqrt(2)], dtype=torch.float64)
    torch.testing.assert_close(standard_error(x), expected)


def test_binomial_se_closed_form_and_bad_input():
    assert binomial_se(0.25, 12) == pytest.approx(math.sqrt(0.25 * 0.75 / 12))
    assert binomial_se(0.0, 5) == 0.0
    with pytest.raises(ValueError, match="0 <= rate <= 1"):
        binomial_se(1.5, 10)


def test_binomial_se_matches_the_spread_of_simulated_shares():
    rng = np.random.default_rng(0)
    shares = rng.binomial(200, 0.3, size=REPEATS) / 200
    assert spread_of(list(shares)) == pytest.approx(binomial_se(0.3, 200), rel=4 * 0.035)


def test_variance_with_se_closed_form():
    samples = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]], dtype=torch.float64)
    var, se = variance_with_se(samples)
    assert var == pytest.approx(4 * 2 / 3)  # |x - (1, 1)|^2 = 2 for every sample; N - 1 = 3
    assert se == 0.0                         # every squared deviation is the same
    with pytest.raises(ValueError, match="N >= 2"):
        variance_with_se(samples[:1])


def test_variance_with_se_is_calibrated():
    """Over repetitions, the variance estimates scatter around the truth by about their own se."""
    gen = torch.Generator().manual_seed(1)
    truth, estimates, ses = 3.0 * 1.5**2, [], []
    for _ in range(REPEATS):
        var, se = variance_with_se(1.5 * torch.randn(500, 3, generator=gen, dtype=torch.float64))
        estimates.append(var)
        ses.append(se)
    assert abs(np.mean(estimates) - truth) <= 4 * spread_of(estimates) / math.sqrt(REPEATS)
    assert spread_of(estimates) == pytest.approx(np.mean(ses), rel=4 * 0.035)


def test_variance_gap_is_paired():
    """The same draws scaled by 2: the gap is 3 times the variance, known far better than two independent ones."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(1000, 4, generator=gen, dtype=torch.float64)
    gap, se = variance_gap(2 * x, x)
    assert gap == pytest.approx(3 * variance_with_se(x)[0])
    assert se == pytest.approx(3 * variance_with_se(x)[1])
    with pytest.raises(ValueError, match="as many rows"):
        variance_gap(x, x[:10])


def test_mean_gap_and_sd_ratio_are_calibrated():
    rng = np.random.default_rng(3)
    gaps, gap_ses, ratios, ratio_ses = [], [], [], []
    for _ in range(REPEATS):
        a, b = rng.normal(1.0, 2.0, 100), rng.normal(0.0, 1.0, 100)
        gap, se = mean_gap(a, b)
        gaps.append(gap)
        gap_ses.append(se)
        ratio, se = sd_ratio(a, b)
        ratios.append(ratio)
        ratio_ses.append(se)
    assert abs(np.mean(gaps) - 1.0) <= 4 * spread_of(gaps) / math.sqrt(REPEATS)
    assert spread_of(gaps) == pytest.approx(np.mean(gap_ses), rel=4 * 0.035)
    assert abs(np.mean(ratios) - 2.0) <= 4 * spread_of(ratios) / math.sqrt(REPEATS) + 0.02  # + the O(1/N) bias
    assert spread_of(ratios) == pytest.approx(np.mean(ratio_ses), rel=4 * 0.035 + 0.05)   # normal approximation
    with pytest.raises(ValueError, match="at least 2"):
        sd_ratio(np.ones(1), np.ones(5))


def test_book_tolerance():
    assert book_tolerance(0.1, 3.0) == pytest.approx(3 * math.sqrt(2) * 0.1)
    assert book_tolerance(0.3, 2.0, book_se=0.4) == pytest.approx(2 * 0.5)
    assert book_tolerance(0.3, 2.0, book_se=0.0) == pytest.approx(0.6)


@pytest.mark.parametrize("printed, half", [("4.15", 0.005), ("102", 0.5), ("0.0018", 0.00005), ("-0.2074", 0.00005),
                                           ("6.5", 0.05), ("1e-3", 0.0005)])
def test_half_unit_of_the_last_printed_digit(printed, half):
    assert half_unit(printed) == pytest.approx(half)


def test_bootstrap_se_of_a_mean_matches_the_standard_error():
    x = np.random.default_rng(4).normal(size=400)
    se = bootstrap_se(np.mean, x, 2000, np.random.default_rng(5))
    assert se == pytest.approx(x.std(ddof=1) / 20, rel=0.1)  # bootstrap noise: 1/sqrt(2 * 2000) plus (n-1)/n


def test_bootstrap_counts_resample_like_bootstrap_se():
    counts = bootstrap_counts(400, 2000, np.random.default_rng(6))
    assert counts.shape == (2000, 400) and (counts.sum(1) == 400).all()
    x = np.random.default_rng(4).normal(size=400)
    assert np.std(counts @ x / 400, ddof=1) == pytest.approx(x.std(ddof=1) / 20, rel=0.1)
    with pytest.raises(ValueError, match="at least 2"):
        bootstrap_counts(1, 10, np.random.default_rng(0))


def _rank_sum_p_loop(low, high) -> float:
    """Reference: enumerate every split of the pooled values and count U with plain loops."""
    from itertools import combinations

    pooled = list(low) + list(high)

    def u(lo, hi):
        return sum((h > x) + 0.5 * (h == x) for x in lo for h in hi)

    observed, count, total = u(low, high), 0, 0
    for chosen in combinations(range(len(pooled)), len(high)):
        hi = [pooled[i] for i in chosen]
        lo = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        count += u(lo, hi) >= observed
        total += 1
    return count / total


def _u_tail_no_ties(nl: int, nh: int, observed: int) -> float:
    """P(U >= observed) without ties by the classic recurrence on the largest pooled value."""
    from functools import lru_cache

    @lru_cache(None)
    def ways(a: int, b: int, u: int) -> int:     # orderings of a low and b high values with U = u
        if u < 0:
            return 0
        if a == 0 or b == 0:
            return int(u == 0)
        return ways(a, b - 1, u - a) + ways(a - 1, b, u)   # the largest value is high (beats all a lows) or low

    return sum(ways(nl, nh, u) for u in range(observed, nl * nh + 1)) / math.comb(nl + nh, nh)


def test_rank_sum_p_closed_forms_for_separated_groups():
    assert rank_sum_p([232, 81, 77, 59], [323, 493, 488, 252]) == pytest.approx(1 / 70)
    assert rank_sum_p([32, 46, 36], [306, 98, 204]) == pytest.approx(1 / 20)
    assert rank_sum_p([323, 493, 488, 252], [232, 81, 77, 59]) == 1.0     # the other way round: no evidence
    assert rank_sum_p([1.0, 2.0], [1.0, 2.0]) == pytest.approx(5 / 6)     # ties count 1/2


def test_rank_sum_p_equals_the_plain_loop_with_ties():
    rng = np.random.default_rng(4)
    for _ in range(20):
        nl, nh = rng.integers(1, 6, size=2)
        low, high = rng.integers(0, 4, nl).astype(float), rng.integers(1, 5, nh).astype(float)
        assert rank_sum_p(low, high) == pytest.approx(_rank_sum_p_loop(low, high), abs=1e-12), (low, high)


def test_rank_sum_p_random_splits_match_the_exact_tail():
    """10 vs 10 has 184,756 splits, so random splits are drawn: within 4 binomial se of the exact tail."""
    rng = np.random.default_rng(5)
    low, high = rng.normal(size=10), rng.normal(0.8, 1.0, size=10)
    observed = int(sum(h > x for x in low for h in high))
    exact = _u_tail_no_ties(10, 10, observed)
    assert rank_sum_p(low, high, resamples=20_000) == pytest.approx(exact, abs=4 * binomial_se(exact, 20_000) + 1e-12)


def test_rank_sum_p_level_under_the_null():
    """With 4 iid runs per group, p <= 0.05 happens exactly when U >= 15, probability 2/70 (within 3 se)."""
    rng = np.random.default_rng(6)
    hits = np.mean([rank_sum_p(rng.normal(size=4), rng.normal(size=4)) <= 0.05 for _ in range(REPEATS * 5)])
    assert hits == pytest.approx(2 / 70, abs=3 * binomial_se(2 / 70, REPEATS * 5))


def test_rank_sum_p_refuses_empty_or_nan_groups():
    with pytest.raises(ValueError, match="at least one value"):
        rank_sum_p([], [1.0])
    with pytest.raises(ValueError, match="finite"):
        rank_sum_p([1.0, float("nan")], [2.0])


def test_prediction_interval_covers_one_more_draw_95_percent_of_the_time():
    """Normal draws of 4: the next draw lands inside t_3 sd sqrt(1 + 1/4) in 95% of 4,000 trials (se 0.0034)."""
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(4000, 5))
    inside = [abs(d[4] - d[:4].mean()) <= prediction_half_width(d[:4]) for d in draws]
    assert abs(np.mean(inside) - 0.95) < 4 * math.sqrt(0.95 * 0.05 / 4000)
    printed_t = 12.706                                              # t 0.975 at 1 df, to 3 printed decimals
    assert prediction_half_width(np.array([1.0, 3.0]), extra_se=0.0) == pytest.approx(printed_t * 2**0.5 * 1.5**0.5,
                                                                                      rel=5e-5)


def test_check_one_more_records_the_book_inside_or_outside_the_interval():
    assert check_one_more(Result("x", {}), "inside", [1.0, 1.1, 0.9, 1.05], 1.02, log=True)
    assert not check_one_more(Result("x", {}), "outside", [1.0, 1.1, 0.9, 1.05], 3.0, log=True)
    result = Result("x", {})
    assert check_one_more(result, "widened", [0.0, 0.01, -0.01], 0.5, book_se=0.2)
    assert "one more of our 3 seeds" in result.checks[0].tolerance and result.checks[0].p_value > 0.01


def test_check_one_more_p_value_is_uniform_for_honest_draws():
    """The book's value drawn from our runs' own distribution: its p-value is uniform, so P(p < 0.05) = 0.05 within
    4 binomial standard errors over 4,000 draws (the t statistic is exact for normal runs)."""
    rng = np.random.default_rng(3)
    draws = rng.normal(size=(4000, 6))
    small = []
    for d in draws:
        result = Result("x", {})
        check_one_more(result, "c", d[:5], float(d[5]))
        small.append(result.checks[0].p_value < 0.05)
    assert abs(np.mean(small) - 0.05) < 4 * math.sqrt(0.05 * 0.95 / 4000)


def test_count_tail_p_is_the_binomial_tail_on_the_count_side():
    assert count_tail_p(0, 12, 0.1) == pytest.approx(0.9**12)
    assert count_tail_p(12, 12, 0.9) == pytest.approx(0.9**12)
    assert count_tail_p(2, 12, 0.312) == pytest.approx(sum(math.comb(12, k) * 0.312**k * 0.688 ** (12 - k)
                                                          for k in range(3)))
    with pytest.raises(ValueError, match="count"):
        count_tail_p(13, 12, 0.5)


def subsets_pass_rate(outcomes: list[float], k: int) -> tuple[float, float]:
    """Brute force over every k-subset: (share holding a correct sample, mean of the subset's best score)."""
    import itertools

    subsets = list(itertools.combinations(outcomes, k))
    return (sum(max(s) > 0 for s in subsets) / len(subsets), sum(max(s) for s in subsets) / len(subsets))


def test_pass_at_k_and_best_at_k_equal_enumeration_over_all_subsets():
    from pglab.stats import best_at_k, pass_at_k

    rng = np.random.default_rng(12345)
    for _ in range(60):
        n = int(rng.integers(1, 13))
        k = int(rng.integers(1, n + 1))
        correct = (rng.random(n) < rng.random()).astype(float)
        scores = rng.normal(size=n)
        share, _ = subsets_pass_rate(list(correct), k)
        _, best = subsets_pass_rate(list(scores), k)
        assert abs(pass_at_k(n, int(correct.sum()), k) - share) < 1e-9
        assert abs(best_at_k(correct, k) - share) < 1e-9
        assert abs(best_at_k(scores, k) - best) < 1e-9


def test_pass_at_k_is_exact_at_large_n_and_refuses_bad_counts():
    from pglab.stats import pass_at_k

    assert pass_at_k(10_000, 0, 100) == 0.0 and pass_at_k(10, 10, 3) == 1.0
    assert abs(pass_at_k(5, 1, 1) - 0.2) < 1e-15
    assert abs(pass_at_k(10_000, 1, 100) - 0.01) < 1e-12
    for bad in ((5, 6, 1), (5, 1, 0), (5, 1, 6), (5, -1, 1)):
        with pytest.raises(ValueError, match="pass_at_k needs"):
            pass_at_k(*bad)


def test_mean_at_k_averages_problems_with_their_standard_error():
    from pglab.stats import mean_at_k, pass_at_k

    table = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    mean, se = mean_at_k(table, 2)
    per = np.array([pass_at_k(4, 1, 2), pass_at_k(4, 2, 2), 0.0])
    assert mean == pytest.approx(per.mean(), abs=1e-12) and se == pytest.approx(per.std(ddof=1) / 3**0.5, abs=1e-12)
    assert mean_at_k(table[:1], 1) == (0.25, 0.0)
    with pytest.raises(ValueError, match="0/1"):
        mean_at_k(np.array([[0.5, 1.0]]), 1)
