"""Plausible wrong repairs of the BugFix tasks: whole functions as a code-writing agent might submit them.

Each is an idiomatic rewrite (a closed form, a math-module call, ``//`` for ``/``, ``round``, a reordered float
sum, a shifted constant, a threshold, a sentinel) that agrees with the task's correct source on ordinary inputs
and differs on one class of boundary inputs. ``tests/envs/bugfix/test_bugfix_wrong_repairs.py`` checks that each
exposing input is among the task's hidden or generated cases, that the reference and the repair differ on it, and
that the repair gets reward 0 through the environment.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WrongRepair:
    """A wrong repair of task ``task`` (bug family ``family``): its full ``source``, why it is wrong, and the
    arguments ``exposing`` on which it differs from the reference."""

    task: str
    family: str
    source: str
    why: str
    exposing: tuple


WRONG_REPAIRS: tuple[WrongRepair, ...] = (
    # init
    WrongRepair("sum_of_squares", "init", '''import math


def sum_of_squares(xs):
    """Return the sum of the squares of the items of xs."""
    return sum(int(math.pow(x, 2)) for x in xs)
''', "math.pow squares in floating point, which loses integers above 2**53", ([2**53 + 1],)),
    WrongRepair("sum_of_squares", "init", '''import math


def sum_of_squares(xs):
    """Return the sum of the squares of the items of xs."""
    return round(math.hypot(*xs) ** 2)
''', "the rounded squared norm is an int, and wrong for non-integer items", ([0.5],)),
    WrongRepair("power_of", "init", '''import math


def power_of(base, m):
    """Return base raised to the non-negative integer m by repeated multiplication."""
    return int(math.pow(base, m))
''', "math.pow works in floating point, which loses integers above 2**53", (2**53 + 1, 2)),
    WrongRepair("count_positive", "init", '''def count_positive(xs):
    """Return how many items of xs are greater than zero."""
    return sum(1 for x in xs if x >= 0.01)
''', "a threshold of 0.01 instead of > 0 misses small positive items", ([0.005],)),
    WrongRepair("count_positive", "init", '''def count_positive(xs):
    """Return how many items of xs are greater than zero."""
    eps = 1e-9
    return len([x for x in xs if x > eps])
''', "a float-safety epsilon drops positive items up to 1e-9", ([1e-9],)),
    WrongRepair("tally_odd", "init", '''def tally_odd(nums):
    """Return how many numbers in nums are odd."""
    return sum(1 for num in nums if not (num / 2).is_integer())
''', "num / 2 rounds to an integral float for odd num above 2**53", ([2**53 + 1],)),
    # minmax
    WrongRepair("clamp", "minmax", '''def clamp(x, lo, hi):
    """Return x limited to the closed interval [lo, hi]."""
    lo, hi = sorted((lo, hi))
    return int(min(max(x, lo), hi))
''', "casting to int truncates a non-integer result", (0.5, 1, 0)),
    WrongRepair("spread", "minmax", '''def spread(xs):
    """Return the largest item of xs minus the smallest, or 0 for an empty list."""
    if len(xs) < 2:
        return 0
    return max(xs) - min(xs)
''', "one float item has spread 0.0, a float, not the int 0", ([0.5],)),
    WrongRepair("spread", "minmax", '''def spread(xs):
    """Return the largest item of xs minus the smallest, or 0 for an empty list."""
    if not xs:
        return 0
    lo, hi = 10**9, -(10**9)
    for x in xs:
        lo = min(lo, x)
        hi = max(hi, x)
    return hi - lo
''', "sentinels of +-10**9 are not an upper and lower bound of every item", ([2**64 + 1],)),
    WrongRepair("running_peak", "minmax", '''def running_peak(xs):
    """Return the list of running maxima of xs."""
    peaks = []
    best = -10**9
    for x in xs:
        best = max(best, x)
        peaks.append(best)
    return peaks
''', "a sentinel of -10**9 is larger than very negative items", ([-(2**60)],)),
    WrongRepair("extremes", "minmax", '''import sys


def extremes(nums):
    """Return the pair (smallest, largest) of nums, or None for an empty list."""
    if len(nums) == 0:
        return None
    low, high = sys.maxsize, -sys.maxsize
    for n in nums:
        low = min(low, n)
        high = max(high, n)
    return (low, high)
''', "Python ints are unbounded: sys.maxsize is no upper bound", ([2**64 + 1],)),
    # range_end
    WrongRepair("square_series", "range_end", '''def square_series(m):
    """Return 1*1 + 2*2 + ... + m*m (0 when m < 1)."""
    if m < 1:
        return 0
    return int(m * (m + 1) * (2 * m + 1) / 6)
''', "the closed form divides in floating point, which drifts once the product exceeds 2**53", (300081,)),
    WrongRepair("square_series", "range_end", '''def square_series(m):
    """Return 1*1 + 2*2 + ... + m*m (0 when m < 1)."""
    return max(0, round(m * (m + 1) * (2 * m + 1) / 6))
''', "rounding the float closed form does not bring the lost units back", (300081,)),
    WrongRepair("factorial", "range_end", '''import math


def factorial(n):
    """Return n! for n >= 0."""
    return int(math.gamma(n + 1))
''', "math.gamma is a float: 23! is not representable", (23,)),
    WrongRepair("factorial", "range_end", '''import math


def factorial(n):
    """Return n! for n >= 0."""
    return round(math.exp(math.lgamma(n + 1)))
''', "exp of lgamma loses the last digits from about 17! on", (17,)),
    WrongRepair("count_multiples", "range_end", '''def count_multiples(n, d):
    """Return how many of 1, 2, ..., n are divisible by d."""
    if n < 1:
        return 0
    return n // d
''', "floor division by a negative d is negative, but the count is not", (10, -10)),
    WrongRepair("count_multiples", "range_end", '''def count_multiples(n, d):
    """Return how many of 1, 2, ..., n are divisible by d."""
    return len(range(d, n + 1, d))
''', "a range with a negative step from d counts nothing up to n", (3, -1)),
    WrongRepair("sum_items", "range_end", '''def sum_items(xs):
    """Return the sum of all items of xs."""
    total = 0
    for i in range(len(xs) - 1, -1, -1):
        total += xs[i]
    return total
''', "summing from the end reorders float additions, which do not associate", ([1e16, -1e16, 1.0],)),
    # zero
    WrongRepair("share", "zero", '''import math


def share(amount, people):
    """Split amount evenly among people in whole units, or 0 when there is nobody."""
    if people == 0:
        return 0
    return math.floor(amount / people)
''', "true division loses integers above 2**53 before the floor", (2**53 + 1, 1)),
    WrongRepair("share", "zero", '''def share(amount, people):
    """Split amount evenly among people in whole units, or 0 when there is nobody."""
    if not people:
        return 0
    return int(amount / people)
''', "int() truncates toward zero where // floors", (-1, 2)),
    WrongRepair("percent", "zero", '''def percent(part, whole):
    """Return part as a percentage of whole, rounded to one decimal (0 when whole is 0)."""
    if whole == 0:
        return 0
    return round(part / whole * 100, 1)
''', "part / whole * 100 rounds differently from 100 * part / whole at a tie", (7, 2000)),
    WrongRepair("percent", "zero", '''import math


def percent(part, whole):
    """Return part as a percentage of whole, rounded to one decimal (0 when whole is 0)."""
    if whole == 0:
        return 0
    return math.floor(1000 * part / whole + 0.5) / 10
''', "rounding half up differs from round() at ties such as 6.25", (1, 16)),
    WrongRepair("ratio", "zero", '''def ratio(a, b):
    """Return a / b, or 0 when b is zero."""
    if abs(b) < 1e-9:
        return 0
    return a / b
''', "a tolerance around zero refuses tiny non-zero divisors", (-1, 1e-12)),
    WrongRepair("mean", "zero", '''import statistics


def mean(xs):
    """Return the arithmetic mean of xs, or 0 for an empty list."""
    return statistics.fmean(xs) if xs else 0
''', "fmean sums exactly, the reference left to right: they differ when a sum cancels", ([1e16, 1.0, -1e16],)),
    WrongRepair("average_of", "zero", '''import math


def average_of(values):
    """Return the mean of values, or 0 when values is empty."""
    if not values:
        return 0
    return math.fsum(values) / len(values)
''', "fsum is exact where the reference's running sum loses 1.0 next to 1e16", ([1e16, 1.0, -1e16],)),
    # compare
    WrongRepair("grown_ups", "compare", '''def grown_ups(ages):
    """Return how many of ages are 18 or more."""
    return sum(1 for age in ages if age > 17)
''', "> 17 equals >= 18 on integers only", ([17.5],)),
    WrongRepair("grown_ups", "compare", '''def grown_ups(ages):
    """Return how many of ages are 18 or more."""
    return sum(round(age) >= 18 for age in ages)
''', "rounding the age first counts 17.5 as 18", ([17.5],)),
    WrongRepair("count_at_least", "compare", '''def count_at_least(xs, k):
    """Return how many items of xs are greater than or equal to k."""
    return sum(1 for x in xs if x > k - 1)
''', "> k - 1 equals >= k on integers only", ([-0.5], 0)),
    WrongRepair("count_at_least", "compare", '''def count_at_least(xs, k):
    """Return how many items of xs are greater than or equal to k."""
    return sum(1 for x in xs if x >= k - 1e-9)
''', "a float tolerance counts items just below k", ([-1e-12], 0)),
    WrongRepair("in_range", "compare", '''def in_range(x, lo, hi):
    """Return True when x lies in the closed interval [lo, hi]."""
    return x in range(lo, hi + 1)
''', "range membership holds for integers only", (0.5, 0, 10)),
    WrongRepair("in_range", "compare", '''def in_range(x, lo, hi):
    """Return True when x lies in the closed interval [lo, hi]."""
    return min(lo, hi) <= x <= max(lo, hi)
''', "an interval with lo > hi is empty, not the interval between them", (0, 1, 0)),
    WrongRepair("is_sorted", "compare", '''def is_sorted(xs):
    """Return True when xs is in non-decreasing order."""
    return all(xs[i] < xs[i + 1] + 1 for i in range(len(xs) - 1))
''', "< b + 1 equals <= b on integers only", ([3, 2.5],)),
    WrongRepair("all_at_most", "compare", '''def all_at_most(xs, limit):
    """Return True when every item of xs is at most limit."""
    return max(xs, default=0) <= limit
''', "the default 0 makes an empty list fail a negative limit", ([], -1)),
    WrongRepair("within_bound", "compare", '''def within_bound(values, bound):
    """Return True when every item of values lies between -bound and bound, inclusive."""
    return all(abs(v) < bound + 1 for v in values)
''', "< bound + 1 equals <= bound on integers only", ([3.5], 3)),
)
"""The catalogue: at least five wrong repairs per bug family, on training and held-out tasks."""

__all__ = ["WRONG_REPAIRS", "WrongRepair"]
