"""bench conform: ``pglab conform trl`` on TRL's default GRPOConfig, end to end and per phase.

Run by ``pglab bench conform``. Two measurements: each phase of the conform run in this process (the loss level,
the numerics, and each trainer-level setting: a real GRPOTrainer's steps), which says where the time goes; and the
whole command as a user runs it (a fresh Python: imports, all checks, the table), in alternating rounds against the
same command with ``--skip-trainer`` (the reference: the loss level and numerics alone). Target: the command within
60 s on 2 cores. Quick: the phases only, the trainer level on its first setting.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from pglab.conform.configs import read_config
from pglab.conform.loss_checks import AuditSetup, loss_checks
from pglab.conform.numerics import numerics_checks
from pglab.reporting.result import Result

COMMANDS = {"full": [], "skip-trainer": ["--skip-trainer"]}
"""Case -> the options added to ``pglab conform trl`` (no config: GRPOConfig's defaults)."""


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def phase_seconds(quick: bool) -> list[dict]:
    """[{'phase', 'seconds'}] of one in-process conform run on the default config (quick: one trainer setting)."""
    from pglab.conform.trl_trainer import measure, settings

    config = read_config("trl", None, {}, "grpo")
    rows = [{"phase": "loss level", "seconds": timed(lambda: loss_checks(config, AuditSetup()))},
            {"phase": "numerics", "seconds": timed(lambda: numerics_checks(config))}]
    runs = settings(config.native, distributed=False)
    for setting in runs[:1] if quick else runs:
        rows.append({"phase": f"trainer: {setting.name}",
                     "seconds": timed(lambda s=setting: measure(config.native, s, "trl:GRPOTrainer"))})
    return rows


def command_seconds(options: list[str]) -> float:
    """Wall time of ``python -m pglab conform trl OPTIONS`` in a fresh process (output discarded; exit 1, a fail
    verdict, is a result, not an error)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pglab", "conform", "trl", *options], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"pglab conform trl {' '.join(options)} failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - start


def run(quick: bool = False) -> Result:
    """The phases once, then the commands (2 rounds, alternating; none when quick): medians and the ratio."""
    rounds = 0 if quick else 2
    result = Result("bench-conform", {"config": "GRPOConfig defaults", "rounds": rounds}, quick=quick,
                    summary=("pglab conform trl on TRL's default GRPOConfig: each phase timed in this process (the "
                             "loss level, the numerics, each trainer-level setting), then the whole command in a "
                             "fresh Python against the same command with --skip-trainer, in alternating rounds."))
    phases = phase_seconds(quick)
    trainer = [row["seconds"] for row in phases if row["phase"].startswith("trainer")]
    result.tables["phases"] = phases
    result.metrics.update({"loss_level_s": phases[0]["seconds"], "numerics_s": phases[1]["seconds"],
                           "trainer_level_s": sum(trainer), "trainer_setting_median_s": statistics.median(trainer),
                           "trainer_settings": len(trainer), "load_average_1min": os.getloadavg()[0]})
    if rounds:
        times: dict[str, list[float]] = {case: [] for case in COMMANDS}
        for _ in range(rounds):
            for case, options in COMMANDS.items():
                times[case].append(command_seconds(options))
        medians = {case: statistics.median(t) for case, t in times.items()}
        result.tables["commands"] = [{"case": case, "median_s": medians[case],
                                      "rounds_s": ", ".join(f"{t:.2f}" for t in times[case])} for case in COMMANDS]
        result.metrics.update({"command_s": medians["full"], "command_skip_trainer_s": medians["skip-trainer"],
                               "ratio_command_over_skip_trainer": medians["full"] / medians["skip-trainer"]})
        result.check_range("pglab conform trl on the default GRPOConfig, command wall time (s)", medians["full"],
                           high=60.0, tolerance="speed target: at most 60 s on 2 cores")
    return result
