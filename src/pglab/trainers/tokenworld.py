"""REINFORCE in the token world, many tabular policies at once: no baseline, leave-one-out, or GAE with a critic.

Each run is a table of logits [length, length + 1] (P(A) at position t after k A's). All runs
advance together: one [runs, episodes, length] sample per update, one SGD step for every run.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from pglab.envs.tokenworld import TokenWorld, at_states
from pglab.estimators import discounted_returns, gae, leave_one_out, reinforce_loss
from pglab.runtime.progress import track


def success_probability(world: TokenWorld, logits: torch.Tensor) -> torch.Tensor:
    """Exact P(success) of tabular policies, whatever the reward shift; logits [S, T, T + 1] -> [S]."""
    return replace(world, shift=0.0).exact_values(torch.sigmoid(logits.detach()))[:, 0, 0]


def train_tokenworld(world: TokenWorld, method: str, lam: float | None, *, runs: int, updates: int, episodes: int,
                     lr: float, critic_lr: float, init_p_a: float, generator: torch.Generator) -> torch.Tensor:
    """Train ``runs`` tabular policies at once -> exact success probability [updates + 1, runs].

    method: "no baseline" (reward-to-go), "leave-one-out" (within each run's ``episodes`` replies),
    or a GAE method with ``lam`` and its own tabular critic. The policy step sums over tokens and
    averages over replies; the critic descends 0.5 (V - lambda-return)^2 the same way.
    """
    if method not in ("no baseline", "leave-one-out") and lam is None:
        raise ValueError(f"method {method!r} needs a GAE lambda; pass lam, or method 'no baseline'/'leave-one-out'")
    gen = generator
    shape = (runs, world.length, world.length + 1)
    init = math.log(init_p_a / (1 - init_p_a))
    logits = torch.full(shape, init, dtype=torch.float64, requires_grad=True)
    critic = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.SGD([{"params": [logits], "lr": lr}, {"params": [critic], "lr": critic_lr}])
    mask = torch.ones(runs * episodes, world.length, dtype=torch.float64)
    curve = [success_probability(world, logits)]
    for _ in track(range(updates), f"{method}, shift {world.shift:g}", total=updates):
        tokens = world.sample(torch.sigmoid(logits.detach()), episodes, gen)   # [S, E, T]
        rewards = world.rewards(tokens)
        critic_loss = torch.zeros((), dtype=torch.float64)
        if lam is None:
            returns = discounted_returns(rewards)
            advantages = returns if method == "no baseline" else leave_one_out(returns, dim=-2)
        else:
            values = at_states(critic, world.states(tokens)[..., :-1])
            advantages, targets = gae(rewards, values.detach(), 1.0, lam)
            critic_loss = 0.5 * (values - targets).pow(2).sum() / episodes
        logp = world.log_probs(logits, tokens)
        loss = reinforce_loss(logp.flatten(0, 1), advantages.flatten(0, 1), mask, mode="constant",
                              norm_const=episodes)
        optimizer.zero_grad()
        (loss + critic_loss).backward()
        optimizer.step()
        curve.append(success_probability(world, logits))
    return torch.stack(curve)
