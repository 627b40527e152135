"""The generated hidden inputs of the BugFix tasks: argument kinds per task, boundary classes first, then random ones.

Each task's few hundred generated cases (``Task.generated``) are these inputs with the expected value computed
from the task's correct source (see :func:`pglab.envs.bugfix.tasks.reference_cases`). The boundary classes are
the inputs on which plausible wrong repairs differ from the reference: magnitudes where floating point loses
integers, comparison constants of the reference (read from its source) and their neighbours, tiny floats,
non-integers, rounding ties of a quotient, and arguments that equal one another or nearly do.
"""

from __future__ import annotations

import ast
import itertools
import random

INPUTS = {
    "clamp": ("num", "num", "num"), "product": ("nums",), "sum_to": ("count",), "mean": ("nums",),
    "count_at_least": ("nums", "num"), "spread": ("nums",), "count_positive": ("nums",), "sum_items": ("nums",),
    "ratio": ("num", "num"), "in_range": ("num", "num", "num"), "running_peak": ("nums",),
    "sum_of_squares": ("nums",), "factorial": ("nat",), "percent": ("num", "num"), "is_sorted": ("nums",),
    "capped_total": ("nums", "num"), "dot": ("pair",), "count_multiples": ("count", "int"),
    "average_length": ("words",), "all_at_most": ("nums", "num"), "limit_each": ("nums", "num"),
    "tally_odd": ("ints",), "head_total": ("prefix",), "average_of": ("nums",), "within_bound": ("nums", "num"),
    "extremes": ("nums",), "power_of": ("num", "nat"), "square_series": ("count",), "share": ("int", "int"),
    "grown_ups": ("ages",),
}
"""The argument kinds of each task's generated inputs: ``int`` (integers, -30..30 and large magnitudes), ``num``
(integers and non-integer floats), ``count`` (an integer that bounds a loop: small, and once LARGE_COUNT), ``nat``
(0..40: an exponent or a factorial's argument), ``age`` (0..40 around the reference's constant), lists of them
(``ints``, ``nums``, ``ages``), ``words`` (lists of strings), ``pair`` (a list of numbers and a list of ints of
the same length: two arguments) and ``prefix`` (a list and a count up to its length: two arguments)."""

GENERATED = 300
"""Generated inputs per task, boundary classes included (fewer when the reference raises on some)."""

BIG_INTS = [2**53 + 1, -(2**53 + 1), 10**17 + 3, -(2**60), 2**64 + 1]
"""Integers above 2**53 in magnitude: a float holds none of the odd ones (float(2**53 + 1) == 2**53), so closed
forms in floating point drift; and sentinels such as -10**9 or sys.maxsize bound none of the larger ones."""

TIE_DIVISORS = [16, 80, 2000]
"""Divisors made of 2s and 5s: an odd numerator over them lands a quotient on a rounding tie (1/16 = 0.0625)."""

TINY = [1e-9, -1e-9, 1e-12, -1e-12, 0.005, -0.005]
"""Floats just off zero: thresholds such as ``x >= 0.01`` or ``abs(b) < 1e-9`` in place of ``x > 0`` or ``b == 0``."""

BIG_FLOATS = [1e16, -1e16]
"""Floats whose neighbours are 2 apart: 1e16 + 1.0 == 1e16, so reordered float sums differ here."""

DELTAS = {"int": (0, 1, -1), "num": (0, 1, -1, 0.5, -0.5, 0.005, -0.005, 1e-9, -1e-9, 1e-12, -1e-12)}
"""Offsets around a comparison constant and between two arguments: integer ones, and for numbers also a half and
small epsilons (a shifted constant such as ``age > 17`` agrees with ``age >= 18`` on integers only)."""

BOUNDARY = {"int": [0, 1, -1, 2, -2, 3, 10, -10, 30, -30, *TIE_DIVISORS, *BIG_INTS],
            "num": [0, 1, -1, 0.5, -0.5, 2, 1.5, 2.5, -2.5, 0.25, 3, 10, -10, *TIE_DIVISORS, *TINY, *BIG_INTS,
                    *BIG_FLOATS],
            "count": [0, 1, -1, 2, -2, 3, 10, 30], "nat": [0, 1, 2, 3, 12, 17, 20, 23, 30, 34, 40],
            "age": [0, 17, 18, 19, 40]}
"""Boundary values of each scalar kind (besides those derived from the reference's comparison constants)."""

LARGE_COUNT = 300081
"""The one large loop bound, given once per ``count`` argument: the smallest m at which the float closed form
m * (m + 1) * (2 * m + 1) / 6 of 1 + 4 + ... + m * m drifts from the exact sum; a loop this long takes tens of ms."""

