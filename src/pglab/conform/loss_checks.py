"""Loss-level checks: the framework's own loss audited exactly on pglab's enumerable batches, on- and off-policy.

For each behaviour (on-policy, then BEHAVIOURS: logit noise and one stale step) two checks:
- ``documented``: E[g] of the framework's code against E[g] of the pglab preset its config documents (the formula
  written with pglab's estimators, checked against the same code in tests/audit/test_presets_peers.py): the factor
  (E[g] . E[g_doc]) / |E[g_doc]|^2 and the sine left after it; pass within MATCH_TOLERANCE, fail otherwise (the
  code does not compute what the framework documents), warn when no preset models the settings;
- ``objective``: the audit's verdict on the framework's loss: pass when E[g] is a positive multiple of grad(-J),
  warn naming the objective it follows instead (or its scaled bias), with scale, variance and per-prompt weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pglab.audit.behaviour import behaviour_pair, describe
from pglab.audit.core import AuditReport, LossError, audit_loss
from pglab.audit.report import verdict as audit_verdict
from pglab.conform.checks import Check
from pglab.conform.configs import FrameworkConfig
from pglab.conform.losses import documented_preset, framework_loss
from pglab.envs.enumerable import EnumerablePolicy

BEHAVIOURS = ("noise:0.3", "stale:1")
"""The off-policy samplers audited besides the policy itself (pglab.audit.behaviour specs)."""

MATCH_TOLERANCE = {"trl": 1.2e-7, "verl": 1e-8, "openrlhf": 2e-6}
"""|factor - 1| and the sine under which the framework's E[g] equals the documented one. verl runs in float64:
the audit's 1e-8. TRL's nanstd computes Bessel's factor n / (n - 1) in float32 (integer tensors divide to float32),
a relative error up to 2^-24 = 6e-8 in every advantage: twice that. OpenRLHF's compute_approx_kl returns float32 and
its whitening runs in float32 (unit roundoff 6e-8 through a few dozen operations and a division by a std; the peer
test's largest relative gap is 1.3e-7, its bound 1e-6): 2e-6 for E[g]."""


@dataclass(frozen=True)
class AuditSetup:
    """The enumerable policy the loss checks audit on."""

    prompts: int = 2
    """Prompts P (one group each)."""
    group_size: int = 2
    """Replies per prompt in a batch (it replaces the config's number of generations)."""
    length: int = 2
    """Most tokens in a reply; replies end early with an end token, so lengths differ (aggregations differ)."""
    seed: int = 0
    """Seed of the policy's weights and rewards."""

    def policy(self) -> EnumerablePolicy:
        return EnumerablePolicy(prompts=self.prompts, vocab=3, length=self.length, eos=True,
                                parametrisation="table", seed=self.seed)


def factor_and_sine(gradient: torch.Tensor, documented: torch.Tensor) -> tuple[float, float]:
    """(c minimising |g - c g_doc|, |g - c g_doc| / |g|) for E[g], E[g_doc] [D]."""
    norm = float(documented @ documented)
    factor = float(gradient @ documented) / norm if norm > 0 else float("nan")
    residual = float((gradient - factor * documented).norm())
    return factor, residual / max(float(gradient.norm()), 1e-300)


def audit(loss_fn, setup: AuditSetup, beta: float, behaviour: str | None) -> AuditReport:
    policy, sampler = behaviour_pair(setup.policy(), behaviour, beta=beta)
    return audit_loss(loss_fn, policy, beta=beta, group_size=setup.group_size, behaviour=sampler, seed=setup.seed)


def documented_check(framework: AuditReport, documented: AuditReport | None, label: str, where: str,
                     tolerance: float) -> Check:
    """The framework's E[g] against the documented preset's."""
    name = f"documented loss, {where}"
    if documented is None:
        return Check(name, "warn", None, f"{label}: the formula is not checked, only the objective")
    factor, sine = factor_and_sine(framework.gradient, documented.gradient)
    detail = f"E[g] = {factor:.9g} x E[g] of {label} (sine left {sine:.2g}, tolerance {tolerance:.2g})"
    ok = abs(factor - 1) <= tolerance and sine <= tolerance
    return Check(name, "pass" if ok else "fail", factor, detail if ok else
                 detail + ": the code does not compute the loss its config documents")


def objective_check(report: AuditReport, where: str) -> Check:
    """The audit's verdict on the framework's own loss: pass when unbiased up to scale, warn naming what it follows."""
    weights = "" if report.prompt_weights is None else \
        ", per-prompt weights " + "/".join(f"{w:.3g}" for w in report.prompt_weights)
    detail = (f"{audit_verdict(report)}; scale {report.scale:.4g}, relative bias {report.relative_bias:.3g}, "
              f"scaled bias {report.scaled_bias:.3g}, variance {report.total_variance:.4g}{weights}")
    return Check(f"objective, {where}", "pass" if report.follows == "reverse_kl" else "warn", None, detail)


def loss_checks(config: FrameworkConfig, setup: AuditSetup, behaviours: tuple[str, ...] = BEHAVIOURS) -> list[Check]:
    """The documented and objective checks, on-policy and under each behaviour."""
    loss_fn = framework_loss(config)
    preset, label = documented_preset(config)
    checks = []
    for behaviour in (None, *behaviours):
        where = describe(behaviour).split(" (")[0]
        try:
            mine = audit(loss_fn, setup, config.beta, behaviour)
        except LossError as error:
            checks.append(Check(f"framework loss, {where}", "fail", None, str(error)))
            continue
        documented = None if preset is None else audit(preset, setup, config.beta, behaviour)
        checks.append(documented_check(mine, documented, label, where, MATCH_TOLERANCE[config.framework]))
        checks.append(objective_check(mine, where))
    return checks
