"""A tiny fake experiment with no RNG seed setting, for scripts/seed_sweep.py's tests: it runs once."""

from __future__ import annotations

from dataclasses import dataclass

from pglab.reporting.result import Result


@dataclass
class Config:
    target: float = 1.0
    """The closed form the claim compares with."""


def run(config: Config, result: Result) -> None:
    result.check_close("one equals the target", 1.0, config.target, 1e-12, "exact: float64 roundoff")
