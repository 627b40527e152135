"""One conformance check and the verdict of many: the record every ``pglab conform`` check returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass

STATUSES = ("pass", "warn", "fail")
"""pass: computes what the framework documents; warn: a documented but biased choice; fail: does not."""


@dataclass(frozen=True)
class Check:
    """The outcome of one conformance check."""

    name: str
    """What was checked, e.g. 'gradient accumulation 2, steps_per_generation 4'."""
    status: str
    """One of STATUSES."""
    factor: float | None
    """The measured gradient (or loss) over the documented one: 1 when it conforms; None where no factor applies."""
    detail: str
    """One line: what was measured against what, and for warn/fail the objective followed or the fix."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {self.status!r}")

    def as_dict(self) -> dict:
        return asdict(self)


def verdict(checks: list[Check]) -> str:
    """fail if any check fails, else warn if any warns, else pass (an empty list is a fail: nothing was checked)."""
    statuses = {check.status for check in checks}
    if not checks or "fail" in statuses:
        return "fail"
    return "warn" if "warn" in statuses else "pass"