ELEMENT = {"ints": "int", "nums": "num", "ages": "age"}
"""The scalar kind of each list kind's items."""

INTEGRAL = ("int", "count", "nat")
"""Scalar kinds whose values are integers: only integer deltas."""

NEAR = ("int", "num", "count", "ints", "nums", "ages")
"""Kinds whose arguments are compared with one another in the near class (``nat`` stays non-negative)."""

CANCELLING = [[1e16, 1.0, -1e16], [1e16, -1e16, 1.0], [1.0, 1e16, -1e16]]
"""Lists whose float sum depends on the order of the additions."""


def comparison_constants(source: str) -> tuple:
    """The numbers (not bools) that occur inside a comparison of ``source``, e.g. 18 in ``age >= 18``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found += [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
                      and type(n.value) in (int, float) and n.value not in found]
    return tuple(found)


def divides(source: str) -> bool:
    """Whether ``source`` divides, takes a remainder or rounds: then rounding ties of a quotient matter."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod))
               or isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "round"
               for n in ast.walk(ast.parse(source)))


def pools(constants: tuple = ()) -> dict[str, tuple]:
    """Boundary values of each scalar kind: its own, then each comparison constant plus its deltas (integers only
    for the integer kinds; non-negative ones for ``nat``)."""
    out = {}
    for kind, own in BOUNDARY.items():
        deltas = DELTAS["int" if kind in INTEGRAL else "num"]
        derived = [c + d for c in constants for d in deltas]
        derived = [int(v) if kind in INTEGRAL else v for v in derived if kind not in INTEGRAL or v == int(v)]
        values = [v for v in own + derived if kind != "nat" or v >= 0]
        out[kind] = tuple({repr(v): v for v in values}.values())
    return out


def _value(kind: str, rng: random.Random, pool: dict[str, tuple]):
    """One random argument of ``kind`` (a list kind gives 0 to 6 items); a third of the scalars come from the
    kind's boundary values in ``pool`` (never LARGE_COUNT)."""
    if kind in BOUNDARY and kind != "nat" and rng.random() < 1 / 3:
        return rng.choice(pool[kind])
    if kind in ("int", "count"):
        return rng.randint(-30, 30)
    if kind in ("nat", "age"):
        return rng.randint(0, 40)
    if kind == "num":
        return rng.choice([rng.randint(-10, 10), round(rng.uniform(-10, 10), 2), rng.choice([0.5, -0.5, 0.1])])
    if kind == "words":
        return ["".join(rng.choice("abc") for _ in range(rng.randint(0, 5))) for _ in range(rng.randint(0, 5))]
    element = ELEMENT.get(kind, "num")
    items = [_value(element, rng, pool) for _ in range(rng.randint(0, 6))]
    if rng.random() < 0.25:
        items.sort(reverse=rng.random() < 0.3)
    if kind == "pair":
        return items, [_value("int", rng, pool) for _ in items]
    if kind == "prefix":
        return items, rng.randint(0, len(items))
    return [abs(x) % 5 for x in items] if kind == "ints" and rng.random() < 0.3 else items  # repeats


def _boundary(kind: str, pool: dict[str, tuple]) -> list:
    """Boundary arguments of ``kind``: a scalar kind's values in ``pool`` (with LARGE_COUNT for ``count``); for
    lists, empty and one-item lists of every pool value, repeats, sorted and reversed runs, large items, cancelling
    sums, and all values derived from comparison constants in one list."""
    if kind in BOUNDARY:
        return [*pool[kind], *([LARGE_COUNT] if kind == "count" else [])]
    if kind == "pair":
        return [([], []), ([0], [5]), ([1, -1], [1, 1]), ([2, 2, 2], [3, -3, 0]), ([0.5, 0.25], [2, 4]),
                ([2**53 + 1, 3], [3, -1]), *[(xs, [1] * len(xs)) for xs in CANCELLING]]
    if kind == "prefix":
        return [([], 0), ([5], 0), ([5], 1), ([1, 2, 3], 3), ([-1, 0.5], 1), ([2**53 + 1, 1], 2),
                *[(xs, k) for xs in CANCELLING for k in (2, 3)]]
    if kind == "words":
        return [[], [""], ["a"], ["ab", ""], ["abc", "abc"], ["a" * 40, "b"]]
    values = pool[ELEMENT[kind]]
    runs = [[0], [2, 2], [1, 2, 3], [3, 2, 1], [1, 1, 2], [0, -1, 0], [2**53 + 1, 1], [-(2**60), 3, -(2**60)]]
    floats = [[0.5, -0.5], [0.1, 0.2, 0.3], *CANCELLING, [1e-9, -1e-12, 0.005]] if kind != "ints" else []
    derived = list(values[len(BOUNDARY[ELEMENT[kind]]):])
    return [[], *runs, *floats, *([derived] if derived else []), *[[v] for v in values]]


