"""REINFORCE on tabular softmax policies: step weights, the surrogate loss, its ascent direction, and updates.

A batch of episodes (``pglab.envs.tabular.Episodes``) is flattened to N steps. Each variant
weights a step's score differently (the episode's return, the reward-to-go, centred, normalised,
or minus a state value); the loss is pglab's ``reinforce_loss`` on the padded [episodes, T] view.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from pglab.envs.tabular import Episodes, frozen_lake
from pglab.estimators import normalize, reinforce_loss

NORMALIZE_EPS = 1e-8
"""The eps of ``pglab.estimators.normalize``, which the per-group normalisation shares."""
VARIANTS = ("return", "reward-to-go", "centred", "normalised", "learned baseline")
"""The race's weightings; 'exact baseline' (reward-to-go minus the exact V) is also accepted by step_weights."""


@dataclass(frozen=True)
class RaceJob:
    """One run of a race, as run_seeds hands it to a worker: a weighting and an RNG seed."""

    variant: str
    seed: int


def step_weights(batch: Episodes, variant: str, gamma: float, values: torch.Tensor | None = None,
                 groups: torch.Tensor | None = None) -> torch.Tensor:
    """What multiplies each step's score under a variant; batch of N steps -> weights [N].

    ``values [S]`` is the state baseline of 'learned baseline' and 'exact baseline'. ``groups [N]``
    (long, default: one group) splits the steps into independent batches: 'centred' and
    'normalised' then use each batch's own mean and (population) sd.
    """
    rewards_to_go = batch.reward_to_go(gamma)
    if variant == "return":
        return batch.episode_returns(gamma)[batch.episode]
    if variant == "reward-to-go":
        return rewards_to_go
    if variant in ("centred", "normalised"):
        if groups is None:
            return rewards_to_go - rewards_to_go.mean() if variant == "centred" else normalize(rewards_to_go)
        mean, sd = group_moments(rewards_to_go, groups)
        return rewards_to_go - mean if variant == "centred" else (rewards_to_go - mean) / (sd + NORMALIZE_EPS)
    if variant in ("learned baseline", "exact baseline"):
        if values is None:
            raise ValueError(f"variant {variant!r} needs the state values [S] to subtract")
        return rewards_to_go - values[batch.states]
    raise ValueError(f"unknown variant {variant!r}; pass one of {', '.join(VARIANTS + ('exact baseline',))}")


def group_moments(x: torch.Tensor, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and population sd of x within each group, read back at every element; x, groups [N] -> two [N]."""
    count = torch.bincount(groups).to(x.dtype)
    mean = torch.zeros_like(count).index_add_(0, groups, x) / count.clamp(min=1)
    var = torch.zeros_like(count).index_add_(0, groups, (x - mean[groups]).pow(2)) / count.clamp(min=1)
    return mean[groups], var.sqrt()[groups]


def surrogate_loss(theta: torch.Tensor, batch: Episodes, weights: torch.Tensor, mode: str,
                   norm_const: float | None = None) -> torch.Tensor:
    """pglab's REINFORCE loss of a softmax table on a batch; theta [S, A], weights [N] -> scalar."""
    return reinforce_loss(batch.padded(batch.log_probs(theta)), batch.padded(weights), batch.mask, mode, norm_const)


def ascent_direction(theta: torch.Tensor, batch: Episodes, weights: torch.Tensor, mode: str,
                     norm_const: float | None = None) -> torch.Tensor:
    """Minus the gradient of the loss: the estimate of grad J it stands for; -> [S, A]."""
    theta = theta.detach().requires_grad_(True)
    return -torch.autograd.grad(surrogate_loss(theta, batch, weights, mode, norm_const), theta)[0]


def mean_entropy(theta: torch.Tensor) -> float:
    """Policy entropy in nats, averaged over every state (terminal ones included, as in the book)."""
    logp = torch.log_softmax(theta, -1)
    return float(-(logp.exp() * logp).sum(-1).mean())


@dataclass
class Update:
    """One policy update: the batch it used, the table after it and the size of the step."""

    batch: Episodes
    theta: torch.Tensor
    step: float


def reinforce_updates(seed: int, variant: str, updates: int, batch_episodes: int, gamma: float,
                      lr: float, alpha_v: float, optimizer: str = "sgd") -> Iterator[Update]:
    """REINFORCE on the calm lake from the uniform policy (theta = 0): one Update per policy step.

    The loss averages over all steps of the batch (pglab's token_mean). A value table V moves
    toward the reward-to-go at every visited state, in the order of the steps, in every variant.
    """
    mdp = frozen_lake(is_slippery=False, gamma=gamma)
    generator = torch.Generator().manual_seed(seed)
    theta = torch.zeros(mdp.n_states, mdp.n_actions, dtype=torch.float64, requires_grad=True)
    if optimizer == "sgd":
        opt = torch.optim.SGD([theta], lr=lr)
    elif optimizer == "adam":
        opt = torch.optim.Adam([theta], lr=lr)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}; pass sgd or adam")
    values = [0.0] * mdp.n_states
    for _ in range(updates):
        batch = mdp.sample(torch.softmax(theta.detach(), -1), batch_episodes, generator)
        before = theta.detach().clone()
        weights = step_weights(batch, variant, gamma, torch.tensor(values, dtype=torch.float64))
        opt.zero_grad()
        surrogate_loss(theta, batch, weights, "token_mean").backward()
        opt.step()
        order = torch.argsort(batch.episode * (int(batch.time.max()) + 1) + batch.time)  # episode by episode
        for s, g in zip(batch.states[order].tolist(), batch.reward_to_go(gamma)[order].tolist()):
            values[s] += alpha_v * (g - values[s])
        yield Update(batch, theta.detach().clone(), float((theta.detach() - before).norm()))


def race_run(job: RaceJob, updates: int, batch_episodes: int, alpha: float, alpha_v: float,
             gamma: float) -> Iterator[dict]:
    """One run of a race: REINFORCE with ``job.variant``'s weighting from seed ``job.seed``.

    Yields per update dict(success = batch success rate, step = |theta step|, entropy).
    """
    for update in reinforce_updates(job.seed, job.variant, updates, batch_episodes, gamma, alpha, alpha_v):
        yield {"success": float(update.batch.episode_returns(1.0).mean()), "step": update.step,
               "entropy": mean_entropy(update.theta)}


