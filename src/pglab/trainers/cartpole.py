"""REINFORCE on gymnasium's CartPole-v1 through its vector-env API, with three weightings of the score.

Weightings (course-ch7 exercise 7.10): ``"return"`` weighs every action of an episode by the whole
discounted return G_0; ``"reward_to_go"`` by G_t; ``"advantage"`` by G_t - V(s_t) with a small
learned value network. Every update collects one complete episode from each of the ``envs``
environments of a vector env (an environment that has finished waits, masked, for the others),
so every weighting sees the same number of episodes per update. The time limit is a truncation,
not a terminal state: where the critic exists, the cut episode bootstraps from V of the state it
was cut in, through ``gae``'s per-position ``truncated``/``next_values``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from pglab.estimators import discounted_returns, gae, reinforce_loss
from pglab.trainers.step import policy_gradient_step

WEIGHTINGS = ("return", "reward_to_go", "advantage")
"""G_0 (the whole return), G_t (reward-to-go), G_t - V(s_t) (a learned value baseline)."""
VECTOR_MODES = ("sync", "async")


@dataclass
class Episodes:
    """One update's batch, one episode per row; all [B, T] unless noted (T: the longest episode).

    obs [B, T, 4]; mask 1 on the episode's steps; dones 1 on a terminal last step; truncated 1 on a
    last step cut by the time limit, where final_obs [B, 4] holds the state it was cut in.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    mask: torch.Tensor
    dones: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor

    @property
    def lengths(self) -> torch.Tensor:
        """Steps per episode [B] (the undiscounted return: CartPole pays 1 per step)."""
        return self.mask.sum(1)


def mlp(sizes: list[int]) -> torch.nn.Sequential:
    """A tanh MLP with the given layer sizes (no activation after the last layer)."""
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def make_envs(envs: int, max_episode_steps: int, vector: str = "sync"):
    """A gymnasium vector env of ``envs`` CartPole-v1 copies (``vector``: sync or async)."""
    import gymnasium as gym

    if vector not in VECTOR_MODES:
        raise ValueError(f"unknown vector mode {vector!r}; pass one of {', '.join(VECTOR_MODES)}")
    factories = [lambda: gym.make("CartPole-v1", max_episode_steps=max_episode_steps) for _ in range(envs)]
    if vector == "async":
        return gym.vector.AsyncVectorEnv(factories, context="spawn")
    return gym.vector.SyncVectorEnv(factories)


def collect_episodes(envs, policy: torch.nn.Module, generator: torch.Generator, seed: int | None) -> Episodes:
    """Run ``policy`` until every environment of ``envs`` has finished one episode from a reset."""
    obs, _ = envs.reset(seed=seed)
    n = envs.num_envs
    active = np.ones(n, dtype=bool)
    final_obs = np.zeros_like(obs)
    steps: list[tuple] = []
    while active.any():
        x = torch.as_tensor(obs, dtype=torch.float32)
        with torch.no_grad():
            probs = torch.softmax(policy(x), -1)
        action = torch.multinomial(probs, 1, generator=generator)[:, 0]
        next_obs, reward, term, trunc, _ = envs.step(action.numpy())
        term, trunc = term & active, trunc & active & ~term
        final_obs[trunc] = next_obs[trunc]   # autoreset NEXT_STEP: the step that ends returns the final state
        steps.append((x, action, reward * active, active.copy(), term, trunc))
        active &= ~(term | trunc)
        obs = next_obs
    obs_t, act_t, rew_t, mask_t, term_t, trunc_t = zip(*steps)

    def stack(xs, dtype=torch.float32):
        return torch.as_tensor(np.stack(xs, 1), dtype=dtype)

    return Episodes(torch.stack(obs_t, 1), torch.stack(act_t, 1), stack(rew_t), stack(mask_t), stack(term_t),
                    stack(trunc_t), torch.as_tensor(final_obs, dtype=torch.float32))


def weights_and_targets(batch: Episodes, weighting: str, gamma: float,
                        value: torch.nn.Module | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weight of every action [B, T] and the critic's targets [B, T] (None without a critic)."""
    if weighting == "advantage":
        with torch.no_grad():
            values = value(batch.obs)[..., 0] * batch.mask
            next_values = batch.truncated * value(batch.final_obs)[:, None, 0]
        advantages, returns = gae(batch.rewards, values, gamma, 1.0, mask=batch.mask, dones=batch.dones,
                                  truncated=batch.truncated, next_values=next_values)
        return advantages, returns
    to_go = discounted_returns(batch.rewards, gamma, mask=batch.mask, dones=batch.dones)
    if weighting == "reward_to_go":
        return to_go, None
    return to_go[:, :1] * batch.mask, None


@dataclass(frozen=True)
class CartPoleSettings:
    """Everything of one CartPole run but its seed."""

    weighting: str
    """What weighs each action's score: return (G_0), reward_to_go (G_t) or advantage (G_t - V(s_t))."""
    updates: int
    """Policy updates (each on one episode from every environment)."""
    envs: int = 16
    """Environments in the vector env; one complete episode from each per update."""
    lr: float = 0.01
    """Adam step size of the policy (no clipping: the weightings differ only in their weights)."""
    value_lr: float = 0.01
    """Adam step size of the value network (the advantage weighting only)."""
    value_epochs: int = 10
    """Full-batch value steps per update, toward the bootstrapped returns."""
    hidden: int = 32
    """Width of the two hidden layers of the policy and value MLPs."""
    gamma: float = 0.99
    """Discount of the returns that weigh the scores."""
    max_episode_steps: int = 500
    """CartPole-v1's time limit (a truncation)."""
    vector: str = "sync"
    """gymnasium vector env: sync or async (one process per environment)."""

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"unknown weighting {self.weighting!r}; pass one of {', '.join(WEIGHTINGS)}")


def train_cartpole(seed: int, settings: CartPoleSettings) -> Iterator[dict]:
    """REINFORCE with one weighting; yields per update dict(mean_return, env_steps, seconds)."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    policy = mlp([4, settings.hidden, settings.hidden, 2])
    optimizer = torch.optim.Adam(policy.parameters(), lr=settings.lr)
    value = mlp([4, settings.hidden, settings.hidden, 1]) if settings.weighting == "advantage" else None
    value_opt = torch.optim.Adam(value.parameters(), lr=settings.value_lr) if value is not None else None
    vec = make_envs(settings.envs, settings.max_episode_steps, settings.vector)
    try:
        for update in range(settings.updates):
            start = time.perf_counter()
            batch = collect_episodes(vec, policy, generator, seed * 1_000_003 if update == 0 else None)
            weights, targets = weights_and_targets(batch, settings.weighting, settings.gamma, value)
            logp = torch.log_softmax(policy(batch.obs), -1).gather(-1, batch.actions[..., None])[..., 0]
            policy_gradient_step(policy, optimizer, reinforce_loss(logp, weights, batch.mask), max_grad_norm=None)
            if value is not None:
                for _ in range(settings.value_epochs):
                    error = (value(batch.obs)[..., 0] - targets) * batch.mask
                    policy_gradient_step(value, value_opt, error.pow(2).sum() / batch.mask.sum(), max_grad_norm=None)
            yield {"mean_return": float(batch.lengths.mean()), "env_steps": float(batch.mask.numel()),
                   "seconds": time.perf_counter() - start}
    finally:
        vec.close()
