"""The statistics behind every claim: standard errors, paired and unpaired gaps, ratios, and book tolerances.

Each function returns a number and its standard error (or a tolerance built from standard errors),
so that a claim can state where its tolerance comes from. A utility: imports no pglab layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from pglab.reporting.tails import (  # noqa: F401 - the t distribution lives beside the claims that use it
    T_SERIES_MAX_DF,
    _t_central_mass,
    _t_quantile_large_df,
    chi2_upper_tail,
    t_quantile,
    t_upper_tail,
)

if TYPE_CHECKING:
    from pglab.reporting.result import Result


def standard_error(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Standard error of the mean along ``dim``: sample std / sqrt(n); x [N, ...] -> [...]."""
    return x.std(dim) / math.sqrt(x.shape[dim])


def binomial_se(rate: float, n: int) -> float:
    """Standard error of a share ``rate`` measured on ``n`` independent trials: sqrt(rate (1 - rate) / n)."""
    if n < 1 or not 0.0 <= rate <= 1.0:
        raise ValueError(f"binomial_se needs 0 <= rate <= 1 and n >= 1, got rate={rate}, n={n}")
    return math.sqrt(rate * (1.0 - rate) / n)


def _squared_deviations(samples: torch.Tensor) -> torch.Tensor:
    """|x_i - mean x|^2 per sample; samples [N, P] -> [N] (their mean is the total variance up to N / (N - 1))."""
    return (samples - samples.mean(0)).pow(2).sum(-1)


def variance_with_se(samples: torch.Tensor) -> tuple[float, float]:
    """Total variance (trace of the covariance, N - 1 divisor) of samples [N, P] and its standard error.

    The standard error is that of the mean of the per-sample squared deviations.
    """
    if samples.dim() != 2 or samples.shape[0] < 2:
        raise ValueError(f"samples must be [N, P] with N >= 2, got shape {tuple(samples.shape)}")
    deviations = _squared_deviations(samples)
    n = samples.shape[0]
    return float(deviations.sum() / (n - 1)), float(standard_error(deviations))


def variance_gap(first: torch.Tensor, second: torch.Tensor) -> tuple[float, float]:
    """Total variance of ``first`` minus that of ``second`` (paired samples [N, P], same draws) and its se."""
    if first.shape[0] != second.shape[0]:
        raise ValueError(f"paired samples need as many rows, got {first.shape[0]} and {second.shape[0]}")
    gap = variance_with_se(first)[0] - variance_with_se(second)[0]
    return gap, float(standard_error(_squared_deviations(first) - _squared_deviations(second)))


def mean_gap(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """mean(a) - mean(b) of two independent samples [Na], [Nb] and its standard error."""
    return float(a.mean() - b.mean()), math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))


