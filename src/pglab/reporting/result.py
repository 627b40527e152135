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
    value: float
    expected: str
    passed: bool
    tolerance: str = ""


@dataclass
class Result:
    """Everything one experiment returns: tables are lists of row dicts, figures matplotlib figures."""

    name: str
    config: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    summary: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)

    def check(self, claim: str, value: float, passed: bool, expected: str, tolerance: str = "") -> bool:
        """Record a claim and return whether it held."""
        self.checks.append(Check(claim, float(value), expected, bool(passed), tolerance))
        return bool(passed)

    def check_close(self, claim: str, value: float, target: float, tol: float, tolerance: str = "") -> bool:
        """Record ``|value - target| <= tol`` as a claim."""
        return self.check(claim, value, abs(value - target) <= tol, f"{target:.6g} +- {tol:.3g}", tolerance)

    def check_range(self, claim: str, value: float, low: float = -math.inf, high: float = math.inf,
                    tolerance: str = "") -> bool:
        """Record ``low <= value <= high`` as a claim."""
        if math.isinf(high):
            expected = f">= {low:.6g}"
        elif math.isinf(low):
            expected = f"<= {high:.6g}"
        else:
            expected = f"in [{low:.6g}, {high:.6g}]"
        return self.check(claim, value, low <= value <= high, expected, tolerance)

    @property
    def passed(self) -> bool:
        """True when every recorded claim held."""
        return all(c.passed for c in self.checks)

    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


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
