"""The Result of an experiment: what it ran with, what it measured, and which claims held."""

from __future__ import annotations

import math
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


@dataclass
class Check:
    """One claim of an experiment, the number measured for it, and whether it held.

    ``expected`` states the target with its tolerance in words (``">= 0.99"``,
    ``"0.130 +- 0.005"``); ``tolerance`` says where the tolerance comes from (``"3 standard
    errors, se = 0.0012"``), so a reader of the report can judge the claim.
    """

    claim: str
    """What the experiment claims, in words."""
    value: float
    """The number measured for it."""
    expected: str
    """The target with its tolerance, in words."""
    passed: bool | None
    """Whether it held; None: not evaluated (a quick run, and the claim only means something at full size)."""
    tolerance: str = ""
    """Where the tolerance comes from."""

    @property
    def status(self) -> str:
        """yes, NO, or not evaluated."""
        return "not evaluated" if self.passed is None else "yes" if self.passed else "NO"


@dataclass
class Result:
    """Everything one experiment returns: tables are lists of row dicts, figures matplotlib figures."""

    name: str
    """The experiment's (or command's) name."""
    config: dict[str, Any]
    """The settings it ran with."""
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Table name -> rows."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Named numbers."""
    figures: dict[str, Any] = field(default_factory=dict)
    """Figure name -> matplotlib figure."""
    checks: list[Check] = field(default_factory=list)
    """The claims, in the order they were made."""
    summary: str = ""
    """What ran, in a few sentences."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where the result came from (see :func:`provenance`)."""
    quick: bool = False
    """A quick run, a smoke test: the claims made with ``full_size=True`` are recorded as not evaluated."""
    warnings: list[str] = field(default_factory=list)
    """What went wrong in the run, one line each starting with ``warning:`` (e.g. a training collapse)."""

    def check(self, claim: str, value: float, passed: bool, expected: str, tolerance: str = "", *,
              full_size: bool = False) -> bool:
        """Record a claim and return whether it held. ``full_size``: the claim only means something at the
        experiment's full size, so a quick run records it as not evaluated (and returns False)."""
        held = None if full_size and self.quick else bool(passed)
        self.checks.append(Check(claim, float(value), expected, held, tolerance))
        return bool(held)

    def check_close(self, claim: str, value: float, target: float, tol: float, tolerance: str = "", *,
                    full_size: bool = False) -> bool:
        """Record ``|value - target| <= tol`` as a claim."""
        return self.check(claim, value, abs(value - target) <= tol, f"{target:.6g} +- {tol:.3g}", tolerance,
                          full_size=full_size)

    def check_range(self, claim: str, value: float, low: float = -math.inf, high: float = math.inf,
                    tolerance: str = "", *, full_size: bool = False) -> bool:
        """Record ``low <= value <= high`` as a claim."""
        if math.isinf(high):
            expected = f">= {low:.6g}"
        elif math.isinf(low):
            expected = f"<= {high:.6g}"
        else:
            expected = f"in [{low:.6g}, {high:.6g}]"
        return self.check(claim, value, low <= value <= high, expected, tolerance, full_size=full_size)

    @property
    def passed(self) -> bool:
        """True when no evaluated claim failed."""
        return not self.failed_checks()

    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if c.passed is False]

    @property
    def status(self) -> str:
        """The claims in a few words: all claims hold, 2 claim(s) FAILED, ... and 11 not evaluated (quick run)."""
        failed, unjudged = len(self.failed_checks()), sum(c.passed is None for c in self.checks)
        words = f"{failed} claim(s) FAILED" if failed else "all claims hold" if not unjudged else \
            f"{len(self.checks) - unjudged} claim(s) hold"
        return words + (f", {unjudged} not evaluated (quick run: they need the full size)" if unjudged else "")


def git_commit(folder: Path | None = None) -> str | None:
    """The commit of the source checkout pglab runs from, or None outside a git checkout."""
    folder = folder or Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(command: str | None = None) -> dict[str, Any]:
    """Where a result came from: pglab version, git commit, UTC time, command line, Python, torch, platform."""
    import torch

    from pglab import __version__

    return {
        "pglab": __version__,
        "commit": git_commit(),
        "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command if command is not None else " ".join(sys.argv),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
