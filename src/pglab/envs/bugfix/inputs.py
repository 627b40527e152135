"""The generated hidden inputs of the BugFix tasks: argument kinds per task, boundary values first, then random ones.

Each task's few hundred generated cases (``Task.generated``) are these inputs with the expected value computed
from the task's correct source (see :func:`pglab.envs.bugfix.tasks.reference_cases`).
"""

from __future__ import annotations

import itertools
import random

INPUTS = {
    "clamp": ("int", "int", "int"), "product": ("ints",), "sum_to": ("int",), "mean": ("nums",),
    "count_at_least": ("nums", "num"), "spread": ("nums",), "count_positive": ("nums",), "sum_items": ("nums",),
    "ratio": ("num", "num"), "in_range": ("num", "num", "num"), "running_peak": ("nums",),
    "sum_of_squares": ("nums",), "factorial": ("nat",), "percent": ("int", "int"), "is_sorted": ("ints",),
    "capped_total": ("nums", "num"), "dot": ("pair",), "count_multiples": ("int", "int"),
    "average_length": ("words",), "all_at_most": ("nums", "num"), "limit_each": ("nums", "num"),
    "tally_odd": ("ints",), "head_total": ("prefix",), "average_of": ("nums",), "within_bound": ("nums", "num"),
    "extremes": ("nums",), "power_of": ("int", "nat"), "square_series": ("int",), "share": ("int", "int"),
    "grown_ups": ("ages",),
}
"""The argument kinds of each task's generated inputs: ``int`` (-30..30), ``nat`` (0..12), ``num`` (ints and
non-integer floats), lists of them (``ints``, ``nums``), ``words`` (lists of strings), ``ages`` (ints 0..40
around 18), ``pair`` (two lists of equal length: two arguments) and ``prefix`` (a list and a count up to its
length: two arguments)."""


GENERATED = 300
"""Generated inputs per task, boundary values included (fewer when the reference raises on some)."""


BOUNDARY = {"int": [0, 1, -1, 2, -2, 3, 10, -10, 30, -30], "nat": [0, 1, 2, 3, 12],
            "num": [0, 1, -1, 0.5, -0.5, 1.5, 2.5, -2.5, 0.25, 3]}


def _value(kind: str, rng: random.Random):
    """One random argument of ``kind`` (a list kind gives 0 to 6 items)."""
    if kind == "int":
        return rng.randint(-30, 30)
    if kind == "nat":
        return rng.randint(0, 12)
    if kind == "num":
        return rng.choice([rng.randint(-10, 10), round(rng.uniform(-10, 10), 2), rng.choice([0.5, -0.5, 0.1])])
    if kind == "ages":
        return [rng.choice([17, 18, 19, rng.randint(0, 40)]) for _ in range(rng.randint(0, 6))]
    if kind == "words":
        return ["".join(rng.choice("abc") for _ in range(rng.randint(0, 5))) for _ in range(rng.randint(0, 5))]
    items = [_value("int" if kind in ("ints", "pair") else "num", rng) for _ in range(rng.randint(0, 6))]
    if rng.random() < 0.25:
        items.sort(reverse=rng.random() < 0.3)
    if kind == "pair":
        return items, [_value("int", rng) for _ in items]
    if kind == "prefix":
        return items, rng.randint(0, len(items))
    return [abs(x) % 5 for x in items] if kind == "ints" and rng.random() < 0.3 else items  # repeats


def _boundary(kind: str) -> list:
    """Boundary arguments of ``kind``: extremes, zero and one, empty and one-item lists, repeats, sorted runs."""
    if kind in BOUNDARY:
        return BOUNDARY[kind]
    if kind == "pair":
        return [([], []), ([0], [5]), ([1, -1], [1, 1]), ([2, 2, 2], [3, -3, 0])]
    if kind == "prefix":
        return [([], 0), ([5], 0), ([5], 1), ([1, 2, 3], 3), ([-1, 0.5], 1)]
    if kind == "words":
        return [[], [""], ["a"], ["ab", ""], ["abc", "abc"]]
    if kind == "ages":
        return [[], [17], [18], [19], [18, 18], [0, 40]]
    numbers = [0, 1, -1, 2] if kind == "ints" else [0, 1, -1, 0.5, -0.5]
    return [[], *[[x] for x in numbers], [2, 2], [1, 2, 3], [3, 2, 1], [1, 1, 2], [0, -1, 0]]


def _flatten(kinds: tuple[str, ...], values: tuple) -> tuple:
    """The call's arguments: a ``pair`` or ``prefix`` value is two arguments."""
    out = []
    for kind, value in zip(kinds, values):
        out += list(value) if kind in ("pair", "prefix") else [value]
    return tuple(out)


def generated_inputs(name: str, n: int = GENERATED, seed: int | str = "") -> list[tuple]:
    """``n`` distinct argument tuples for task ``name``: every combination of boundary values (up to n // 2),
    then random ones from ``random.Random(name + seed)``."""
    kinds = INPUTS[name]
    found: dict[str, tuple] = {}
    for values in itertools.islice(itertools.product(*map(_boundary, kinds)), n // 2):
        found.setdefault(repr(values), _flatten(kinds, values))
    rng = random.Random(f"{name}{seed}")
    for _ in range(10 * n):
        if len(found) >= n:
            break
        values = tuple(_value(kind, rng) for kind in kinds)
        found.setdefault(repr(values), _flatten(kinds, values))
    return list(found.values())


__all__ = ["BOUNDARY", "GENERATED", "INPUTS", "_boundary", "_flatten", "_value", "generated_inputs"]
