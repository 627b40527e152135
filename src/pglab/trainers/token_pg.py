"""The one policy-gradient update of every token trainer (TinyAgent in BugFixEnv, any causal LM on replies).

One call: score the batch's tokens under the policy, form per-token advantages (the baseline on
each reply's score; per-token rewards, the KL penalty among them, added as reward-to-go), build
the surrogate loss with the chosen aggregation, and take one guarded optimizer step.

Under DistributedDataParallel every rank holds whole groups; the scores of all ranks are gathered
so that baselines and metrics see the whole batch, and the loss is normalised by global counts,
so one step over N ranks equals one single-process step on the union of their rows.
"""

from __future__ import annotations

import torch

from pglab.batch import TokenBatch
from pglab.distributed import gather_rows, world
from pglab.estimators import aggregate_loss, kl_estimate, reinforce_loss
from pglab.estimators.advantages import advantages, check_groups, per_token, zero_advantage_share
from pglab.estimators.losses import MODES
from pglab.models.policy import TokenPolicy
from pglab.sampling.scoring import CHUNK_TOKENS, sequence_log_probs
from pglab.trainers.step import policy_gradient_step

KL_IN = ("reward", "loss")


def check_update(batch: TokenBatch, advantage: str, group_size: int, beta: float, kl_in: str, mode: str) -> None:
    """Raise ValueError naming the fix when ``batch`` and the settings cannot make an update."""
    check_groups(advantage, batch.batch_size, group_size)
    if kl_in not in KL_IN or mode not in MODES:
        raise ValueError(f"pass kl_in one of {', '.join(KL_IN)} and mode one of {', '.join(MODES)}")
    if batch.rewards is None:
        raise ValueError("pg_update needs batch.rewards [B], one score per reply or episode")
    groups = batch.group.reshape(-1, group_size)
    if not bool((groups == groups[:, :1]).all()):
        raise ValueError(f"rows must come in whole, contiguous groups of {group_size}: sample group_size replies "
                         "per prompt (task) on the same process, one after the other")
    if beta > 0 and batch.ref_logp is None:
        raise ValueError("beta > 0 needs batch.ref_logp (the reference model's log-probs of the batch)")


def pg_update(policy: TokenPolicy, optimizer: torch.optim.Optimizer, batch: TokenBatch, *, advantage: str,
              group_size: int = 1, baseline: float = 0.0, beta: float = 0.0, kl_in: str = "reward",
              mode: str = "token_mean", norm_const: float | None = None, start: int = 1, scale: str = "group",
              unbiased: bool = False, eps: float = 1e-8, max_grad_norm: float | None = 1.0,
              chunk_tokens: int = CHUNK_TOKENS) -> dict:
    """One guarded step on this process's rows of ``batch`` -> the step's metrics (over all ranks).

    The metrics hold ``loss`` (the surrogate stepped on) and ``score_loss`` (its part from the reply scores alone).

    ``batch.rewards`` [B] are the scores the baseline acts on; ``batch.token_rewards`` [B, T], when
    set, are added as reward-to-go. ``beta`` prices the KL to the reference (``batch.ref_logp``):
    k1 per token in the reward (``kl_in="reward"``, llm-ch6 §6.12) or k3 in the loss (TRL's GRPO).
    ``advantage``, ``group_size``, ``baseline``, ``scale``, ``unbiased``, ``eps``: see
    :func:`pglab.estimators.advantages`. ``mode`` and ``norm_const`` (global, e.g. B x max reply
    tokens for ``constant``): see :func:`pglab.estimators.aggregate_loss`. ``start`` is the first
    position scored; ``chunk_tokens`` caps the positions per scoring pass (0: one pass for all rows).
    """
    check_update(batch, advantage, group_size, beta, kl_in, mode)
    rank, size = world()
    rows = batch.batch_size
    logp = sequence_log_probs(policy, batch, start=start, group_size=group_size,
                              chunk_tokens=chunk_tokens or rows * batch.ids.shape[1])
    logp = torch.where(batch.action_mask.bool(), logp, 0.0)
    mask = batch.action_mask.to(logp.dtype)
    ref_logp = batch.ref_logp.to(logp.dtype) if batch.ref_logp is not None else logp.detach()
    scores = batch.rewards.to(logp.dtype)
    token_rewards = batch.token_rewards.to(logp.dtype) if batch.token_rewards is not None else None
    if beta > 0 and kl_in == "reward":
        kl_rewards = -beta * kl_estimate(logp.detach(), ref_logp, "k1") * mask
        token_rewards = kl_rewards if token_rewards is None else token_rewards + kl_rewards
    all_scores = gather_rows(scores)
    reply_adv = advantages(all_scores, advantage, group_size, baseline=baseline, scale=scale, unbiased=unbiased,
                           eps=eps)
    local_adv = reply_adv[rank * rows:(rank + 1) * rows]
    adv = per_token(local_adv, mask, token_rewards=token_rewards)

    if mode == "constant":
        if norm_const is None:
            raise ValueError("mode 'constant' needs norm_const, e.g. batch size x longest reply")
        norm_const = norm_const / size
    elif mode == "token_mean" and size > 1:
        mode, norm_const = "constant", float(gather_rows(mask.sum()[None]).sum()) / size
    loss = reinforce_loss(logp, adv, mask, mode, norm_const)
    # The part of the loss the reply scores make (the book's loss column): per-token rewards such as a format
    # penalty or the KL carry no baseline, so they shift the total's sign.
    score_loss = loss if token_rewards is None else reinforce_loss(logp.detach(), per_token(local_adv, mask), mask,
                                                                  mode, norm_const)
    if beta > 0 and kl_in == "loss":
        loss = loss + beta * aggregate_loss(kl_estimate(logp, ref_logp, "k3"), mask, mode, norm_const)
    step = policy_gradient_step(policy.module, optimizer, loss, max_grad_norm=max_grad_norm)

    k1 = ((logp.detach() - ref_logp) * mask).sum(-1)
    gathered = gather_rows(torch.stack([k1, mask.sum(-1)], -1).detach())
    losses = gather_rows(torch.tensor([[step["loss"], float(score_loss)]], dtype=torch.float64, device=logp.device))
    return {"reward": float(all_scores.mean()), "reward_std": float(all_scores.std()) if len(all_scores) > 1 else 0.0,
            "kl_k1": float(gathered[:, 0].mean()), "policy_tokens": float(gathered[:, 1].mean()),
            "zero_adv_groups": zero_advantage_share(reply_adv, group_size), "loss": float(losses[:, 0].mean()),
            "score_loss": float(losses[:, 1].mean()),
            "grad_norm": step["grad_norm"], "skipped": step["skipped"]}


__all__ = ["KL_IN", "check_update", "pg_update"]
