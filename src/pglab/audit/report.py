"""What ``pglab audit`` runs and prints: the default policy, a loss named by preset or by module:function, the table."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pglab.audit.behaviour import behaviour_pair, describe, parse_spec
from pglab.audit.core import AuditReport, audit_loss
from pglab.audit.presets import PRESETS, LossFn, get_preset, grouped_presets
from pglab.envs.enumerable import OBJECTIVES, EnumerablePolicy
from pglab.runtime.options import SettingsError, flag_of


@dataclass
class AuditConfig:
    """The settings of one ``pglab audit`` run: a loss named by ``preset`` or by ``loss``, and the policy it is
    audited on."""

    preset: str | None = None
    """A preset name (``pglab audit --list``), or None with ``loss``."""
    loss: str | None = None
    """module:function or path/to/file.py:function, a loss with the audit's signature."""
    beta: float = 0.1
    """KL price of the stated objective J (and the KL coefficient of a preset)."""
    group_size: int = 4
    """Replies per prompt in a batch."""
    policy: Literal["table", "gpt2"] = "table"
    """Parametrisation: table (logits per prefix) or gpt2 (a tiny random GPT-2)."""
    variable_length: bool = False
    """Add an end token (the last of the vocabulary) so that replies have 1 to --length tokens."""
    vocab: int | None = None
    """Reply tokens V; by default 2, or 3 with --variable-length (two tokens and the end)."""
    prompts: int = 2
    """Prompts P (the batch holds one group per prompt)."""
    length: int = 2
    """Most tokens in a reply."""
    seed: int = 0
    """RNG seed of the weights, the rewards and the structure checks (and of Monte Carlo draws)."""
    behaviour: str | None = None
    """The sampler of the batches, off-policy: comma-separated noise:S, stale:K, top-p:P, top-k:K, temperature:T
    (e.g. stale:2,top-p:0.9; see docs/audit.md, Off-policy); none: the policy samples its own batches."""
    monte_carlo: bool = False
    """Draw batches even where enumeration fits."""
    max_batches: int = 20_000
    """Enumerate when the batches to list number at most this (a loss evaluation each), else draw ``samples``."""
    samples: int = 5_000
    """Batches drawn in Monte Carlo mode."""
    json: str | None = None
    """Also write the report, with these settings, as JSON to this file (its folder must exist)."""

    def __post_init__(self) -> None:
        if (self.preset is None) == (self.loss is None):
            raise SettingsError("name a loss: --preset NAME (see --list) or --loss module:function")
        if self.preset is not None and self.preset not in PRESETS:
            raise SettingsError(f"unknown preset {self.preset!r}; `pglab audit --list` shows: {', '.join(PRESETS)}")
        if self.policy not in ("table", "gpt2"):
            raise SettingsError(f"--policy must be table or gpt2, got {self.policy!r}")
        for name, low in (("group_size", 1), ("prompts", 1), ("length", 1), ("seed", 0), ("samples", 2),
                          ("max_batches", 1)):
            if getattr(self, name) < low:
                raise SettingsError(f"{flag_of(AuditConfig, name)} must be >= {low}, got {getattr(self, name)}")
        if not (math.isfinite(self.beta) and self.beta >= 0):
            raise SettingsError(f"--beta must be a finite number >= 0, got {self.beta}")
        low = 3 if self.variable_length else 2
        if self.vocab is not None and self.vocab < low:
            why = " with --variable-length (two tokens and the end)" if self.variable_length else ""
            raise SettingsError(f"--vocab must be >= {low}{why}, got {self.vocab}")
        parse_spec(self.behaviour)
        if self.json is not None:
            check_json_file(Path(self.json))


def check_json_file(path: Path) -> None:
    """Refuse a --json path that is a folder or whose folder does not exist, before the audit runs."""
    if path.is_dir():
        raise SettingsError(f"--json {path} is a folder; pass a file name (e.g. {path / 'audit.json'})")
    if not path.absolute().parent.is_dir():
        raise SettingsError(f"--json {path}: its folder does not exist; pass a file in an existing folder")


