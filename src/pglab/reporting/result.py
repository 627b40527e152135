"""The Result of an experiment: what it ran with, what it measured, and which claims held."""

from __future__ import annotations

import math
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from statistics import NormalDist
from typing import Any

from pglab.reporting.tails import t_upper_tail

FAMILY_ALPHA = 0.01
"""Default family-wise false-alarm rate of an experiment's statistical claims."""


def upper_tail(z: float, dof: int | None = None) -> float:
    """P(Z >= z) for a standard normal Z, or for Student's t with ``dof`` degrees of freedom."""
    if dof is None:
        return 1.0 - NormalDist().cdf(z) if z < 0 else NormalDist().cdf(-z)
    return t_upper_tail(z, dof)


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
    p_value: float | None = None
    """A statistical claim's p-value (the chance of data at least this far from the claim were it true); None: an
    exact claim, one that holds or fails at every seed alike (a closed form to roundoff), which needs a negative
    control in the tests instead."""

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
    family_alpha: float = FAMILY_ALPHA
    """The family-wise false-alarm rate of the statistical claims: Holm's step-down over all of them, so that an
    honest rerun at a new seed fails any of them with probability at most this."""

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

    def check_p(self, claim: str, value: float, p_value: float, expected: str, tolerance: str = "", *,
                full_size: bool = False) -> bool:
        """Record a statistical claim with its p-value. It fails only when Holm's step-down over every statistical
        claim of this Result rejects it at ``family_alpha``, so each later claim re-judges the earlier ones and the
        returned value (whether it holds among the claims made so far) is provisional."""
        if not (0.0 <= p_value <= 1.0):
            raise ValueError(f"{claim}: a p-value lies in [0, 1], got {p_value!r}")
        self.checks.append(Check(claim, float(value), expected, None if full_size and self.quick else True,
                                 tolerance, p_value=float(p_value)))
        self._judge_family()
        return bool(self.checks[-1].passed)

    def check_z(self, claim: str, value: float, target: float, se: float, tolerance: str = "", *,
                side: str = "both", dof: int | None = None, full_size: bool = False) -> bool:
        """Record a statistical claim about an estimate ``value`` with standard error ``se`` against ``target``:
        ``side`` both (value = target), at_least (value >= target) or at_most (value <= target). The p-value is
        the normal tail of z = (value - target) / se, or Student's t with ``dof`` degrees of freedom."""
        if not se > 0 or not math.isfinite(se):
            raise ValueError(f"{claim}: a standard error is a finite number > 0, got {se!r}")
        z = (value - target) / se
        tail = {"both": abs(z), "at_least": -z, "at_most": z}
        if side not in tail:
            raise ValueError(f"{claim}: side is both, at_least or at_most, got {side!r}")
        p = upper_tail(tail[side], dof) * (2 if side == "both" else 1)
        sign = {"both": "=", "at_least": ">=", "at_most": "<="}[side]
        expected = f"{sign} {target:.6g} (se {se:.3g})"
        return self.check_p(claim, value, min(1.0, p), expected, tolerance, full_size=full_size)

    def _judge_family(self) -> None:
        """Holm's step-down at ``family_alpha`` over the evaluated statistical claims: sorted by p-value, the i-th
        smallest (from 0) is rejected while p < alpha / (m - i); the first kept one keeps all larger ones."""
        judged = sorted((c for c in self.checks if c.p_value is not None and c.passed is not None),
                        key=lambda c: c.p_value)
        rejecting = True
        for i, check in enumerate(judged):
            rejecting = rejecting and check.p_value < self.family_alpha / (len(judged) - i)
            check.passed = not rejecting

    @property
    def family(self) -> dict[str, Any]:
        """How the claims are judged: the family-wise rate, statistical and exact claim counts."""
        evaluated = [c for c in self.checks if c.passed is not None]
        statistical = sum(c.p_value is not None for c in evaluated)
        return {"family_alpha": self.family_alpha, "statistical_claims": statistical,
                "exact_claims": len(evaluated) - statistical}

    @property
    def family_line(self) -> str:
        """The false-alarm rate in one sentence, for the report."""
        f = self.family
        return (f"Statistical claims: {f['statistical_claims']}, judged together by Holm's step-down so that an "
                f"honest rerun at a new seed fails any of them with probability at most {f['family_alpha']:.0%}; "
                f"exact claims (closed forms to roundoff, the same at every seed): {f['exact_claims']}.")

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
