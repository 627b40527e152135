"""A tiny fake experiment without first_seed but with two RNG seed settings, for scripts/seed_sweep.py's tests."""

from __future__ import annotations

from dataclasses import dataclass

from pglab.reporting.result import Result


@dataclass
class Config:
    seed: int = 5
    """RNG seed of the draws."""
    draw_seed: int = 7
    """RNG seed of the other draws."""


def run(config: Config, result: Result) -> None:
    result.check("the seeds stay distinct", config.draw_seed - config.seed, config.draw_seed != config.seed, "!= 0",
                 "exact: the shift keeps their difference")