def _near(kinds: tuple[str, ...]) -> list[tuple]:
    """Arguments that equal one another or nearly do: for each ordered pair of comparable arguments (or two items
    of one list), one is base + delta and the other base, for bases 0 and 3; other comparable arguments are 10 or
    -10 (the rest their first boundary value)."""
    out = []
    positions = [k for k, kind in enumerate(kinds) if kind in NEAR]
    pairs = [(i, j) for i, j in itertools.product(positions, repeat=2) if i != j or kinds[i] in ELEMENT]
    for i, j in pairs:
        integral = any(ELEMENT.get(kinds[k], kinds[k]) in INTEGRAL for k in (i, j))
        for base, delta in itertools.product((0, 3), DELTAS["int" if integral else "num"]):
            fill = 10 if base == 0 else -10
            values = [([fill] if kind in ELEMENT else fill) if kind in NEAR else _boundary(kind, pools())[0]
                      for kind in kinds]
            if i == j:
                values[i] = [base, base + delta]
            else:
                values[i] = [base + delta] if kinds[i] in ELEMENT else base + delta
                values[j] = [base] if kinds[j] in ELEMENT else base
            out.append(tuple(values))
    return out


def _ties(kinds: tuple[str, ...]) -> list[tuple]:
    """Odd numerators 1..29 over each TIE_DIVISORS, for each ordered pair of ``int``/``num`` arguments (others 1)."""
    out = []
    positions = [k for k, kind in enumerate(kinds) if kind in ("int", "num")]
    for i, j in itertools.permutations(positions, 2):
        for divisor, numerator in itertools.product(TIE_DIVISORS, range(1, 30, 2)):
            values = [1] * len(kinds)
            values[i], values[j] = numerator, divisor
            out.append(tuple(values))
    return out


def boundary_inputs(kinds: tuple[str, ...], source: str = "") -> list[tuple]:
    """Boundary arguments (before flattening): the product of the first four boundary values of each argument;
    each boundary value of each argument once (the others cycling through their first four); the near class; and,
    when the reference divides or rounds, quotients on rounding ties. ``source``: the reference, whose comparison
    constants (and their neighbours) join the boundary values."""
    pool = pools(comparison_constants(source) if source else ())
    boundary = [_boundary(kind, pool) for kind in kinds]
    out = list(itertools.product(*[values[:4] for values in boundary]))
    for i, values in enumerate(boundary):
        for k, value in enumerate(values):
            out.append(tuple(value if j == i else other[k % min(4, len(other))] for j, other in enumerate(boundary)))
    out += _near(kinds)
    return out + (_ties(kinds) if source and divides(source) else [])


def _flatten(kinds: tuple[str, ...], values: tuple) -> tuple:
    """The call's arguments: a ``pair`` or ``prefix`` value is two arguments."""
    out = []
    for kind, value in zip(kinds, values):
        out += list(value) if kind in ("pair", "prefix") else [value]
    return tuple(out)


def generated_inputs(name: str, n: int = GENERATED, seed: int | str = "", *, source: str = "") -> list[tuple]:
    """``n`` distinct argument tuples for task ``name``: its boundary inputs (:func:`boundary_inputs`, up to n),
    then random ones from ``random.Random(name + seed)``. ``source``: the task's correct source."""
    kinds = INPUTS[name]
    pool = pools(comparison_constants(source) if source else ())
    found: dict[str, tuple] = {}
    for values in boundary_inputs(kinds, source)[:n]:
        found.setdefault(repr(values), _flatten(kinds, values))
    rng = random.Random(f"{name}{seed}")
    for _ in range(10 * n):
        if len(found) >= n:
            break
        values = tuple(_value(kind, rng, pool) for kind in kinds)
        found.setdefault(repr(values), _flatten(kinds, values))
    return list(found.values())


__all__ = ["BIG_FLOATS", "BIG_INTS", "BOUNDARY", "CANCELLING", "DELTAS", "ELEMENT", "GENERATED", "INPUTS",
           "LARGE_COUNT", "TIE_DIVISORS", "TINY", "boundary_inputs", "comparison_constants", "divides",
           "generated_inputs", "pools"]
