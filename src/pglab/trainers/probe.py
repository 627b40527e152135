"""Per-episode measurements on a probe batch: gradients over all parameters, per-call costs, owner masks.

The variance analyses of agents-ch6 §6.4-6.8 need each episode's own gradient estimate, so they
take one backward pass per episode over every parameter of the model.
"""

from __future__ import annotations

import torch

from pglab.batch import TokenBatch
from pglab.models.tinyagent import TinyAgent
from pglab.sampling.scoring import sequence_log_probs


def episode_gradients(model: TinyAgent, batch: TokenBatch, weights: torch.Tensor) -> torch.Tensor:
    """Flattened gradient of sum_t weights[b, t] * log pi(ids[b, t] | ids[b, :t]) for each episode -> [B, P].

    weights [B, T] (e.g. ``action_mask`` for the score, or reward-to-go times the mask).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    lengths = batch.attention_mask.sum(-1)
    rows = []
    for b in range(batch.batch_size):
        width = int(lengths[b])
        logp = sequence_log_probs(model, batch.ids[b: b + 1, :width])[0]
        grads = torch.autograd.grad((weights[b, :width] * logp).sum(), params)
        rows.append(torch.cat([g.flatten() for g in grads]))
    return torch.stack(rows)


def call_ends(action_mask: torch.Tensor) -> torch.Tensor:
    """1 at the last token of every call (a policy token followed by a non-policy one); mask [B, T] -> [B, T]."""
    following = torch.nn.functional.pad(action_mask[:, 1:], (0, 1))
    return action_mask * (1 - following)


def call_starts(action_mask: torch.Tensor) -> torch.Tensor:
    """1 at the first token of every call; mask [B, T] -> [B, T]."""
    preceding = torch.nn.functional.pad(action_mask[:, :-1], (1, 0))
    return action_mask * (1 - preceding)


def step_cost_rewards(batch: TokenBatch, cost: float) -> torch.Tensor:
    """Token rewards [B, T]: -cost at the last token of every call, plus the episode's reward at the final one."""
    ends = call_ends(batch.action_mask)
    rewards = -cost * ends
    last = (ends * torch.arange(ends.shape[1])).argmax(-1)                     # position of the final call's end
    rewards[torch.arange(batch.batch_size), last] += batch.rewards
    return rewards


__all__ = ["call_ends", "call_starts", "episode_gradients", "step_cost_rewards"]
