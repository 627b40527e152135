"""Numerics checks: the framework's own loss on edge batches, its gradient w.r.t. logp against the documented one.

Each edge batch (EDGES) is one on-policy batch of GROUPS groups; the check fails when a NaN or inf reaches the
gradient, or (where a pglab preset models the config) when the gradient differs from the documented formula's by more
than the framework's MATCH_TOLERANCE relative to its largest entry. Near-equal float32 rewards are judged by the
size of what they move: rewards that differ only by float32 roundoff carry no signal, so their gradient over the
gradient of rewards 0/1 of the same pattern should be tiny; RESIDUE_WARNING or more is a warning (the group std's
roundoff residue blown up into full-size advantages).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from pglab.conform.checks import Check
from pglab.conform.configs import FrameworkConfig
from pglab.conform.loss_checks import MATCH_TOLERANCE
from pglab.conform.losses import documented_preset, framework_loss

GROUPS, K, T = 2, 4, 3
"""Edge batches: groups, replies per group, most tokens."""
RESIDUE_WARNING = 0.5
"""|g(near-equal float32 rewards)| / |g(rewards 0/1)| at or above which the std's residue is a warning: a spread of
one float32 ulp (1.2e-7 on rewards near 1) then moves the policy half as much as a whole reward does."""

Batch = dict[str, torch.Tensor]
SINGLETON = "a singleton group (one reply per prompt)"
"""The edge whose NaN is a warning: a framework's config check, not its loss, refuses one reply per prompt."""


def base_batch(k: int = K, groups: int = GROUPS, seed: int = 0) -> Batch:
    """A float64 batch [groups k, T] with replies of 1 to T tokens, logp != ref, rewards 0/1 mixed in each group."""
    generator = torch.Generator().manual_seed(seed)
    b = groups * k
    lengths = 1 + torch.arange(b) % T
    mask = (torch.arange(T) < lengths[:, None]).double()
    logp = -torch.rand(b, T, generator=generator, dtype=torch.float64) * 2 * mask
    ref = (logp + 0.3 * torch.randn(b, T, generator=generator, dtype=torch.float64)).clamp(max=-1e-3) * mask
    rewards = (torch.arange(b) % 2).double()
    return {"logp": logp, "ref": ref, "rewards": rewards, "mask": mask,
            "group": torch.arange(groups).repeat_interleave(k)}


def with_log_ratio(batch: Batch, log_ratio: float) -> Batch:
    """ref = logp - log_ratio on the even rows and logp + log_ratio on the odd ones (the KL's argument at +-one
    value)."""
    sign = torch.where(torch.arange(len(batch["logp"]))[:, None] % 2 == 0, 1.0, -1.0).double()
    return batch | {"ref": (batch["logp"] - sign * log_ratio) * batch["mask"]}


def empty_completion(batch: Batch) -> Batch:
    """The first reply of each group has no tokens (an empty completion: its mask row all 0)."""
    mask = batch["mask"].clone()
    mask[::K] = 0
    return batch | {"mask": mask, "logp": batch["logp"] * mask, "ref": batch["ref"] * mask}


def kl_only(batch: Batch) -> Batch:
    """Every reward 1: the policy term is 0, so the gradient is the KL term's alone."""
    return batch | {"rewards": torch.ones_like(batch["rewards"])}


EDGES: dict[str, tuple[Callable[[], Batch], str]] = {
    "zero-variance groups (every reward 1)": (lambda: kl_only(base_batch()), "fail"),
    SINGLETON: (lambda: base_batch(k=1, groups=3), "fail"),
    "k3 at tiny log-ratios (+-1e-6)": (lambda: kl_only(with_log_ratio(base_batch(), 1e-6)), "warn"),
    "k3 at large log-ratios (+-20)": (lambda: kl_only(with_log_ratio(base_batch(), 20.0)), "warn"),
    "empty completions": (lambda: empty_completion(base_batch()), "fail"),
}
"""Check name -> (the edge batch, the status of a gradient that differs from the documented one). The k3 edges
isolate the KL term; a gap there is a precision loss (e.g. k3 in float32: exp(x) - 1 - x cancels at tiny x), a
warning, since the loss-level checks have already compared the formula itself at ordinary log-ratios."""


