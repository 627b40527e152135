"""The one policy-gradient update of every token trainer (TinyAgent in BugFixEnv, any causal LM on replies).

Three pieces. :class:`UpdateSpec` holds the settings that do not change from step to step and checks
them once. :func:`pg_loss` is the loss alone: log-probabilities in, surrogate loss out, no model, no
optimizer, no side effect. :func:`pg_update` is the step: score the batch's tokens under the policy,
form each reply's advantage (the baseline on the reply's score), take ``pg_loss`` per micro-batch and
one guarded optimizer step.

Under DistributedDataParallel every rank holds whole groups; the scores of all ranks are gathered
so that baselines and metrics see the whole batch, and the loss is normalised by global counts,
so one step over N ranks equals one single-process step on the union of their rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import torch

from pglab.batch import TokenBatch
from pglab.estimators import aggregate_loss, kl_estimate
from pglab.estimators._validate import check_mode
from pglab.estimators.advantages import SCALES, advantages, check_groups, per_token, zero_advantage_share
from pglab.estimators.losses import MODES
from pglab.models.policy import TokenPolicy
from pglab.runtime.distributed import gather_rows, world
from pglab.sampling.scoring import CHUNK_TOKENS, sequence_log_probs
from pglab.trainers.step import policy_gradient_step

KL_IN = ("reward", "loss")
SEQ_MEAN = ("seq_mean_token_sum", "seq_mean_token_mean")
"""Aggregations that average over replies: a micro-batch's loss is weighted by its share of the rows."""


@dataclass(frozen=True)
class UpdateSpec:
    """Every setting of one policy-gradient update that stays the same from step to step."""

    advantage: str
    """reinforce (score - baseline) | rloo (leave-one-out) | grpo (group-normalised) | dr_grpo (centred only)."""
    group_size: int = 1
    """Replies (episodes) per prompt (task), in consecutive rows; at least 2 for every advantage but reinforce."""
    scale: str = "group"
    """grpo's divisor: the std of the group, of the batch, or none."""
    unbiased: bool = False
    """grpo: the sample std (TRL) instead of the population std (the book)."""
    eps: float = 1e-8
    """grpo: added to the std before dividing."""
    beta: float = 0.0
    """Price of the KL to the reference (the batch's ref_logp); 0 leaves it out."""
    kl_in: str = "reward"
    """Where the KL goes: k1 per token in the reward (llm-ch6 §6.12) or k3 in the loss (TRL's GRPO)."""
    mode: str = "token_mean"
    """How per-token losses become one number (see :func:`pglab.estimators.aggregate_loss`)."""
    norm_const: float | None = None
    """mode constant: the divisor over the whole batch, all ranks together (e.g. B x longest reply)."""
    ratio: bool = False
    """PPO's clipped ratio pi / pi_old against the batch's logp_old (see :func:`surrogate`)."""
    epsilon: float = 0.2
    """Lower clipping range of the ratio: 1 - epsilon."""
    epsilon_high: float | None = None
    """Upper clipping range of the ratio: 1 + epsilon_high (None: epsilon)."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this (None: no clipping)."""
    micro_batches: int = 1
    """Score and back-propagate the rows in this many parts of whole groups; the gradient is that of one pass."""
    chunk_tokens: int = CHUNK_TOKENS
    """Most positions per scoring pass (0: one pass per micro-batch)."""

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {self.group_size}")
        check_groups(self.advantage, self.group_size, self.group_size)    # one whole group: checks kind and size
        check_mode(self.scale, SCALES, "scale")
        if self.kl_in not in KL_IN or self.mode not in MODES:
            raise ValueError(f"pass kl_in one of {', '.join(KL_IN)} and mode one of {', '.join(MODES)}")
        if self.mode == "constant" and (self.norm_const is None or not self.norm_const > 0):
            raise ValueError("mode 'constant' needs a positive norm_const, e.g. batch size x longest reply")
        if self.micro_batches < 1:
            raise ValueError(f"micro_batches must be at least 1, got {self.micro_batches}")

    @property
    def clip_high(self) -> float:
        """The upper clipping range: epsilon_high, or epsilon when that is None."""
        return self.epsilon if self.epsilon_high is None else self.epsilon_high


def check_batch(batch: TokenBatch, spec: UpdateSpec) -> None:
    """Raise ValueError naming the fix when ``batch`` cannot make an update under ``spec``."""
    check_groups(spec.advantage, batch.batch_size, spec.group_size)
    if batch.rewards is None:
        raise ValueError("pg_update needs batch.rewards [B], one score per reply or episode")
    groups = batch.group.reshape(-1, spec.group_size)
    if not bool((groups == groups[:, :1]).all()):
        raise ValueError(f"rows must come in whole, contiguous groups of {spec.group_size}: sample group_size "
                         "replies per prompt (task) on the same process, one after the other")
    if spec.beta > 0 and batch.ref_logp is None:
        raise ValueError("beta > 0 needs batch.ref_logp (the reference model's log-probs of the batch)")
    if len(groups) % spec.micro_batches:
        raise ValueError(f"micro_batches must divide the {len(groups)} groups of this process, "
                         f"got {spec.micro_batches}")


