"""The BugFix tasks: small Python functions, each with exactly one injected bug from five families.

A task is authored as its correct source plus one textual bug (old -> new, applied exactly once);
the right op for the family turns the buggy source back into the correct one, character for
character. Held-out tasks use function names and identifiers that no training task uses.

Besides its fixed hidden cases, each task has a few hundred generated cases (``Task.generated``): inputs
drawn from the argument kinds of :data:`pglab.envs.bugfix.inputs.INPUTS`, boundary classes first (some derived
from the correct source's comparison constants), with the expected value computed from the task's correct
source when the task is built (the reference solution; trusted code of this module).
Inputs on which the reference raises or overflows to inf are left out. They are hidden tests too, graded in the
same sandbox call.
"""

from __future__ import annotations

import ast
import hashlib
import json
import keyword
import math
import re
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from pglab.envs.bugfix._worker_os import encode
from pglab.envs.bugfix.inputs import INPUTS, generated_inputs
from pglab.envs.bugfix.sandbox import check_plain

FIX_OPS = {
    "init": "fix_init",
    "minmax": "swap_minmax",
    "range_end": "fix_range_end",
    "zero": "add_zero_guard",
    "compare": "fix_comparison",
}
FAMILIES: tuple[str, ...] = tuple(FIX_OPS)
SPLITS = ("train", "heldout", "all")


@dataclass(frozen=True)
class Case:
    """One test: call the function with ``args`` and compare the result with ``expected``."""

    args: tuple
    expected: Any

    def call(self, name: str) -> str:
        """The call as Python text, e.g. ``clamp(5, 0, 10)``."""
        return f"{name}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True)
class Task:
    """A buggy function, the issue that names it, and its visible and hidden tests."""

    name: str
    family: str
    split: str
    source: str
    fixed: str
    issue: str
    visible: tuple[Case, ...]
    hidden: tuple[Case, ...]
    generated: tuple[Case, ...] = ()

    def __post_init__(self):
        """Refuse a task that would grade wrongly: no hidden tests, data that is not plain, an absent function."""
        if not isinstance(self.name, str) or not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise ValueError(f"Task.name must be a Python identifier (the function to call), got {self.name!r}")
        if not isinstance(self.source, str) or not re.search(rf"\b{self.name}\b", self.source):
            raise ValueError(f"Task.source must define the function {self.name!r}; it does not mention it")
        if not self.hidden:
            raise ValueError(f"Task {self.name!r} has no hidden tests; every program would pass. Add hidden Cases")
        for kind in ("visible", "hidden", "generated"):
            for k, case in enumerate(getattr(self, kind)):
                if not isinstance(case, Case) or type(case.args) is not tuple:
                    raise ValueError(f"Task {self.name!r}: {kind}[{k}] must be a Case whose args are a tuple, "
                                     f"e.g. Case((5, 0, 10), 5); got {case!r}")
                check_plain(case.args, f"Task {self.name!r}: {kind}[{k}].args")
                check_plain(case.expected, f"Task {self.name!r}: {kind}[{k}].expected")

    @cached_property
    def digest(self) -> str:
        """SHA-256 of what grading depends on besides the source: the function name and every case."""
        cases = [[encode(c.args), encode(c.expected)] for c in self.visible + self.hidden + self.generated]
        return hashlib.sha256(json.dumps([self.name, len(self.visible), cases]).encode()).hexdigest()

    @property
    def fix_op(self) -> str:
        """The op that repairs this task's bug family."""
        return FIX_OPS[self.family]


def _issue(name: str) -> str:
    return f"Issue: {name} returns wrong results for some inputs. Repair {name} so that its hidden tests pass."


def _finite(value: Any) -> bool:
    """Whether ``value`` holds no inf or nan (a result that overflowed is outside what a task means)."""
    if type(value) is float:
        return math.isfinite(value)
    return all(map(_finite, value)) if type(value) in (list, tuple) else True


