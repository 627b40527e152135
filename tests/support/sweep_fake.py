"""A tiny fake experiment for scripts/seed_sweep.py's tests: its claims fail at known first seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pglab.reporting.result import Result


@dataclass
class Config:
    first_seed: int = 0
    """First RNG seed (the sweep moves it)."""
    fail_every: int = 3
    """The exact claim fails at first seeds divisible by this."""
    flag_every: int = 0
    """The statistical claim's p-value is 0 (it fails) at first seeds divisible by this; 0: never."""
    crash_at: int = -1
    """The run raises at this first seed."""

    QUICK: ClassVar[dict] = {"fail_every": 2}


def run(config: Config, result: Result) -> None:
    if config.first_seed == config.crash_at:
        raise RuntimeError(f"the fake crashes at first seed {config.crash_at}")
    result.tables["main"] = [{"first seed": config.first_seed}]
    result.check("first seed not divisible by fail_every", config.first_seed % config.fail_every,
                 config.first_seed % config.fail_every != 0, "!= 0", "exact: the seed's remainder")
    flagged = config.flag_every > 0 and config.first_seed % config.flag_every == 0
    result.check_p("a statistical claim", 0.0, 0.0 if flagged else 0.5, "p >= 0.01", "the fake's own p-value")
