"""bench audit: ``pglab audit`` at the CLI defaults and off-policy, timed against the on-policy audit in one run.

Run by ``pglab bench audit``. Two measurements, each in alternating rounds so that a busy machine slows both
sides alike: the audit itself in this process (after one untimed warm-up audit), and the whole command as a user
runs it (a fresh Python that imports torch, builds the policy, audits and prints). The reference is the on-policy
audit at the CLI defaults (``--preset pglab``); the off-policy audit is the same with ``--behaviour stale:2``.
Targets: the command at the defaults within 5 s and off-policy within 10 s on 2 cores.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from pglab.audit.report import AuditConfig, run_audit
from pglab.reporting.result import Result

CASES = {"on-policy": None, "off-policy": "stale:2"}
"""Case -> its --behaviour spec; ``pglab audit --preset pglab`` at the CLI defaults otherwise."""


def audit_seconds(behaviour: str | None) -> float:
    """Wall time of one in-process audit at the CLI defaults with this behaviour."""
    config = AuditConfig(preset="pglab", behaviour=behaviour)
    start = time.perf_counter()
    run_audit(config)
    return time.perf_counter() - start


def command_seconds(behaviour: str | None) -> float:
    """Wall time of ``python -m pglab audit --preset pglab [--behaviour SPEC]`` in a fresh process (output
    discarded)."""
    options = [] if behaviour is None else ["--behaviour", behaviour]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pglab", "audit", "--preset", "pglab", *options], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def paired(measure, rounds: int) -> dict[str, list[float]]:
    """Each case measured ``rounds`` times, the cases alternating within each round."""
    times: dict[str, list[float]] = {case: [] for case in CASES}
    for _ in range(rounds):
        for case, behaviour in CASES.items():
            times[case].append(measure(behaviour))
    return times


def run(quick: bool = False) -> Result:
    """Time the in-process audits (3 rounds, quick 1) and the commands (3 rounds, quick 1), medians and ratios."""
    rounds = 1 if quick else 3
    result = Result("bench-audit", {"preset": "pglab", "off_policy": "stale:2", "rounds": rounds}, quick=quick,
                    summary=("pglab audit --preset pglab at the CLI defaults (P = 2, V = 2, L = 2, four replies per "
                             "prompt, beta 0.1) on-policy and with --behaviour stale:2: the audit alone in this "
                             "process, and the whole command in a fresh Python, in alternating rounds; medians, "
                             "and the off-policy median over the on-policy one."))
    audit_seconds(None)                                # warm-up: autograd's first batched backward pass
    inside, command = paired(audit_seconds, rounds), paired(command_seconds, rounds)
    medians = {(where, case): statistics.median(times[case]) for where, times in (("audit", inside),
                                                                                 ("command", command))
               for case in CASES}
    result.tables["timing"] = [{"what": where, "case": case, "median_s": medians[where, case],
                                "rounds_s": ", ".join(f"{t:.3f}" for t in times[case])}
                               for where, times in (("audit", inside), ("command", command)) for case in CASES]
    result.metrics.update({
        "audit_onpolicy_s": medians["audit", "on-policy"], "audit_offpolicy_s": medians["audit", "off-policy"],
        "command_onpolicy_s": medians["command", "on-policy"],
        "command_offpolicy_s": medians["command", "off-policy"],
        "ratio_audit_offpolicy": medians["audit", "off-policy"] / medians["audit", "on-policy"],
        "ratio_command_offpolicy": medians["command", "off-policy"] / medians["command", "on-policy"],
        "load_average_1min": os.getloadavg()[0]})
    result.check_range("pglab audit at the CLI defaults, command wall time (s)", medians["command", "on-policy"],
                       high=5.0, tolerance="speed target: under 5 s on 2 cores")
    result.check_range("pglab audit --behaviour stale:2, command wall time (s)", medians["command", "off-policy"],
                       high=10.0, tolerance="speed target: under 10 s on 2 cores")
    return result