def reference_cases(name: str, fixed: str, inputs: list[tuple]) -> tuple[Case, ...]:
    """Cases whose expected values come from the correct source (inputs on which it raises or overflows to inf
    are left out)."""
    namespace: dict = {}
    exec(compile(fixed, f"<reference {name}>", "exec"), namespace)  # noqa: S102 - this module's own solutions
    cases = []
    for args in inputs:
        try:
            expected = namespace[name](*args)
        except Exception:  # noqa: BLE001, S112 - an input outside the function's domain
            continue
        if _finite(expected):
            cases.append(Case(args, expected))
    return tuple(cases)


def _task(split: str, family: str, fixed: str, bug: tuple[str, str], visible: list, hidden: list) -> Task:
    """Build a Task from its correct source and one textual bug ``(old, new)``; generated cases from INPUTS."""
    old, new = bug
    if fixed.count(old) != 1:
        raise ValueError(f"bug text {old!r} must occur exactly once in the correct source; make it unique")
    name = next(n.name for n in ast.walk(ast.parse(fixed)) if isinstance(n, ast.FunctionDef))
    generated = reference_cases(name, fixed, generated_inputs(name, source=fixed)) if name in INPUTS else ()
    return Task(name, family, split, fixed.replace(old, new), fixed, _issue(name),
                tuple(Case(*c) for c in visible), tuple(Case(*c) for c in hidden), generated)


