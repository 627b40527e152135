"""pglab audit: the exact bias and variance of any policy-gradient loss on an enumerable policy.

``audit_loss(loss_fn, policy, *, beta, group_size)`` returns an ``AuditReport``; ``PRESETS`` names the
configurations of pglab, TRL, verl and OpenRLHF, each written with pglab's estimators.
"""

from pglab.audit.core import SIGNATURE, AuditReport, LossError, audit_loss
from pglab.audit.presets import PRESETS, get_preset, placement_loss

__all__ = ["PRESETS", "SIGNATURE", "AuditReport", "LossError", "audit_loss", "get_preset", "placement_loss"]