def paired_mean_ratio(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """mean(a) / mean(b) of paired samples a, b [N] (run i of each on seed i) and its delta-method standard error:
    the sd of a - ratio * b over sqrt(N), divided by mean(b). Unlike a bootstrap of the ratio it stays finite when
    some runs are 0 in both (a resample of only those would divide 0 by 0)."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"a paired ratio needs two samples of one length >= 2, got {len(a)} and {len(b)}")
    ratio = float(a.mean() / b.mean())
    return ratio, float(np.std(a - ratio * b, ddof=1) / math.sqrt(len(a)) / abs(b.mean()))


def sd_ratio(big: np.ndarray, small: np.ndarray) -> tuple[float, float]:
    """sd(big) / sd(small) of two independent samples [N] and its standard error.

    Normal approximation: each sample sd has relative standard error 1 / sqrt(2 (N - 1)), so the
    ratio has relative standard error 1 / sqrt(N - 1).
    """
    if len(big) < 2 or len(small) < 2:
        raise ValueError(f"an sd needs at least 2 samples, got {len(big)} and {len(small)}")
    ratio = float(big.std(ddof=1) / small.std(ddof=1))
    return ratio, ratio * math.sqrt(0.5 / (len(big) - 1) + 0.5 / (len(small) - 1))


def book_tolerance(se: float, sigmas: float, book_se: float | None = None) -> float:
    """Half-width for |ours - book|: ``sigmas`` standard errors of the difference of two estimates.

    ``book_se`` is the standard error of the book's number; left out, it is taken equal to ours
    (the book measured the same quantity with as many runs), which gives sigmas * sqrt(2) * se.
    """
    book_se = se if book_se is None else book_se
    return sigmas * math.sqrt(se * se + book_se * book_se)


def half_unit(printed: str) -> float:
    """Half a unit of the last digit of a number as the book prints it: "4.15" -> 0.005, "102" -> 0.5."""
    exponent = Decimal(printed.strip().lstrip("+-")).as_tuple().exponent
    if not isinstance(exponent, int):
        raise ValueError(f"{printed!r} is not a printed number")
    return 0.5 * 10.0 ** exponent


def check_printed(result: Result, claim: str, ours: float | list[float], printed: str | tuple[str, ...]) -> bool:
    """Record the claim that ``ours`` equals the book's printed number(s), each to half a unit of its last digit."""
    printed = (printed,) if isinstance(printed, str) else tuple(printed)
    values = [float(ours)] if isinstance(ours, (int, float)) else [float(v) for v in ours]
    gaps = [abs(v - float(p)) for v, p in zip(values, printed, strict=True)]
    return result.check(claim, max(gaps), all(g <= half_unit(p) for g, p in zip(gaps, printed)),
                        f"{', '.join(printed)} (as printed)", "half a unit of the book's last printed digit: "
                        + ", ".join(sorted({f"{half_unit(p):g}" for p in printed})))


def bootstrap_se(statistic: Callable[[Any], float], samples: Any, resamples: int, rng: np.random.Generator) -> float:
    """Standard error of ``statistic(samples)`` by resampling the first axis with replacement (numpy or torch)."""
    n = len(samples)
    if n < 2 or resamples < 2:
        raise ValueError(f"the bootstrap needs at least 2 samples and 2 resamples, got {n} and {resamples}")
    values = [statistic(samples[rng.integers(0, n, n)]) for _ in range(resamples)]
    return float(np.std(values, ddof=1))


def bootstrap_counts(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of n samples is drawn in each bootstrap resample -> [resamples, n] (rows sum to n).

    A statistic built from weighted means (a mean, a variance, a ratio of them) is then evaluated on
    every resample at once: counts @ x / n is the resampled mean of x [n, ...].
    """
    if n < 2 or resamples < 2:
        raise ValueError(f"the bootstrap needs at least 2 samples and 2 resamples, got {n} and {resamples}")
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples)


def rank_sum_p(low: np.ndarray, high: np.ndarray, resamples: int = 20_000, seed: int = 0) -> float:
    """One-sided p-value that ``high`` [Nh] tends to exceed ``low`` [Nl] (Mann-Whitney U, exact under ties).

    U counts the pairs (i, j) with high[j] > low[i], a tie counting 1/2. Under the null hypothesis
    every split of the pooled values into groups of Nl and Nh is equally likely, so the p-value is
    the fraction of splits whose U is at least the observed one. All C(Nl + Nh, Nh) splits are
    enumerated when there are at most 100,000 of them, otherwise ``resamples`` random splits are
    drawn. With 4 runs per group and no overlap the p-value is 1/70; with 3, 1/20.
    """
    low, high = np.asarray(low, dtype=float).ravel(), np.asarray(high, dtype=float).ravel()
    if len(low) < 1 or len(high) < 1:
        raise ValueError(f"a rank test needs at least one value per group, got {len(low)} and {len(high)}")
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError("a rank test needs finite values; drop the NaN or inf runs first")
    pooled = np.concatenate([low, high])
    n = len(pooled)
    wins = (pooled[None, :] > pooled[:, None]) + 0.5 * (pooled[None, :] == pooled[:, None])  # [n, n]: col beats row
    if math.comb(n, len(high)) <= 100_000:
        from itertools import combinations

        splits = np.array(list(combinations(range(n), len(high))))
    else:
        rng = np.random.default_rng(seed)
        splits = np.argsort(rng.random((resamples, n)), axis=1)[:, :len(high)]
    member = np.zeros((len(splits), n), dtype=bool)
    member[np.arange(len(splits))[:, None], splits] = True
    u = np.einsum("si,ij,sj->s", (~member).astype(float), wins, member.astype(float))
    observed = wins[:len(low), len(low):].sum()
    return float(np.mean(u >= observed - 1e-9))


def prediction_half_width(values: np.ndarray, extra_se: float = 0.0) -> float:
    """Half-width of the 95% prediction interval for one more draw: t_{n-1} sd sqrt(1 + 1/n); values [n], n >= 2.

    ``extra_se`` is a standard error the new draw carries beyond our draws' spread (added in quadrature).
    """
    n = len(values)
    if n < 2:
        raise ValueError(f"a prediction interval needs at least 2 values, got {n}; raise --seeds")
    return float(t_quantile(0.975, n - 1) * math.sqrt(np.var(values, ddof=1) * (1 + 1 / n) + extra_se**2))


def check_one_more(result: Result, claim: str, values: Any, book: float, *, log: bool = False,
                   book_se: float = 0.0, full_size: bool = False) -> bool:
    """Record the statistical claim that the book's number is a plausible draw from our seeds' ``values`` [n].

    The book ran one seed; if its number came from the same distribution as ours, then
    t = (book - mean) / sqrt(sd^2 (1 + 1/n) + book_se^2) follows Student's t with n - 1 degrees of freedom
    (on a log scale for ratios, ``log=True``), and the claim's p-value is its two-sided tail; the Result judges
    it with the experiment's other statistical claims (:meth:`Result.check_p`). ``book_se`` is the book's own
    standard error where it is larger than the noise of each of our runs (the book averaged fewer samples).
    The report shows the 95% prediction interval of one more run for orientation. ``full_size``: see
    :meth:`Result.check`.
    """
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        raise ValueError(f"a prediction interval needs at least 2 values, got {len(values)}; raise --seeds")
    scale = np.log if log else (lambda x: x)
    scaled = scale(values)
    centre, half = float(scaled.mean()), prediction_half_width(scaled, book_se)
    spread = math.sqrt(float(np.var(scaled, ddof=1)) * (1 + 1 / len(values)) + book_se**2)
    gap = float(scale(book)) - centre
    p = 1.0 if gap == 0 else 0.0 if spread == 0 else min(1.0, 2 * t_upper_tail(abs(gap) / spread, len(values) - 1))
    low, high = (math.exp(centre - half), math.exp(centre + half)) if log else (centre - half, centre + half)
    return result.check_p(claim, book, p, f"one more of our runs (95%: [{low:.4g}, {high:.4g}])",
                          f"Student's t of the book's value against one more of our {len(values)} seeds "
                          f"(sd sqrt(1 + 1/n){' of the log' if log else ''}"
                          f"{f', with the book se {book_se:.2g}' if book_se else ''}; ours range "
                          f"{values.min():.4g}-{values.max():.4g})", full_size=full_size)


def count_tail_p(count: int, n: int, rate: float) -> float:
    """Probability that Binomial(n, rate) lands at ``count`` or further from n * rate on that side (one-sided).

    A book's count of ``count`` in n runs is a less than 5% event at our measured rate when this is below 0.05.
    """
    if not 0 <= count <= n or not 0.0 <= rate <= 1.0:
        raise ValueError(f"count_tail_p needs 0 <= count <= n and 0 <= rate <= 1, got {count}, {n}, {rate}")
    pmf = [math.comb(n, k) * rate**k * (1 - rate) ** (n - k) for k in range(n + 1)]
    return float(sum(pmf[: count + 1]) if count <= n * rate else sum(pmf[count:]))


def printed_counts(counts: tuple[int, ...]) -> str:
    """The book's counts as printed: 0, or a range 3-5."""
    return "-".join(map(str, sorted({min(counts), max(counts)})))


def check_book_counts(result: Result, claim: str, counts: tuple[int, ...], shown: int, rate: float, runs: int) -> None:
    """The statistical claim that each of the book's ``counts`` of ``shown`` demo runs is a plausible binomial draw at
    our ``rate`` (measured over ``runs`` runs): its p-value is the smallest one-sided tail over the counts (the book
    saw every one of them)."""
    p = min(count_tail_p(count, shown, rate) for count in counts)
    result.check_p(claim, rate, p, f"the book's {printed_counts(counts)} of {shown} a plausible draw",
                   f"one-sided binomial tail of each of the book's counts at our rate {rate:.3f} ({runs} runs; the "
                   "smallest shown)")


def worst_of_p(z: Any) -> float:
    """Two-sided p-value of the largest of several normal z [K], Bonferroni over them: min(1, K * min p)."""
    z = np.abs(np.asarray(z, dtype=float)).ravel()
    return min(1.0, len(z) * 2 * NormalDist().cdf(-float(z.max())))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct: 1 - C(n - c, k) / C(n, k).

    The chance that k of the n samples, drawn without replacement, hold at least one correct one.
    Computed as 1 - prod_{i = n - c + 1}^{n} (1 - k / i), which never forms the binomials (no overflow at n = 10^4).
    Reporting the best of the first k samples instead is an unbiased estimate of nothing: it uses k of the n.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def best_at_k(scores: Any, k: int) -> float:
    """Unbiased E[max of k of the ``scores`` drawn without replacement]: pass@k for graded (non 0/1) rewards.

    With the n scores sorted ascending, the i-th (1-based) is the largest of C(i - 1, k - 1) of the C(n, k)
    k-subsets, so the estimate is sum_i s_(i) C(i - 1, k - 1) / C(n, k); the weights are formed as running
    ratios. For 0/1 scores it equals :func:`pass_at_k`.
    """
    s = np.sort(np.asarray(scores, dtype=np.float64).ravel())
    n = len(s)
    if not 1 <= k <= n or not np.isfinite(s).all():
        raise ValueError(f"best_at_k needs 1 <= k <= {n} (the number of scores) and finite scores, got k={k}")
    weights = np.zeros(n)
    weights[-1] = k / n                          # C(n - 1, k - 1) / C(n, k)
    for i in range(n - 1, k - 1, -1):            # C(i - 1, k - 1) = C(i, k - 1) (i - k + 1) / i
        weights[i - 1] = weights[i] * (i - k + 1) / i
    return float(weights @ s)


def mean_at_k(correct: Any, k: int) -> tuple[float, float]:
    """Mean pass@k over problems and its standard error -> (mean, se).

    ``correct`` [P, n]: whether each of the n samples of each of the P problems is correct (0/1 or bool). The se
    is the spread of the per-problem pass@k over problems (0 for one problem): the uncertainty of the benchmark's
    mean over its problems, not of one problem's estimate.
    """
    table = np.asarray(correct)
    if table.ndim != 2 or table.shape[0] < 1:
        raise ValueError(f"mean_at_k needs a [problems, samples] table of 0/1 values, got shape {table.shape}")
    if not np.isin(table, (0, 1)).all():
        raise ValueError("mean_at_k needs 0/1 (or bool) correctness values; use best_at_k for graded scores")
    n = table.shape[1]
    return mean_over_problems([pass_at_k(n, int(c), k) for c in table.sum(1)])


def mean_over_problems(per_problem: Any) -> tuple[float, float]:
    """The mean of per-problem estimates [P] and its standard error over problems (0 for one problem)."""
    values = np.asarray(per_problem, dtype=np.float64)
    se = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return float(values.mean()), se


def mean_best_at_k(scores: Any, k: int) -> tuple[float, float]:
    """Mean best@k over problems (:func:`best_at_k` of each row of graded scores [P, n]) and its standard error
    over problems -> (mean, se)."""
    table = np.asarray(scores, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] < 1:
        raise ValueError(f"mean_best_at_k needs a [problems, samples] table of scores, got shape {table.shape}")
    return mean_over_problems([best_at_k(row, k) for row in table])


def pass_summary(correct: Any, k: int) -> dict[str, float]:
    """pass@1 and pass@k of a [problems P, samples n] 0/1 table, each with its standard error over the problems
    (:func:`mean_at_k`) -> dict(k, samples, problems, pass_at_1, pass_at_1_se, pass_at_k, pass_at_k_se)."""
    table = np.asarray(correct)
    one, k_of = mean_at_k(table, 1), mean_at_k(table, k)
    return {"k": k, "samples": int(table.shape[1]), "problems": int(table.shape[0]), "pass_at_1": one[0],
            "pass_at_1_se": one[1], "pass_at_k": k_of[0], "pass_at_k_se": k_of[1]}


@dataclass(frozen=True)
class PairedDifference:
    """The mean of the per-seed differences a_i - b_i of two settings run on the same seeds, with its t interval."""

    mean: float
    """Mean difference over the seeds (a - b)."""
    se: float
    """Its standard error: sd / sqrt(seeds)."""
    low: float
    """Lower end of the t confidence interval: mean - t_{(1 + confidence) / 2, seeds - 1} se."""
    high: float
    """Upper end of the t confidence interval."""
    sd: float
    """Sample standard deviation of the per-seed differences (seeds - 1 divisor)."""
    seeds: int
    """Number of seeds (pairs)."""
    confidence: float
    """Coverage of the interval."""


def paired_difference(a: Any, b: Any, *, confidence: float = 0.95) -> PairedDifference:
    """Paired difference of per-seed values a, b [seeds] (seed i of each setting on the same seed i) -> its mean,
    standard error and Student t confidence interval over the seeds.

    Pairing removes what the seeds share (the same tasks, draws or initialisation) from the spread; the interval
    assumes only that the seeds' differences are independent draws from one distribution (exact for normal ones).
    """
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"paired_difference needs as many values of each setting, at least 2 seeds; got {len(a)} "
                         f"and {len(b)}: run both settings on the same seeds")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("paired_difference needs finite values; drop the seeds with NaN or inf in either setting")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    differences = a - b
    mean, sd = float(differences.mean()), float(differences.std(ddof=1))
    se = sd / math.sqrt(len(differences))
    half = t_quantile((1.0 + confidence) / 2.0, len(differences) - 1) * se
    return PairedDifference(mean, se, mean - half, mean + half, sd, len(differences), confidence)


def seeds_needed(effect: float, sd: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Seeds a paired comparison needs for its two-sided level-``alpha`` t test to separate the two settings with
    probability ``power`` when the true mean difference is ``effect`` and the per-seed differences have sd ``sd``.

    Normal approximation n = ((z_{1 - alpha/2} + z_{power}) sd / |effect|)^2, then the t correction: the smallest
    n >= that (and >= 2) with n >= ((t_{1 - alpha/2, n-1} + t_{power, n-1}) sd / |effect|)^2, the same formula with
    the t quantiles of the n - 1 degrees of freedom the test will have. At alpha 0.05 and power 0.8 and an effect
    of one sd: 8 by the normal approximation, 10 with the correction (the exact noncentral-t answer).
    """
    if not (math.isfinite(effect) and effect != 0.0 and math.isfinite(sd) and sd >= 0.0):
        raise ValueError(f"seeds_needed needs a finite nonzero effect and a finite sd >= 0, got effect={effect}, "
                         f"sd={sd}: no number of seeds separates two settings that do not differ")
    if not (0.0 < alpha < 1.0 and 0.0 < power < 1.0):
        raise ValueError(f"alpha and power must be in (0, 1), got alpha={alpha}, power={power}")
    ratio = sd / abs(effect)

    def enough(n: int) -> bool:
        return n >= ((t_quantile(1.0 - alpha / 2.0, n - 1) + t_quantile(power, n - 1)) * ratio) ** 2

    normal = NormalDist().inv_cdf
    n = max(2, math.ceil(((normal(1.0 - alpha / 2.0) + normal(power)) * ratio) ** 2))
    while not enough(n):
        n += 1
    return n


PAIRED_TABLE = "paired comparisons"
"""The Result table :func:`compare_seeds` fills: one row per compared pair of settings."""


def paired_row(quantity: str, first: str, second: str, a: Any, b: Any, confidence: float = 0.95) -> dict[str, Any]:
    """One row of the paired-comparisons table: ``first`` minus ``second`` over the seeds where both values a, b [seeds]
    are finite, with its t interval, whether the interval excludes 0, and :func:`seeds_needed` at the measured
    difference and spread (alpha = 1 - confidence, power 0.8; empty when the seeds measured no difference)."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if len(a) != len(b):
        raise ValueError(f"{quantity}: {first!r} has {len(a)} seeds and {second!r} {len(b)}; pair them seed by seed")
    finite = np.isfinite(a) & np.isfinite(b)
    row: dict[str, Any] = {"quantity": quantity, "compared": f"{first} minus {second}", "seeds": int(finite.sum())}
    if finite.sum() < 2:
        return {**row, "mean difference": float((a - b)[finite].mean()) if finite.any() else None}
    d = paired_difference(a[finite], b[finite], confidence=confidence)
    needed = seeds_needed(d.mean, d.sd, alpha=1.0 - confidence) if d.mean != 0.0 else None
    interval = f"{confidence:.0%} CI"
    return {**row, "mean difference": d.mean, "se": d.se, f"{interval} low": d.low, f"{interval} high": d.high,
            "separated": "yes" if d.low > 0.0 or d.high < 0.0 else "no", "sd of differences": d.sd,
            "seeds needed": needed}


def compare_seeds(result: Result, quantity: str, per_seed: Mapping[str, Any], pairs: Sequence[tuple[str, str]],
                  *, confidence: float = 0.95) -> None:
    """Add the paired comparison of each (first, second) of ``pairs`` to the Result's table "paired comparisons".

    ``per_seed`` maps each setting's name to its values of ``quantity`` [seeds], seed i of every setting run on the
    same seed i. Arithmetic on numbers the experiment already has: it draws nothing and changes no claim.
    """
    rows = result.tables.setdefault(PAIRED_TABLE, [])
    rows += [paired_row(quantity, first, second, per_seed[first], per_seed[second], confidence)
             for first, second in pairs]