def _train_tasks() -> list[Task]:
    """The 20 training tasks."""
    return [
    _task("train", "minmax", '''def clamp(x, lo, hi):
    """Return x limited to the closed interval [lo, hi]."""
    if lo > hi:
        lo, hi = hi, lo
    return max(lo, min(x, hi))
''', ("max(lo, min(x, hi))", "min(lo, max(x, hi))"),
        [((5, 0, 10), 5), ((-3, 0, 10), 0)],
        [((15, 0, 10), 10), ((7, 10, 0), 7), ((0, 0, 10), 0), ((-1, -5, -2), -2), ((10, 0, 10), 10)]),
    _task("train", "init", '''def product(xs):
    """Return the product of the numbers in xs (1 for an empty list)."""
    result = 1
    for x in xs:
        result *= x
    return result
''', ("result = 1", "result = 0"),
        [(([2, 3],), 6)],
        [(([],), 1), (([5],), 5), (([1, 2, 3, 4],), 24), (([-2, 3],), -6), (([0, 5],), 0)]),
    _task("train", "range_end", '''def sum_to(n):
    """Return 1 + 2 + ... + n (0 when n < 1)."""
    total = 0
    for i in range(1, n + 1):
        total += i
    return total
''', ("range(1, n + 1)", "range(1, n)"),
        [((3,), 6)],
        [((0,), 0), ((1,), 1), ((4,), 10), ((10,), 55), ((-2,), 0)]),
    _task("train", "zero", '''def mean(xs):
    """Return the arithmetic mean of xs, or 0 for an empty list."""
    if len(xs) == 0:
        return 0
    return sum(xs) / len(xs)
''', ("    if len(xs) == 0:\n        return 0\n", ""),
        [(([1, 2, 3],), 2.0), (([],), 0)],
        [(([4],), 4.0), (([1, 2],), 1.5), (([],), 0), (([-3, 3],), 0.0), (([2, 2, 5],), 3.0)]),
    _task("train", "compare", '''def count_at_least(xs, k):
    """Return how many items of xs are greater than or equal to k."""
    count = 0
    for x in xs:
        if x >= k:
            count += 1
    return count
''', ("x >= k", "x > k"),
        [(([1, 5, 3], 3), 2)],
        [(([], 1), 0), (([2, 2], 2), 2), (([1, 2, 3], 4), 0), (([0, 9, 4], 4), 2)]),
    _task("train", "minmax", '''def spread(xs):
    """Return the largest item of xs minus the smallest, or 0 for an empty list."""
    if not xs:
        return 0
    return max(xs) - min(xs)
''', ("max(xs) - min(xs)", "min(xs) - max(xs)"),
        [(([3, 1, 4],), 3)],
        [(([5],), 0), (([],), 0), (([2, 9, -1],), 10), (([7, 7, 8],), 1), (([-3, -8],), 5)]),
    _task("train", "init", '''def count_positive(xs):
    """Return how many items of xs are greater than zero."""
    count = 0
    for x in xs:
        if x > 0:
            count += 1
    return count
''', ("count = 0", "count = 1"),
        [(([1, -2, 3],), 2)],
        [(([],), 0), (([0, 0],), 0), (([-1],), 0), (([0, 4, 5],), 2), (([1],), 1)]),
    _task("train", "range_end", '''def sum_items(xs):
    """Return the sum of all items of xs."""
    total = 0
    for i in range(len(xs)):
        total += xs[i]
    return total
''', ("range(len(xs))", "range(len(xs) - 1)"),
        [(([1, 2, 3],), 6)],
        [(([],), 0), (([5],), 5), (([-1, 1, 4],), 4), (([2, 2, 2, 2],), 8)]),
    _task("train", "zero", '''def ratio(a, b):
    """Return a / b, or 0 when b is zero."""
    if b == 0:
        return 0
    return a / b
''', ("    if b == 0:\n        return 0\n", ""),
        [((6, 3), 2.0), ((1, 0), 0)],
        [((5, 2), 2.5), ((0, 0), 0), ((-4, 2), -2.0), ((3, 0), 0)]),
    _task("train", "compare", '''def in_range(x, lo, hi):
    """Return True when x lies in the closed interval [lo, hi]."""
    if lo <= x <= hi:
        return True
    return False
''', ("lo <= x <= hi", "lo <= x < hi"),
        [((5, 0, 10), True), ((10, 0, 10), True)],
        [((0, 0, 10), True), ((11, 0, 10), False), ((-1, 0, 10), False), ((3, 3, 3), True), ((7, 0, 7), True)]),
    _task("train", "minmax", '''def running_peak(xs):
    """Return the list of running maxima of xs."""
    result = []
    best = None
    for x in xs:
        if best is None:
            best = x
        best = max(best, x)
        result.append(best)
    return result
''', ("max(best, x)", "min(best, x)"),
        [(([1, 3, 2],), [1, 3, 3])],
        [(([],), []), (([5],), [5]), (([2, 1, 4, 3],), [2, 2, 4, 4]), (([-1, -2, 0],), [-1, -1, 0])]),
    _task("train", "init", '''def sum_of_squares(xs):
    """Return the sum of the squares of the items of xs."""
    total = 0
    for x in xs:
        total += x * x
    return total
''', ("total = 0", "total = 1"),
        [(([1, 2],), 5)],
        [(([],), 0), (([3],), 9), (([-2, 2],), 8), (([1, 2, 3],), 14)]),
    _task("train", "range_end", '''def factorial(n):
    """Return n! for n >= 0."""
    result = 1
    for k in range(2, n + 1):
        result *= k
    return result
''', ("range(2, n + 1)", "range(2, n)"),
        [((3,), 6)],
        [((0,), 1), ((1,), 1), ((2,), 2), ((5,), 120), ((6,), 720)]),
    _task("train", "zero", '''def percent(part, whole):
    """Return part as a percentage of whole, rounded to one decimal (0 when whole is 0)."""
    if whole == 0:
        return 0
    return round(100 * part / whole, 1)
''', ("    if whole == 0:\n        return 0\n", ""),
        [((1, 4), 25.0), ((3, 0), 0)],
        [((0, 5), 0.0), ((1, 3), 33.3), ((0, 0), 0), ((5, 5), 100.0), ((2, 0), 0)]),
    _task("train", "compare", '''def is_sorted(xs):
    """Return True when xs is in non-decreasing order."""
    ok = True
    for i in range(len(xs) - 1):
        ok = ok and xs[i] <= xs[i + 1]
    return ok
''', ("xs[i] <= xs[i + 1]", "xs[i] < xs[i + 1]"),
        [(([1, 2, 2, 3],), True)],
        [(([],), True), (([5],), True), (([3, 1],), False), (([1, 1],), True), (([1, 3, 2],), False)]),
    _task("train", "minmax", '''def capped_total(xs, cap):
    """Return the sum of xs where each item counts at most cap."""
    total = 0
    for x in xs:
        total += min(x, cap)
    return total
''', ("min(x, cap)", "max(x, cap)"),
        [(([1, 5, 3], 4), 8)],
        [(([], 3), 0), (([10], 2), 2), (([1, 2], 5), 3), (([7, 8, 9], 7), 21), (([-2, 4], 0), -2)]),
    _task("train", "init", '''def dot(a, b):
    """Return the dot product of the equal-length lists a and b."""
    total = 0
    for i in range(len(a)):
        total += a[i] * b[i]
    return total
''', ("total = 0", "total = 1"),
        [(([1, 2], [3, 4]), 11)],
        [(([], []), 0), (([2], [5]), 10), (([1, -1, 2], [3, 3, 1]), 2), (([0, 0], [7, 8]), 0)]),
    _task("train", "range_end", '''def count_multiples(n, d):
    """Return how many of 1, 2, ..., n are divisible by d."""
    count = 0
    for i in range(1, n + 1):
        if i % d == 0:
            count += 1
    return count
''', ("range(1, n + 1)", "range(1, n)"),
        [((10, 5), 2)],
        [((0, 3), 0), ((3, 3), 1), ((12, 4), 3), ((7, 1), 7), ((5, 6), 0)]),
    _task("train", "zero", '''def average_length(words):
    """Return the average length of the strings in words, or 0 for an empty list."""
    total = 0
    for word in words:
        total += len(word)
    if len(words) == 0:
        return 0
    return total / len(words)
''', ("    if len(words) == 0:\n        return 0\n", ""),
        [((["ab", "abcd"],), 3.0), (([],), 0)],
        [(([],), 0), ((["x"],), 1.0), ((["", "abc"],), 1.5), ((["aa", "bb", "cc"],), 2.0)]),
    _task("train", "compare", '''def all_at_most(xs, limit):
    """Return True when every item of xs is at most limit."""
    for x in xs:
        if not x <= limit:
            return False
    return True
''', ("x <= limit", "x < limit"),
        [(([1, 2, 3], 3), True)],
        [(([], 0), True), (([4], 3), False), (([3, 3], 3), True), (([1, 5, 2], 4), False), (([-1], 0), True)]),
    ]

