"""The one policy-gradient update of every token trainer (TinyAgent in BugFixEnv, any causal LM on replies).

One call: score the batch's tokens under the policy, form per-token advantages (the baseline on
each reply's score; per-token rewards, the KL penalty among them, added as reward-to-go), build
the surrogate loss with the chosen aggregation, and take one guarded optimizer step.

Under DistributedDataParallel every rank holds whole groups; the scores of all ranks are gathered
so that baselines and metrics see the whole batch, and the loss is normalised by global counts,
so one step over N ranks equals one single-process step on the union of their rows.
"""

from __future__ import annotations

import contextlib

import torch

from pglab.batch import TokenBatch
from pglab.estimators import aggregate_loss, kl_estimate
from pglab.estimators.advantages import advantages, check_groups, per_token, zero_advantage_share
from pglab.estimators.losses import MODES
from pglab.models.policy import TokenPolicy
from pglab.runtime.distributed import gather_rows, world
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


def surrogate(logp: torch.Tensor, adv: torch.Tensor, logp_old: torch.Tensor | None, epsilon: float,
              epsilon_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token loss [B, T] and where clipping acts [B, T] (bool).

    logp_old None: -A log pi (on-policy). Else PPO's clipped ratio r = pi / pi_old (as TRL's GRPO
    and the GRPO paper): -min(r A, clip(r, 1 - epsilon, 1 + epsilon_high) A); at r = 1 its
    gradient is exactly the on-policy one.
    """
    if logp_old is None:
        return -adv * logp, torch.zeros_like(logp, dtype=torch.bool)
    ratio = torch.exp(logp - logp_old)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)
    return -torch.minimum(ratio * adv, clipped * adv), (clipped * adv < ratio * adv)


def pg_update(policy: TokenPolicy, optimizer: torch.optim.Optimizer, batch: TokenBatch, *, advantage: str,
              group_size: int = 1, baseline: float = 0.0, beta: float = 0.0, kl_in: str = "reward",
              mode: str = "token_mean", norm_const: float | None = None, start: int = 1, scale: str = "group",
              unbiased: bool = False, eps: float = 1e-8, max_grad_norm: float | None = 1.0,
              chunk_tokens: int = CHUNK_TOKENS, micro_batches: int = 1, ratio: bool = False, epsilon: float = 0.2,
              epsilon_high: float | None = None) -> dict:
    """One guarded step on this process's rows of ``batch`` -> the step's metrics (over all ranks).

    The metrics hold ``loss`` (the surrogate stepped on) and ``score_loss`` (its part from the reply
    scores alone, as -A log pi).


    ``batch.rewards`` [B] are the scores the baseline acts on; ``batch.token_rewards`` [B, T], when
    set, are added as reward-to-go. ``beta`` prices the KL to the reference (``batch.ref_logp``):
    k1 per token in the reward (``kl_in="reward"``, llm-ch6 §6.12) or k3 in the loss (TRL's GRPO).
    ``advantage``, ``group_size``, ``baseline``, ``scale``, ``unbiased``, ``eps``: see
    :func:`pglab.estimators.advantages`. ``mode`` and ``norm_const`` (global, e.g. B x max reply
    tokens for ``constant``): see :func:`pglab.estimators.aggregate_loss`. ``start`` is the first
    position scored; ``chunk_tokens`` caps the positions per scoring pass (0: one pass for all rows).

    ``micro_batches``: the rows are scored and back-propagated in this many parts of whole groups,
    each normalised by the whole batch's counts, so the accumulated gradient is the one of a single
    pass. ``ratio``: the clipped-ratio surrogate (see :func:`surrogate`) against ``batch.logp_old``;
    when that is None it is set here to this pass's log-probs (ratio 1: the on-policy gradient), so
    later steps on the same batch reuse it. k1 rewards then use logp_old (the sampling policy).
    """
    check_update(batch, advantage, group_size, beta, kl_in, mode)
    rank, size = world()
    rows = batch.batch_size
    groups = rows // group_size
    if micro_batches < 1 or groups % micro_batches:
        raise ValueError(f"micro_batches must divide the {groups} groups of this process, got {micro_batches}")
    dtype = next(policy.module.parameters()).dtype          # the scores' precision is the policy's
    mask_all = batch.action_mask.to(torch.float64)
    scores = batch.rewards.to(dtype)
    all_scores = gather_rows(scores)
    reply_adv = advantages(all_scores, advantage, group_size, baseline=baseline, scale=scale, unbiased=unbiased,
                           eps=eps)[rank * rows:(rank + 1) * rows]
    weight = 1.0
    if mode == "constant":
        if norm_const is None:
            raise ValueError("mode 'constant' needs norm_const, e.g. batch size x longest reply")
        norm_const = norm_const / size
    elif mode == "token_mean" and (size > 1 or micro_batches > 1):
        mode, norm_const = "constant", float(gather_rows(mask_all.sum()[None]).sum()) / size
    part_rows = rows // micro_batches
    logp_parts, loss_total, score_total, clip_count = [], 0.0, 0.0, 0.0
    for part in range(micro_batches):
        index = slice(part * part_rows, (part + 1) * part_rows)
        sub = batch if micro_batches == 1 else batch.select(index)
        if mode in ("seq_mean_token_sum", "seq_mean_token_mean"):
            weight = part_rows / rows
        logp = sequence_log_probs(policy, sub, start=start, group_size=group_size,
                                  chunk_tokens=chunk_tokens or part_rows * batch.ids.shape[1])
        logp = torch.where(sub.action_mask.bool(), logp, 0.0)
        mask = sub.action_mask.to(logp.dtype)
        old = None
        if ratio:
            old = logp.detach() if batch.logp_old is None else sub.logp_old.to(logp.dtype)
        ref_logp = sub.ref_logp.to(logp.dtype) if sub.ref_logp is not None else logp.detach()
        token_rewards = sub.token_rewards.to(logp.dtype) if sub.token_rewards is not None else None
        if beta > 0 and kl_in == "reward":
            kl_rewards = -beta * kl_estimate(logp.detach() if old is None else old, ref_logp, "k1") * mask
            token_rewards = kl_rewards if token_rewards is None else token_rewards + kl_rewards
        adv = per_token(reply_adv[index].to(logp.dtype), mask, token_rewards=token_rewards)
        high = epsilon if epsilon_high is None else epsilon_high
        per_tok, clipped = surrogate(logp, adv.detach(), old, epsilon, high)
        loss = aggregate_loss(per_tok, mask, mode, norm_const)
        # The part of the loss the reply scores make (the book's loss column): per-token rewards such as a format
        # penalty or the KL carry no baseline, so they shift the total's sign.
        score_part = loss if token_rewards is None else aggregate_loss(
            -per_token(reply_adv[index].to(logp.dtype), mask) * logp.detach(), mask, mode, norm_const)
        score_total += float(score_part.detach()) * weight
        if beta > 0 and kl_in == "loss":
            loss = loss + beta * aggregate_loss(kl_estimate(logp, ref_logp, "k3"), mask, mode, norm_const)
        loss = loss * weight
        last = part == micro_batches - 1
        if last:
            step = policy_gradient_step(policy.module, optimizer, loss, max_grad_norm=max_grad_norm,
                                        zero_grad=micro_batches == 1)
        else:
            if part == 0:
                optimizer.zero_grad(set_to_none=False)
            with no_sync(policy.module):
                loss.backward()
        loss_total += float(loss.detach())
        clip_count += float((clipped & mask.bool()).sum())
        logp_parts.append(logp.detach())
    logp = torch.cat(logp_parts) if micro_batches > 1 else logp_parts[0]
    if ratio and batch.logp_old is None:
        batch.logp_old = logp
    ref_logp = batch.ref_logp.to(logp.dtype) if batch.ref_logp is not None else logp
    k1 = ((logp - ref_logp) * mask_all.to(logp.dtype)).sum(-1)
    gathered = gather_rows(torch.stack([k1, mask_all.sum(-1).to(logp.dtype)], -1))
    totals = gather_rows(torch.tensor([[loss_total, clip_count, score_total]], dtype=torch.float64,
                                      device=logp.device))
    metrics = {"reward": float(all_scores.mean()),
               "reward_std": float(all_scores.std()) if len(all_scores) > 1 else 0.0,
               "kl_k1": float(gathered[:, 0].mean()), "policy_tokens": float(gathered[:, 1].mean()),
               "zero_adv_groups": zero_advantage_share(gather_rows(reply_adv), group_size),
               "loss": float(totals[:, 0].mean()), "score_loss": float(totals[:, 2].mean()),
               "grad_norm": step["grad_norm"], "skipped": step["skipped"]}
    if ratio:
        metrics["clip_ratio"] = float(totals[:, 1].sum() / gathered[:, 1].sum().clamp(min=1))
    return metrics


def no_sync(module: torch.nn.Module):
    """DDP's no_sync (skip the gradient all-reduce of a micro-batch that is not the last), else a no-op."""
    return module.no_sync() if hasattr(module, "no_sync") else contextlib.nullcontext()


__all__ = ["KL_IN", "check_update", "no_sync", "pg_update", "surrogate"]