def load_loss(spec: str) -> LossFn:
    """The function named by 'module:function' or 'path/to/file.py:function'."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise SettingsError(f"--loss takes module:function or file.py:function, got {spec!r}")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise SettingsError(f"--loss {spec}: no file {path}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        if str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            raise SettingsError(f"--loss {spec}: cannot import {target} ({err}); run from the folder holding it") \
                from None
    if not hasattr(module, name):
        raise SettingsError(f"--loss {spec}: {target} has no {name!r}")
    return getattr(module, name)


def make_policy(config: AuditConfig) -> EnumerablePolicy:
    """The enumerable policy the CLI audits on."""
    vocab = config.vocab if config.vocab is not None else 3 if config.variable_length else 2
    return EnumerablePolicy(prompts=config.prompts, vocab=vocab, length=config.length, eos=config.variable_length,
                            parametrisation=config.policy, seed=config.seed)


def run_audit(config: AuditConfig) -> AuditReport:
    """Build the loss, the policy and its behaviour of ``config``, and audit."""
    loss_fn = get_preset(config.preset, config.beta) if config.preset else load_loss(config.loss)
    policy, behaviour = behaviour_pair(make_policy(config), config.behaviour, beta=config.beta)
    return audit_loss(loss_fn, policy, beta=config.beta, group_size=config.group_size, behaviour=behaviour,
                      seed=config.seed, max_batches=config.max_batches, samples=config.samples,
                      monte_carlo=config.monte_carlo)


def verdict(report: AuditReport) -> str:
    """The audit in one line: unbiased (up to a step-size factor), biased toward a named objective, or biased.

    "Unbiased" means E[g] is a positive multiple of grad(-J), the stated objective's gradient; the factor c only
    rescales the learning rate. Exact mode calls c = 1 within report.tolerance (EXACT_TOLERANCE, or the roundoff
    of a float32 loss); Monte Carlo within 3 standard errors.
    """
    noise = "" if report.exact else " (within the Monte Carlo noise)"
    if report.follows == "reverse_kl":
        tolerance = report.tolerance if report.exact else 3 * report.standard_errors.get("scale", 0.0)
        if abs(report.scale - 1) <= tolerance:
            return f"unbiased: E[g] = grad J{noise}"
        return f"unbiased up to a step-size factor {report.scale:.3g}{noise}"
    if report.follows == "reweighted":
        weights = ", ".join(f"{w:.3g}" for w in report.prompt_weights or [])
        return f"biased: follows J with each prompt's term reweighted ({weights}){noise}"
    if report.follows is not None:
        return f"biased: follows {OBJECTIVES[report.follows]} ({report.follows}){noise}"
    return f"biased: no objective found, scaled bias {report.scaled_bias:.2g}"


def summary_rows(report: AuditReport, behaviour: str | None = None) -> list[dict]:
    """The report as rows of (quantity, value, meaning) for the terminal table; ``behaviour`` the spec audited."""
    se = report.standard_errors
    rows = [
        ("behaviour", describe(behaviour), "what sampled the batches: E[g] is under it, g at the policy"),
        ("relative bias", report.relative_bias, "|E[g] - grad(-J)| / |grad J|"
         + (f" (noise {se['relative_bias']:.2g})" if se else "")),
        ("cosine", report.cosine, "between E[g] and grad(-J)"),
        ("scale", report.scale, "c minimising |E[g] - c grad(-J)|" + (f" (se {se['scale']:.2g})" if se else "")),
        ("scaled bias", report.scaled_bias, "|E[g] - c grad(-J)| / |c grad J|"),
        ("total variance", report.total_variance, "E|g - E[g]|^2 of one batch"),
        ("follows", (report.follows or "none found") + ("" if report.exact else " (within the noise)"),
         "objective whose gradient E[g] is, up to a positive scale"),
        ("mode", "exact" if report.exact else "monte carlo", f"{report.batches:,} batches ({report.structure})"),
    ]
    if report.prompt_weights is not None:
        rows.append(("prompt weights", ", ".join(f"{w:.3g}" for w in report.prompt_weights),
                     "best per-prompt scales of J's terms, mean 1"))
    return [{"quantity": q, "value": v, "meaning": m} for q, v, m in rows]


def write_json(report: AuditReport, config: AuditConfig, path: Path) -> None:
    """The report's fields and the settings, as JSON."""
    from dataclasses import asdict

    def finite(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, list):
            return [finite(v) for v in value]
        return value

    path.write_text(json.dumps(finite({"verdict": verdict(report), "behaviour": describe(config.behaviour),
                                       **report.as_dict(), "config": asdict(config)}), indent=2))


def preset_lines() -> list[str]:
    """The presets under their framework's name, one line each (a '!' marks those with a warning)."""
    lines = []
    for framework, names in grouped_presets().items():
        lines += [f"{framework}:"] + [f"  {'!' if PRESETS[n].warning else ' '} {n:<40} {PRESETS[n].summary}"
                                      for n in names]
    return lines
