"""Async training on one machine: a sampler that runs K updates behind the trained policy.

In an asynchronous trainer the rollouts of step i come from the parameters of step i - K (the sampler
has not yet received the latest K updates). :class:`StaleSampler` reproduces that exactly: a copy of the
policy, and a bounded queue of the trained parameters at the start of the last K + 1 steps; before each
step's sampling it records the current parameters and loads the oldest into the copy. The trained policy
is the current one; the loss compares it to its own log-probs before the update (pi_old), and a correction
weighs pi_old against the sampler's (rollout_logp).
"""

from __future__ import annotations

import copy
from collections import deque

import torch

from pglab.models.policy import TokenPolicy


def trained_parameters(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of every trained parameter of ``module`` by name (with LoRA: the adapter's)."""
    return {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad}


class StaleSampler:
    """A copy of a TokenPolicy whose parameters are those the trained policy had ``staleness`` steps earlier."""

    def __init__(self, policy: TokenPolicy, staleness: int):
        if staleness < 1:
            raise ValueError(f"a stale sampler runs at least 1 step behind, got staleness {staleness}")
        self.policy = copy.deepcopy(policy)
        self.policy.module.requires_grad_(False)
        self.snapshots: deque[dict[str, torch.Tensor]] = deque(maxlen=staleness + 1)

    def advance(self, trained: torch.nn.Module) -> TokenPolicy:
        """Record ``trained``'s parameters (the start of this step) and return the copy at those of K steps ago
        (of step 0 while fewer than K steps have passed)."""
        self.snapshots.append(trained_parameters(trained))
        self.policy.module.load_state_dict(self.snapshots[0], strict=False)
        return self.policy

    def state(self) -> list[dict[str, torch.Tensor]]:
        """The queue of snapshots, oldest first (what a checkpoint holds for an exact resume)."""
        return list(self.snapshots)

    def restore(self, snapshots: list[dict[str, torch.Tensor]]) -> None:
        self.snapshots.clear()
        self.snapshots.extend(snapshots)


__all__ = ["StaleSampler", "trained_parameters"]