def _heldout_tasks() -> list[Task]:
    """The 10 held-out tasks."""
    return [
    _task("heldout", "minmax", '''def limit_each(values, ceiling):
    """Return a copy of values with every item lowered to at most ceiling."""
    out = []
    for v in values:
        out.append(min(v, ceiling))
    return out
''', ("min(v, ceiling)", "max(v, ceiling)"),
        [(([1, 9], 5), [1, 5])],
        [(([], 3), []), (([7], 7), [7]), (([2, 8, 4], 3), [2, 3, 3]), (([-1, 0], -2), [-2, -2])]),
    _task("heldout", "init", '''def tally_odd(nums):
    """Return how many numbers in nums are odd."""
    tally = 0
    for num in nums:
        if num % 2 == 1:
            tally += 1
    return tally
''', ("tally = 0", "tally = 1"),
        [(([1, 2, 3],), 2)],
        [(([],), 0), (([2, 4],), 0), (([7],), 1), (([5, 5, 6, -3],), 3)]),
    _task("heldout", "range_end", '''def head_total(seq, m):
    """Return the sum of the first m items of seq (m <= len(seq))."""
    acc = 0
    for j in range(m):
        acc += seq[j]
    return acc
''', ("range(m)", "range(m - 1)"),
        [(([4, 5, 6], 2), 9)],
        [(([1, 2], 0), 0), (([7], 1), 7), (([1, 2, 3, 4], 4), 10), (([-1, 5, 2], 3), 6)]),
    _task("heldout", "zero", '''def average_of(values):
    """Return the mean of values, or 0 when values is empty."""
    acc = 0
    for v in values:
        acc += v
    size = len(values)
    if size == 0:
        return 0
    return acc / size
''', ("    if size == 0:\n        return 0\n", ""),
        [(([2, 4],), 3.0), (([],), 0)],
        [(([5],), 5.0), (([1, 2, 3, 4],), 2.5), (([],), 0), (([-2, 2, 3],), 1.0)]),
    _task("heldout", "compare", '''def within_bound(values, bound):
    """Return True when every item of values lies between -bound and bound, inclusive."""
    for v in values:
        if not -bound <= v <= bound:
            return False
    return True
''', ("-bound <= v <= bound", "-bound <= v < bound"),
        [(([1, -2], 2), True), (([3], 3), True)],
        [(([], 0), True), (([4], 3), False), (([-3, 3], 3), True), (([0], 0), True), (([-5], 4), False)]),
    _task("heldout", "minmax", '''def extremes(nums):
    """Return the pair (smallest, largest) of nums, or None for an empty list."""
    if len(nums) == 0:
        return None
    low = min(nums)
    high = max(nums)
    return (low, high)
''', ("low = min(nums)\n    high = max(nums)", "low = max(nums)\n    high = min(nums)"),
        [(([3, 1, 2],), (1, 3))],
        [(([],), None), (([5],), (5, 5)), (([-2, 7, 0],), (-2, 7)), (([4, 4],), (4, 4)), (([9, -9],), (-9, 9))]),
    _task("heldout", "init", '''def power_of(base, m):
    """Return base raised to the non-negative integer m by repeated multiplication."""
    acc = 1
    for _ in range(m):
        acc *= base
    return acc
''', ("acc = 1", "acc = 0"),
        [((2, 3), 8)],
        [((5, 0), 1), ((3, 1), 3), ((-2, 3), -8), ((1, 7), 1), ((10, 2), 100)]),
    _task("heldout", "range_end", '''def square_series(m):
    """Return 1*1 + 2*2 + ... + m*m (0 when m < 1)."""
    acc = 0
    for j in range(1, m + 1):
        acc += j * j
    return acc
''', ("range(1, m + 1)", "range(1, m)"),
        [((2,), 5)],
        [((0,), 0), ((1,), 1), ((3,), 14), ((4,), 30)]),
    _task("heldout", "zero", '''def share(amount, people):
    """Split amount evenly among people in whole units, or 0 when there is nobody."""
    if people == 0:
        return 0
    return amount // people
''', ("    if people == 0:\n        return 0\n", ""),
        [((10, 3), 3), ((5, 0), 0)],
        [((0, 4), 0), ((9, 0), 0), ((12, 4), 3), ((7, 7), 1)]),
    _task("heldout", "compare", '''def grown_ups(ages):
    """Return how many of ages are 18 or more."""
    n_adult = 0
    for age in ages:
        if age >= 18:
            n_adult += 1
    return n_adult
''', ("age >= 18", "age > 18"),
        [(([17, 18, 30],), 2)],
        [(([],), 0), (([18],), 1), (([5, 12],), 0), (([18, 18, 99],), 3)]),
    ]


@cache
def _by_split() -> dict[str, tuple[Task, ...]]:
    """Built on first use: the generated cases take a moment."""
    train, heldout = tuple(_train_tasks()), tuple(_heldout_tasks())
    return {"train": train, "heldout": heldout, "all": train + heldout}


def make_tasks(split: str = "train") -> list[Task]:
    """The tasks of a split: ``"train"`` (20), ``"heldout"`` (10) or ``"all"``."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; pass one of {', '.join(SPLITS)}")
    return list(_by_split()[split])


def get_task(name: str) -> Task:
    """The task whose function is called ``name``."""
    for task in _by_split()["all"]:
        if task.name == name:
            return task
    raise ValueError(f"unknown task {name!r}; make_tasks('all') lists the {len(_by_split()['all'])} tasks")
