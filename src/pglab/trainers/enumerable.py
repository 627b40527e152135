"""Training the enumerable policy: sampled batches through any audit-signature loss, or the exact expected update.

``train_sampled`` draws ``group_size`` replies per prompt each step and steps Adam on
loss_fn(logp, ref_logp, rewards, mask, group); ``ascend_objective`` follows the exact gradient of
one of the policy's objectives (with its held-fixed parts recomputed every step), which finds the
point an estimator that follows that objective converges to.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from pglab.envs.enumerable import EnumerablePolicy
from pglab.runtime.progress import track
from pglab.runtime.threads import single_torch_thread
from pglab.trainers.step import policy_gradient_step


def _adam(policy: EnumerablePolicy, lr: float, steps: int):
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / steps)


def train_sampled(policy: EnumerablePolicy, loss_fn: Callable, *, steps: int, group_size: int, lr: float,
                  seed: int, every: int, measure: Callable[[EnumerablePolicy], float],
                  progress: bool = False) -> list[tuple[int, float]]:
    """Train ``policy`` in place with Adam (step size decaying linearly to 0) on sampled batches.

    Returns (step, measure(policy)) at step 0, every ``every`` steps and at the end.
    """
    optimizer, schedule = _adam(policy, lr, steps)
    generator = torch.Generator().manual_seed(seed)
    p, length = policy.prompts, policy.length
    x = torch.arange(p)[:, None].expand(p, group_size)
    group = torch.arange(p).repeat_interleave(group_size)
    curve = [(0, measure(policy))]
    steps_shown = track(range(steps), "training the enumerable policy", total=steps) if progress else range(steps)
    with single_torch_thread():
        for step in steps_shown:
            idx = policy.sample(group_size, generator)
            logp, ref = policy.token_logp()
            loss = loss_fn(logp[x, idx].reshape(-1, length), ref[x, idx].reshape(-1, length),
                           policy.rewards[x, idx].reshape(-1), policy.mask[idx.reshape(-1)], group)
            policy_gradient_step(policy.net, optimizer, loss, max_grad_norm=None)
            schedule.step()
            if (step + 1) % every == 0 or step + 1 == steps:
                curve.append((step + 1, measure(policy)))
    return curve


def ascend_objective(policy: EnumerablePolicy, kind: str, beta: float, *, steps: int, lr: float) -> EnumerablePolicy:
    """A copy of ``policy`` moved by ``steps`` Adam steps along the exact gradient of objective ``kind``."""
    policy = policy.copy()
    optimizer, schedule = _adam(policy, lr, steps)
    with single_torch_thread():
        for _ in range(steps):
            policy_gradient_step(policy.net, optimizer, -policy.objective(kind, beta), max_grad_norm=None,
                                 skip_zero_grad=False)
            schedule.step()
    return policy