def gradient(loss_fn, batch: Batch) -> torch.Tensor:
    """d loss / d logp [B, T] (on-policy: rollout and old log-probs are logp itself), 0 off the mask."""
    logp = batch["logp"].clone().requires_grad_(True)
    loss = loss_fn(logp, batch["ref"], batch["rewards"], batch["mask"], batch["group"], rollout_logp=logp.detach(),
                   old_logp=logp.detach())
    (grad,) = torch.autograd.grad(loss, logp, allow_unused=True)
    return (torch.zeros_like(logp) if grad is None else grad) * batch["mask"]


def edge_check(name: str, loss_fn, documented, batch: Batch, tolerance: float, mismatch: str = "fail") -> Check:
    """Finite, and equal to the documented gradient where a preset models the config (else status ``mismatch``)."""
    try:
        mine = gradient(loss_fn, batch)
    except (RuntimeError, ValueError, AssertionError, ZeroDivisionError) as error:
        return Check(name, "pass", None, f"refused: {type(error).__name__}: {' '.join(str(error).split())[:160]}")
    if not torch.isfinite(mine).all():
        bad = f"{int((~torch.isfinite(mine)).sum())} NaN or inf in d loss / d logp"
        if name == SINGLETON:   # frameworks refuse one reply per prompt in their configs, not in the loss
            return Check(name, "warn", None, bad + ": keep two or more replies per prompt (generations)")
        return Check(name, "fail", None, bad)
    if documented is None:
        return Check(name, "pass", None, f"finite; max |d loss / d logp| {float(mine.abs().max()):.3g} (no preset "
                     f"models the config: not compared)")
    try:
        theirs = gradient(documented, batch)
    except ValueError as error:
        return Check(name, "pass", None, f"finite; pglab's formula refuses this batch ({str(error)[:80]}...)")
    if not torch.isfinite(theirs).all():
        return Check(name, "pass", None, "finite, where the documented formula is not (not compared)")
    scale = max(float(theirs.abs().max()), 1e-300)
    gap = float((mine - theirs).abs().max()) / scale
    norm = float((theirs * theirs).sum())
    factor = float((mine * theirs).sum()) / norm if norm > 0 else None
    if float(theirs.abs().max()) == 0:
        ok, detail = float(mine.abs().max()) == 0, f"documented gradient 0, max |d loss / d logp| " \
                                                    f"{float(mine.abs().max()):.3g}"
    else:
        ok, detail = gap <= tolerance, f"max gap to the documented gradient {gap:.2g} of its largest entry " \
                                       f"(tolerance {tolerance:.2g})"
    return Check(name, "pass" if ok else mismatch, factor, detail)


def residue_check(loss_fn) -> Check:
    """Rewards 1 + one float32 ulp on every other reply, as float32, against rewards 0/1 of the same pattern."""
    batch = base_batch()
    ulp = float(torch.finfo(torch.float32).eps)
    near = (1.0 + ulp * batch["rewards"]).float()
    unit = gradient(loss_fn, batch | {"rewards": batch["rewards"].float()})
    residue = gradient(loss_fn, batch | {"rewards": near})
    name = "near-equal rewards in float32 (the std's residue)"
    if not torch.isfinite(residue).all():
        return Check(name, "fail", None, "NaN or inf in d loss / d logp")
    ratio = float(residue.norm()) / max(float(unit.norm()), 1e-300)
    detail = f"|g| of rewards one float32 ulp apart is {ratio:.3g} x |g| of rewards 0/1"
    if ratio >= RESIDUE_WARNING:
        return Check(name, "warn", ratio, detail + ": the group std's roundoff residue becomes a full-size advantage")
    return Check(name, "pass", ratio, detail)


def numerics_checks(config: FrameworkConfig) -> list[Check]:
    """Every EDGES check and the residue check, on the framework's own loss."""
    loss_fn = framework_loss(config)
    documented, _ = documented_preset(config)
    tolerance = MATCH_TOLERANCE[config.framework]
    checks = []
    for name, (make, mismatch) in EDGES.items():
        if name.startswith("k3") and not config.beta:
            checks.append(Check(name, "pass", None, "no KL term in the loss (its coefficient is 0)"))
            continue
        checks.append(edge_check(name, loss_fn, documented, make(), tolerance, mismatch))
    checks.append(residue_check(loss_fn))
    return checks

