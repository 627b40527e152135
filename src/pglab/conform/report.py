"""``pglab conform``: read the config, run every check, and write the report (console, report.md, report.html, JSON).

The JSON (``--json FILE``) is exactly {"framework", "version", "verdict", "checks": [{"name", "status", "factor",
"detail"}]}; a non-finite factor is null. The verdict is ``pglab.conform.checks.verdict``: fail when any check fails
(the command then exits 1), warn when any warns, else pass.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pglab.conform.checks import Check, verdict
from pglab.conform.configs import FRAMEWORK_NAMES, FrameworkConfig, read_config
from pglab.conform.frameworks import version
from pglab.conform.loss_checks import BEHAVIOURS, AuditSetup, loss_checks
from pglab.conform.numerics import numerics_checks
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError, check_folder


@dataclass
class ConformConfig:
    """The settings of ``pglab conform FRAMEWORK``."""

    config: str | None = None
    """The framework's config file: TRL GRPOConfig/RLOOConfig fields (YAML or JSON), verl's hydra YAML, or a file of
    OpenRLHF train_ppo_ray.py arguments; none: the framework's defaults (with --set)."""
    trainer: Literal["grpo", "rloo"] = "grpo"
    """TRL only: read the file as a GRPOConfig or an RLOOConfig."""
    json: str | None = None
    """Also write {framework, version, verdict, checks} to this JSON file."""
    out: str | None = None
    """Folder for report.md, report.html and result.json (none: the console only)."""
    skip_trainer: bool = False
    """TRL: leave out the trainer-level checks (a real GRPOTrainer's steps; the slow part)."""
    distributed: bool = False
    """TRL: add the trainer's two-process check (torchrun with gloo on the CPU)."""
    prompts: int = 2
    """Prompts of the enumerable policy the loss is audited on (one group each)."""
    group_size: int = 2
    """Replies per prompt in the audited batches (it replaces the config's number of generations)."""
    seed: int = 0
    """Seed of the audited policy's weights and rewards."""

    def __post_init__(self) -> None:
        for name, low in (("prompts", 1), ("group_size", 2)):
            if getattr(self, name) < low:
                raise SettingsError(f"--{name.replace('_', '-')} must be >= {low}, got {getattr(self, name)}")
        if self.config is not None and not Path(self.config).is_file():
            raise SettingsError(f"--config {self.config}: no such file; pass the framework's config file")
        if self.out is not None:
            check_folder(self.out)


def trainer_checks(config: FrameworkConfig, settings: ConformConfig) -> list[Check]:
    """TRL GRPOTrainer's step-level checks (pglab.conform.trl_trainer), where they apply."""
    if config.framework != "trl" or settings.skip_trainer:
        return []
    if config.trainer != "GRPOTrainer":
        return [Check("trainer level", "warn", None, "only GRPOTrainer runs at the trainer level; RLOOTrainer's "
                      "loss is checked at the loss level")]
    from pglab.conform.trl_trainer import trainer_checks as run

    try:
        return run(config.native, distributed=settings.distributed, seed=settings.seed)
    except ValueError as error:
        return [Check("trainer level", "warn", None, str(error))]


def run_conform(framework: str, sets: dict[str, str], settings: ConformConfig,
                behaviours: tuple[str, ...] = BEHAVIOURS) -> tuple[FrameworkConfig, list[Check]]:
    """Read the config and run the loss, numerics and trainer checks."""
    if framework not in FRAMEWORK_NAMES:
        raise SettingsError(f"pglab conform takes one of {', '.join(FRAMEWORK_NAMES)}, got {framework!r}")
    config = read_config(framework, Path(settings.config) if settings.config else None, sets, settings.trainer)
    setup = AuditSetup(prompts=settings.prompts, group_size=settings.group_size, seed=settings.seed)
    checks = loss_checks(config, setup, behaviours) + numerics_checks(config) + trainer_checks(config, settings)
    return config, checks


def finite(value: float | None) -> float | None:
    """JSON has no NaN or inf: those factors are None."""
    return value if value is not None and math.isfinite(value) else None


def payload(framework: str, checks: list[Check]) -> dict:
    """The --json document."""
    return {"framework": framework, "version": version(framework), "verdict": verdict(checks),
            "checks": [check.as_dict() | {"factor": finite(check.factor)} for check in checks]}


def as_result(config: FrameworkConfig, checks: list[Check], sets: dict[str, str]) -> Result:
    """The checks as a Result for pglab.reporting (one table; the verdict in the summary; no provenance: the
    caller adds it where the report is written)."""
    name = f"conform {config.framework}"
    summary = (f"verdict: {verdict(checks)}. {config.framework} {version(config.framework)}, config read by "
               f"{config.source}; KL coefficient {config.beta:g}.")
    rows = [{"check": c.name, "status": c.status, "factor": finite(c.factor), "detail": c.detail} for c in checks]
    return Result(name, {"framework": config.framework, "source": config.source, "set": sets, "beta": config.beta},
                  tables={"checks": rows}, summary=summary,
                  warnings=[f"warning: {c.name}: {c.detail}" for c in checks if c.status == "warn"])


def write_json(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2))