def reply_advantages(scores: torch.Tensor, spec: UpdateSpec, baseline: float = 0.0) -> torch.Tensor:
    """Each reply's advantage from the scores of the whole batch; scores [B] -> [B]."""
    return advantages(scores, spec.advantage, spec.group_size, baseline=baseline, scale=spec.scale,
                      unbiased=spec.unbiased, eps=spec.eps)


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


def pg_loss(logp: torch.Tensor, rows: TokenBatch, reply_adv: torch.Tensor,
            spec: UpdateSpec) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The surrogate loss of one (micro-)batch; logp [B, T] (with grad, 0 off the policy positions), reply_adv [B].

    -> (loss, parts): loss a scalar whose gradient is the policy gradient estimate; parts holds
    ``score_loss`` (scalar, detached) and ``clip_count`` (scalar: policy tokens where the clip acts).

    Of ``rows`` it reads action_mask [B, T], ref_logp [B, T], logp_old [B, T] and token_rewards [B, T]
    (rewards [B] were turned into ``reply_adv`` by the caller, e.g. :func:`reply_advantages`).

    The pieces, as Spinning Up would say them:

    - The advantage of token t is the reply's advantage A_b (how much better the reply scored than
      its baseline) plus the reward-to-go of per-token rewards (a format penalty; with
      ``kl_in="reward"``, the KL penalty -beta k1_t = -beta (log pi - log pi_ref)). It is a number,
      not a function of the parameters: no gradient flows through it.
    - The surrogate -A_t log pi(a_t | s_t) has no meaning as a value; its gradient is the policy
      gradient estimate. With ``spec.ratio`` it is PPO's clipped -min(r A, clip(r) A), where
      r = pi / pi_old and pi_old (``rows.logp_old``, or these log-probs detached when that is None)
      is the policy that sampled the batch.
    - ``spec.mode`` weighs the tokens into one number (mean over tokens, over replies, or a constant).
    - With ``kl_in="loss"``, beta times the k3 estimate of KL(pi || pi_ref) is added to the loss
      itself and differentiated (TRL's GRPO).
    - ``score_loss`` is the part the reply scores make, -A_b log pi aggregated alike: per-token rewards
      carry no baseline and can shift the total's sign, so this is the loss column the book shows.
    """
    mask = rows.action_mask.to(logp.dtype)
    old = None
    if spec.ratio:
        old = logp.detach() if rows.logp_old is None else rows.logp_old.to(logp.dtype).detach()
    ref_logp = rows.ref_logp.to(logp.dtype).detach() if rows.ref_logp is not None else logp.detach()
    token_rewards = rows.token_rewards.to(logp.dtype) if rows.token_rewards is not None else None
    if spec.beta > 0 and spec.kl_in == "reward":
        kl_rewards = -spec.beta * kl_estimate(logp.detach() if old is None else old, ref_logp, "k1") * mask
        token_rewards = kl_rewards if token_rewards is None else token_rewards + kl_rewards
    reply_adv = reply_adv.to(logp.dtype).detach()
    adv = per_token(reply_adv, mask, token_rewards=token_rewards)
    per_tok, clipped = surrogate(logp, adv.detach(), old, spec.epsilon, spec.clip_high)
    loss = aggregate_loss(per_tok, mask, spec.mode, spec.norm_const)
    score_loss = loss if token_rewards is None else aggregate_loss(
        -per_token(reply_adv, mask) * logp.detach(), mask, spec.mode, spec.norm_const)
    if spec.beta > 0 and spec.kl_in == "loss":
        loss = loss + spec.beta * aggregate_loss(kl_estimate(logp, ref_logp, "k3"), mask, spec.mode, spec.norm_const)
    return loss, {"score_loss": score_loss.detach(), "clip_count": (clipped & mask.bool()).sum()}


def global_spec(spec: UpdateSpec, action_mask: torch.Tensor, size: int) -> UpdateSpec:
    """``spec`` with the normaliser each rank's (micro-)batch divides by, so the summed gradients are one pass's.

    constant: norm_const per rank. token_mean over several ranks or micro-batches: constant over all
    ranks' policy tokens (action_mask [B, T] of this rank), since a mean per part would weigh parts unequally.
    """
    if spec.mode == "constant":
        return dataclasses.replace(spec, norm_const=spec.norm_const / size)
    if spec.mode == "token_mean" and (size > 1 or spec.micro_batches > 1):
        tokens = float(gather_rows(action_mask.to(torch.float64).sum()[None]).sum())
        return dataclasses.replace(spec, mode="constant", norm_const=tokens / size)
    return spec


def score(policy: TokenPolicy, rows: TokenBatch, spec: UpdateSpec, start: int, width: int) -> torch.Tensor:
    """log pi of ``rows``' tokens [B, T], 0 off the policy positions (with grad); ``width``: tokens of one pass."""
    logp = sequence_log_probs(policy, rows, start=start, group_size=spec.group_size,
                              chunk_tokens=spec.chunk_tokens or width)
    return torch.where(rows.action_mask.bool(), logp, 0.0)


def accumulate(policy: TokenPolicy, optimizer: torch.optim.Optimizer, batch: TokenBatch, reply_adv: torch.Tensor,
               spec: UpdateSpec, start: int) -> tuple[torch.Tensor, dict, list[float]]:
    """pg_loss per micro-batch, back-propagated, then one guarded step; reply_adv [B] of this rank's rows.

    -> (logp [B, T] detached, the step's result, [loss, clip count, score loss] summed over micro-batches).
    """
    rows, parts = batch.batch_size, spec.micro_batches
    part_rows = rows // parts
    weight = part_rows / rows if spec.mode in SEQ_MEAN else 1.0
    logp_parts, totals = [], [0.0, 0.0, 0.0]
    for part in range(parts):
        index = slice(part * part_rows, (part + 1) * part_rows)
        sub = batch if parts == 1 else batch.select(index)
        logp = score(policy, sub, spec, start, part_rows * batch.ids.shape[1])
        loss, pieces = pg_loss(logp, sub, reply_adv[index], spec)
        loss = loss * weight
        if part == parts - 1:
            step = policy_gradient_step(policy.module, optimizer, loss, max_grad_norm=spec.max_grad_norm,
                                        zero_grad=parts == 1)
        else:
            if part == 0:
                optimizer.zero_grad(set_to_none=False)
            with no_sync(policy.module):
                loss.backward()
        totals[0] += float(loss.detach())
        totals[1] += float(pieces["clip_count"])
        totals[2] += float(pieces["score_loss"]) * weight
        logp_parts.append(logp.detach())
    return (torch.cat(logp_parts) if parts > 1 else logp_parts[0]), step, totals


def pg_update(policy: TokenPolicy, optimizer: torch.optim.Optimizer, batch: TokenBatch, spec: UpdateSpec, *,
              baseline: float = 0.0, start: int = 1) -> dict:
    """One guarded step on this process's rows of ``batch`` -> the step's metrics (over all ranks).

    The metrics hold ``loss`` (the surrogate stepped on), ``score_loss`` (its part from the reply
    scores alone, as -A log pi), reward, reward_std, kl_k1, policy_tokens, entropy (the mean -log pi of
    the policy tokens: an estimate of the entropy per token), zero_adv_groups, grad_norm, skipped and,
    with ``spec.ratio``, clip_ratio.

    ``batch.rewards`` [B] are the scores the baseline acts on (``baseline``: reinforce's, e.g. an
    EMA of past rewards); ``start`` is the first position scored. Micro-batches are normalised by the
    whole batch's counts, so the accumulated gradient is the one of a single pass. With
    ``spec.ratio`` and no ``batch.logp_old``, it is set here to this pass's log-probs (ratio 1: the
    on-policy gradient), so later steps on the same batch reuse it.
    """
    check_batch(batch, spec)
    rank, size = world()
    rows = batch.batch_size
    dtype = next(policy.module.parameters()).dtype          # the scores' precision is the policy's
    all_scores = gather_rows(batch.rewards.to(dtype))
    reply_adv = reply_advantages(all_scores, spec, baseline)[rank * rows:(rank + 1) * rows]
    logp, step, totals = accumulate(policy, optimizer, batch, reply_adv, global_spec(spec, batch.action_mask, size),
                                    start)
    if spec.ratio and batch.logp_old is None:
        batch.logp_old = logp
    mask = batch.action_mask.to(torch.float64).to(logp.dtype)
    ref_logp = batch.ref_logp.to(logp.dtype) if batch.ref_logp is not None else logp
    k1 = ((logp - ref_logp) * mask).sum(-1)
    surprisal = -(logp * mask).sum(-1)          # its mean per token estimates the policy's entropy per token
    gathered = gather_rows(torch.stack([k1, batch.action_mask.to(torch.float64).sum(-1).to(logp.dtype), surprisal],
                                       -1))
    summed = gather_rows(torch.tensor([totals], dtype=torch.float64, device=logp.device))
    metrics = {"reward": float(all_scores.mean()),
               "reward_std": float(all_scores.std()) if len(all_scores) > 1 else 0.0,
               "kl_k1": float(gathered[:, 0].mean()), "policy_tokens": float(gathered[:, 1].mean()),
               "entropy": float(gathered[:, 2].sum() / gathered[:, 1].sum().clamp(min=1)),
               "zero_adv_groups": zero_advantage_share(gather_rows(reply_adv), spec.group_size),
               "loss": float(summed[:, 0].mean()), "score_loss": float(summed[:, 2].mean()),
               "grad_norm": step["grad_norm"], "skipped": step["skipped"]}
    if spec.ratio:
        metrics["clip_ratio"] = float(summed[:, 1].sum() / gathered[:, 1].sum().clamp(min=1))
    return metrics


def no_sync(module: torch.nn.Module):
    """DDP's no_sync (skip the gradient all-reduce of a micro-batch that is not the last), else a no-op."""
    return module.no_sync() if hasattr(module, "no_sync") else contextlib.nullcontext()


__all__ = ["KL_IN", "UpdateSpec", "check_batch", "no_sync", "pg_loss", "pg_update", "reply_advantages", "score",
           "surrogate"]
