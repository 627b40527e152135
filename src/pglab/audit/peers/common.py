"""What every peer preset shares: the audit's groups, the sampled-token log-probs of the three policies.

A preset is ``loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None)``: the audit
passes ``rollout_logp`` (the behaviour's log-probs of the sampled tokens) and ``old_logp`` (the proximal
policy's, the behaviour's unless a proximal policy is given), both [B, T] and detached; called with five
arguments (on-policy) both are ``logp.detach()``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from pglab.estimators.advantages import advantages

LossFn = Callable[..., torch.Tensor]
"""loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None) -> scalar."""


def by_group(values: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """values [B] -> [G, K]: the rows must come group by group, K rows each (as the audit lays them out)."""
    counts = torch.bincount(group)
    k = int(counts[0])
    if (counts != k).any() or not torch.equal(group, torch.arange(len(counts)).repeat_interleave(k)):
        raise ValueError("group must list the rows group by group with the same count each, e.g. [0, 0, 1, 1]")
    return values.reshape(len(counts), k)


def group_advantages(rewards: torch.Tensor, group: torch.Tensor, kind: str, **options) -> torch.Tensor:
    """``pglab.estimators.advantages`` (kind reinforce | rloo | grpo | dr_grpo) over the audit's groups; [B] -> [B]."""
    k = by_group(rewards, group).shape[1]
    return advantages(rewards, kind, k, **options)


def sampled(logp: torch.Tensor, rollout_logp: torch.Tensor | None,
            old_logp: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(old, rollout) log-probs [B, T], detached: each defaults to the other, both to logp.detach() (on-policy)."""
    rollout = logp.detach() if rollout_logp is None and old_logp is None else rollout_logp
    rollout = old_logp if rollout is None else rollout
    old = rollout if old_logp is None else old_logp
    return old.detach().to(logp.dtype), rollout.detach().to(logp.dtype)


def last_token(mask: torch.Tensor) -> torch.Tensor:
    """[B, T] with 1 on each row's last policy token (where an outcome reward is placed)."""
    return mask * (mask.cumsum(-1) == mask.sum(-1, keepdim=True))
