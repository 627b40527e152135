"""The one policy-gradient update of every token trainer (TinyAgent in BugFixEnv, any causal LM on replies).

Three pieces. :class:`UpdateSpec` holds the settings that do not change from step to step and checks
them once. :func:`pg_loss` is the loss alone: log-probabilities in, surrogate loss out, no model, no
optimizer, no side effect; its surrogate is any loss of the zoo (``pglab.estimators``: PPO's clip, GSPO,
GMPO, CISPO, SAPO, DPPO), weighed by a correction of the sampler/trainer mismatch (truncated or masked IS).
:func:`pg_update` is the step: score the batch's tokens under the policy,
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
from pglab.estimators import (
    aggregate_loss,
    cispo,
    dppo,
    geometric_mask,
    gmpo,
    gspo,
    gspo_token,
    kl_estimate,
    masked_is,
    ppo_clip,
    sapo,
    truncated_is,
)
from pglab.estimators._tokens import token_average
from pglab.estimators._validate import check_mode
from pglab.estimators.advantages import SCALES, advantages, check_groups, per_token, zero_advantage_share
from pglab.estimators.losses import MODES
from pglab.estimators.policy_losses import Losses
from pglab.models.policy import TokenPolicy
from pglab.runtime.distributed import gather_rows, world
from pglab.runtime.options import SettingsError
from pglab.sampling.scoring import CHUNK_TOKENS, sequence_log_probs
from pglab.trainers.step import policy_gradient_step

KL_IN = ("reward", "loss")
SEQ_MEAN = ("seq_mean_token_sum", "seq_mean_token_mean")
"""Aggregations that average over replies: a micro-batch's loss is weighted by its share of the rows."""
ZOO = {"ppo": ppo_clip, "gspo": gspo, "gspo-token": gspo_token, "gmpo": gmpo, "cispo": cispo, "sapo": sapo,
       "dppo": dppo}
"""The surrogate losses of ``pglab.estimators`` by name (reinforce is -A log pi, or PPO's clip with ratio)."""
PLAIN = "reinforce"
"""The loss -A log pi (PPO's clip with ``ratio``); it shares its name with an advantage kind, so code compares
against this constant."""
LOSSES = (PLAIN, *ZOO)
TOKEN_CLIPS = ("ppo", "gspo-token", "gmpo", "cispo")
"""Losses whose clip fractions are shares of the policy tokens (logged together as clip_ratio)."""
SEQUENCE_LOSSES = ("gspo", "gmpo")
"""Losses that take one advantage per reply: the advantage at the reply's first policy token."""
CLIP_DEFAULTS = {"reinforce": (0.2, None), "ppo": (0.2, None), "gspo": (3e-4, 4e-4), "gspo-token": (3e-4, 4e-4),
                 "gmpo": (0.4, None), "cispo": (None, 0.28), "sapo": (None, None), "dppo": (0.2, None)}
"""Each loss's (epsilon, epsilon_high) when none is given; epsilon_high None: the same as epsilon. PPO's 0.2
(Schulman et al. 2017), GSPO's and GMPO's papers' ranges, CISPO with no lower bound and DAPO's 0.28 above (MiniMax-M1
tunes only the upper one), DPPO's divergence bound delta 0.2 (pglab's choice: the paper tunes it)."""
DIAGNOSTICS = ("clip_ratio", "clip_low_fraction", "clip_high_fraction", "dual_clip_fraction", "gate", "masked_fraction",
               "is_truncated_fraction", "is_masked_fraction", "is_weight_mean")
"""Every metric pg_update may add for a loss or a correction (those that apply to the spec)."""
IS_CORRECTIONS = ("none", "token-tis", "sequence-tis", "token-mask", "sequence-mask", "geo-mask")
"""Weights of the sampler/trainer mismatch rho = pi_old / mu (``pglab.estimators.corrections``)."""


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
    loss: str = "reinforce"
    """The surrogate: reinforce (-A log pi) | ppo | gspo | gspo-token | gmpo | cispo | sapo | dppo (see ZOO)."""
    ratio: bool = False
    """reinforce only: PPO's clipped ratio pi / pi_old instead of -A log pi (train-lm's num_iterations > 1)."""
    epsilon: float | None = None
    """Lower range: the ratio's clip at 1 - epsilon (GMPO: -epsilon in log space; DPPO: the divergence bound
    delta); None: the loss's default (CLIP_DEFAULTS)."""
    epsilon_high: float | None = None
    """Upper range: 1 + epsilon_high (DPPO: delta_high); None: the loss's default, else epsilon."""
    dual_clip: float | None = None
    """ppo only: cap a negative advantage's loss at -dual_clip A (a number > 1; None: no dual clip)."""
    is_correction: str = "none"
    """Weigh each token's loss by the mismatch rho = pi_old / mu of the sampler mu (the batch's rollout_logp): none |
    token-tis | sequence-tis (min(rho, is_cap)) | token-mask | sequence-mask | geo-mask (keep rho in [1 / is_cap,
    is_cap])."""
    is_cap: float = 2.0
    """The corrections' bound C >= 1: TIS's cap, and the masks' interval [1 / C, C] (geo-mask: of the reply's
    per-token geometric mean, so a C near 1, e.g. 1.01)."""
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
        check_zoo(self.loss, self.epsilon, self.epsilon_high, self.dual_clip, self.is_correction, self.is_cap)
        if self.ratio and self.loss != PLAIN:
            raise SettingsError(f"ratio is reinforce's clipped ratio; loss {self.loss} has its own: drop ratio")

    @property
    def clip_range(self) -> tuple[float | None, float | None]:
        """(epsilon, epsilon_high) with the loss's defaults filled in (CLIP_DEFAULTS)."""
        low, high = CLIP_DEFAULTS[self.loss]
        low = low if self.epsilon is None else self.epsilon
        return low, self.epsilon_high if self.epsilon_high is not None else low if high is None else high

    @property
    def uses_old(self) -> bool:
        """Whether the loss reads pi_old (the batch's logp_old, else the log-probs before this update)."""
        return self.loss != PLAIN or self.ratio or self.is_correction != "none"


def clipped_ratio(loss: str, num_iterations: int) -> bool:
    """UpdateSpec.ratio of a trainer that steps num_iterations times on each batch: reinforce takes PPO's clip
    against pi_old when it steps more than once (TRL's num_iterations); the other losses always have their own."""
    return loss == PLAIN and num_iterations > 1


def check_zoo(loss: str, epsilon: float | None, epsilon_high: float | None, dual_clip: float | None,
              is_correction: str, is_cap: float) -> None:
    """Raise SettingsError (a ValueError) naming the fix when the loss and correction settings do not go together."""
    for name, value, known in (("loss", loss, LOSSES), ("is_correction", is_correction, IS_CORRECTIONS)):
        if value not in known:
            raise SettingsError(f"unknown {name} {value!r}; pass one of {', '.join(known)}")
    for name, value in (("epsilon", epsilon), ("epsilon_high", epsilon_high)):
        if value is not None and not value >= 0:
            raise SettingsError(f"{name} must be a number >= 0 (or None: the loss's default), got {value!r}")
    if loss == "sapo" and (epsilon, epsilon_high) != (None, None):
        raise SettingsError("loss sapo has no clip range (a soft gate, tau_pos 1 and tau_neg 1.05): drop epsilon and "
                            "epsilon_high")
    if dual_clip is not None and (loss != "ppo" or not dual_clip > 1):
        raise SettingsError(f"dual_clip is ppo's cap of a negative advantage's loss, a number > 1; got loss {loss} and "
                            f"dual_clip {dual_clip!r}: pass loss ppo or drop dual_clip")
    if not is_cap >= 1:
        raise SettingsError(f"is_cap must be at least 1 (TIS's cap, the masks' [1 / is_cap, is_cap]), got {is_cap!r}")


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


def zoo_options(spec: UpdateSpec) -> dict[str, float | None]:
    """The keyword arguments of the loss's function in ZOO (reinforce's ratio: ppo_clip's, without dual clip)."""
    low, high = spec.clip_range
    if spec.loss == "sapo":
        return {}
    if spec.loss == "dppo":
        return {"delta": low, "delta_high": high}
    return {"epsilon": low, "epsilon_high": high, **({"dual_clip": spec.dual_clip} if spec.loss == "ppo" else {})}


def surrogate_loss(logp: torch.Tensor, old: torch.Tensor | None, adv: torch.Tensor, mask: torch.Tensor,
                   spec: UpdateSpec) -> Losses:
    """The per-token loss [B, T] of ``spec.loss`` and its diagnostics; logp, adv, mask [B, T], old [B, T] or None.

    reinforce: -A log pi, or with ``spec.ratio`` PPO's clip against old (its diagnostics become clip_count alone).
    gspo and gmpo take one advantage per reply: the one at its first policy token (the score's advantage plus
    the reward-to-go of every per-token reward of the reply).
    """
    if spec.loss == PLAIN and not spec.ratio:
        return -adv * logp, {}
    loss = "ppo" if spec.loss == PLAIN else spec.loss
    if loss in SEQUENCE_LOSSES:
        adv = adv.gather(1, mask.argmax(-1, keepdim=True))[:, 0]
    return ZOO[loss](logp, old, adv, mask, **zoo_options(spec))


def correction(old: torch.Tensor, rollout: torch.Tensor, mask: torch.Tensor, spec: UpdateSpec) -> Losses:
    """The weights [B, T] of ``spec.is_correction`` (detached, 0 off the policy tokens) and their diagnostics.

    old (pi_old), rollout (the sampler mu), mask [B, T]; the diagnostics are the correction's own, prefixed
    ``is_``, and is_weight_mean, the mean weight over the policy tokens.
    """
    level, _, kind = spec.is_correction.partition("-")
    bounds = {"low": 1 / spec.is_cap, "high": spec.is_cap}
    if kind == "tis":
        weights, found = truncated_is(old, rollout, mask, cap=spec.is_cap, level=level)
    elif level == "geo":
        weights, found = geometric_mask(old, rollout, mask, **bounds)
    else:
        weights, found = masked_is(old, rollout, mask, **bounds, level=level)
    return weights, {**{f"is_{k}": v for k, v in found.items()}, "is_weight_mean": token_average(weights, mask)}


def clip_count(diagnostics: dict[str, torch.Tensor], mask: torch.Tensor, spec: UpdateSpec) -> torch.Tensor:
    """Policy tokens where the clip acts (a float64 count; 0 for a loss without token clip fractions)."""
    if not (spec.ratio or spec.loss in TOKEN_CLIPS):
        return torch.zeros((), dtype=torch.float64)
    tokens = mask.to(torch.float64).sum()
    return sum(torch.round(diagnostics[k].to(torch.float64) * tokens) for k in ("clip_low_fraction",
                                                                                "clip_high_fraction"))


def token_terms(logp: torch.Tensor, rows: TokenBatch,
                spec: UpdateSpec) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """(mask, old, ref_logp, token_rewards) of ``rows`` in logp's dtype, detached, [B, T]; old is None when the
    loss reads no pi_old, else the batch's logp_old or logp itself (ratio 1); token_rewards with the KL's k1."""
    mask = rows.action_mask.to(logp.dtype)
    old = None
    if spec.uses_old:
        old = logp.detach() if rows.logp_old is None else rows.logp_old.to(logp.dtype).detach()
    ref_logp = rows.ref_logp.to(logp.dtype).detach() if rows.ref_logp is not None else logp.detach()
    token_rewards = rows.token_rewards.to(logp.dtype) if rows.token_rewards is not None else None
    if spec.beta > 0 and spec.kl_in == "reward":
        kl_rewards = -spec.beta * kl_estimate(logp.detach() if old is None else old, ref_logp, "k1") * mask
        token_rewards = kl_rewards if token_rewards is None else token_rewards + kl_rewards
    return mask, old, ref_logp, token_rewards


def pg_loss(logp: torch.Tensor, rows: TokenBatch, reply_adv: torch.Tensor,
            spec: UpdateSpec) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The surrogate loss of one (micro-)batch; logp [B, T] (with grad, 0 off the policy positions), reply_adv [B].

    -> (loss, parts): loss a scalar whose gradient is the policy gradient estimate; parts holds
    ``score_loss`` (scalar, detached), ``clip_count`` (scalar: policy tokens where the clip acts) and the
    diagnostics of the loss (but reinforce's) and of the correction (``is_*``), detached scalars.

    Of ``rows`` it reads action_mask, ref_logp, logp_old, rollout_logp and token_rewards [B, T]
    (rewards [B] were turned into ``reply_adv`` by the caller, e.g. :func:`reply_advantages`).

    - The advantage of token t is the reply's advantage A_b plus the reward-to-go of per-token rewards (a
      format penalty; with ``kl_in="reward"``, -beta k1_t = -beta (log pi_old - log pi_ref)). It is a number,
      not a function of the parameters: no gradient flows through it.
    - The surrogate (:func:`surrogate_loss`): -A_t log pi(a_t | s_t), whose gradient is the policy gradient
      estimate, or a loss of the zoo with the ratio pi / pi_old, where pi_old (``rows.logp_old``, or these
      log-probs detached when that is None: ratio 1) is the policy before this update.
    - ``spec.is_correction`` multiplies each token's loss by a weight of rho = pi_old / mu, mu the sampler
      (``rows.rollout_logp``; None: mu = pi_old, every weight 1: a no-op on-policy).
    - ``spec.mode`` weighs the tokens into one number (mean over tokens, over replies, or a constant).
    - With ``kl_in="loss"``, beta times the k3 estimate of KL(pi || pi_ref) is added to the loss
      itself and differentiated (TRL's GRPO).
    - ``score_loss`` is the part the reply scores make, -A_b log pi aggregated alike: per-token rewards
      carry no baseline and can shift the total's sign, so this is the loss column the book shows.
    """
    mask, old, ref_logp, token_rewards = token_terms(logp, rows, spec)
    reply_adv = reply_adv.to(logp.dtype).detach()
    adv = per_token(reply_adv, mask, token_rewards=token_rewards)
    per_tok, diagnostics = surrogate_loss(logp, old, adv.detach(), mask, spec)
    clipped = clip_count(diagnostics, mask, spec)
    diagnostics = {} if spec.loss == PLAIN else diagnostics
    if spec.is_correction != "none":
        rollout = old if rows.rollout_logp is None else rows.rollout_logp.to(logp.dtype)
        weights, corrected = correction(old, rollout, mask, spec)
        per_tok, diagnostics = per_tok * weights, {**diagnostics, **corrected}
    loss = aggregate_loss(per_tok, mask, spec.mode, spec.norm_const)
    score_loss = loss if token_rewards is None else aggregate_loss(
        -per_token(reply_adv, mask) * logp.detach(), mask, spec.mode, spec.norm_const)
    if spec.beta > 0 and spec.kl_in == "loss":
        loss = loss + spec.beta * aggregate_loss(kl_estimate(logp, ref_logp, "k3"), mask, spec.mode, spec.norm_const)
    return loss, {"score_loss": score_loss.detach(), "clip_count": clipped, **diagnostics}


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
               spec: UpdateSpec, start: int) -> tuple[torch.Tensor, dict, dict[str, float]]:
    """pg_loss per micro-batch, back-propagated, then one guarded step; reply_adv [B] of this rank's rows.

    -> (logp [B, T] detached, the step's result, totals over micro-batches: loss, clip_count and score_loss
    summed, each diagnostic of pg_loss averaged).
    """
    rows, parts = batch.batch_size, spec.micro_batches
    part_rows = rows // parts
    weight = part_rows / rows if spec.mode in SEQ_MEAN else 1.0
    logp_parts, totals = [], {"loss": 0.0, "clip_count": 0.0, "score_loss": 0.0}
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
        totals["loss"] += float(loss.detach())
        totals["clip_count"] += float(pieces.pop("clip_count"))
        totals["score_loss"] += float(pieces.pop("score_loss")) * weight
        for name, value in pieces.items():
            totals[name] = totals.get(name, 0.0) + float(value) / parts
        logp_parts.append(logp.detach())
    return (torch.cat(logp_parts) if parts > 1 else logp_parts[0]), step, totals


def pg_update(policy: TokenPolicy, optimizer: torch.optim.Optimizer, batch: TokenBatch, spec: UpdateSpec, *,
              baseline: float = 0.0, start: int = 1) -> dict:
    """One guarded step on this process's rows of ``batch`` -> the step's metrics (over all ranks).

    The metrics hold ``loss`` (the surrogate stepped on), ``score_loss`` (its part from the reply
    scores alone, as -A log pi), reward, reward_std, kl_k1, policy_tokens, entropy (the mean -log pi of
    the policy tokens: an estimate of the entropy per token), zero_adv_groups, grad_norm, skipped and,
    with ``spec.ratio`` or a loss of TOKEN_CLIPS, clip_ratio (the share of the policy tokens where the clip acts),
    and the diagnostics of the loss and the correction (each the mean over micro-batches and ranks).

    ``batch.rewards`` [B] are the scores the baseline acts on (``baseline``: reinforce's, e.g. an
    EMA of past rewards); ``start`` is the first position scored. Micro-batches are normalised by the
    whole batch's counts, so the accumulated gradient is the one of a single pass. When the loss reads
    pi_old (``spec.uses_old``) and the batch has no ``logp_old``, it is set here to this pass's log-probs
    (ratio 1: the on-policy gradient), so later steps on the same batch compare to the policy before them.
    """
    check_batch(batch, spec)
    rank, size = world()
    rows = batch.batch_size
    dtype = next(policy.module.parameters()).dtype          # the scores' precision is the policy's
    all_scores = gather_rows(batch.rewards.to(dtype))
    reply_adv = reply_advantages(all_scores, spec, baseline)[rank * rows:(rank + 1) * rows]
    logp, step, totals = accumulate(policy, optimizer, batch, reply_adv, global_spec(spec, batch.action_mask, size),
                                    start)
    if spec.uses_old and batch.logp_old is None:
        batch.logp_old = logp
    mask = batch.action_mask.to(torch.float64).to(logp.dtype)
    ref_logp = batch.ref_logp.to(logp.dtype) if batch.ref_logp is not None else logp
    k1 = ((logp - ref_logp) * mask).sum(-1)
    surprisal = -(logp * mask).sum(-1)          # its mean per token estimates the policy's entropy per token
    gathered = gather_rows(torch.stack([k1, batch.action_mask.to(torch.float64).sum(-1).to(logp.dtype), surprisal],
                                       -1))
    summed = gather_rows(torch.tensor([list(totals.values())], dtype=torch.float64, device=logp.device))
    metrics = {"reward": float(all_scores.mean()),
               "reward_std": float(all_scores.std()) if len(all_scores) > 1 else 0.0,
               "kl_k1": float(gathered[:, 0].mean()), "policy_tokens": float(gathered[:, 1].mean()),
               "entropy": float(gathered[:, 2].sum() / gathered[:, 1].sum().clamp(min=1)),
               "zero_adv_groups": zero_advantage_share(gather_rows(reply_adv), spec.group_size),
               "loss": float(summed[:, 0].mean()), "score_loss": float(summed[:, 2].mean()),
               "grad_norm": step["grad_norm"], "skipped": step["skipped"]}
    if spec.ratio or spec.loss in TOKEN_CLIPS:
        metrics["clip_ratio"] = float(summed[:, 1].sum() / gathered[:, 1].sum().clamp(min=1))
    metrics.update({name: float(summed[:, i].mean()) for i, name in enumerate(totals) if i > 2})
    return metrics


def no_sync(module: torch.nn.Module):
    """DDP's no_sync (skip the gradient all-reduce of a micro-batch that is not the last), else a no-op."""
    return module.no_sync() if hasattr(module, "no_sync") else contextlib.nullcontext()


__all__ = ["CLIP_DEFAULTS", "DIAGNOSTICS", "IS_CORRECTIONS", "KL_IN", "LOSSES", "PLAIN", "SEQUENCE_LOSSES",
           "TOKEN_CLIPS", "ZOO", "UpdateSpec", "check_batch", "check_zoo", "clip_count", "clipped_ratio", "correction",
           "no_sync", "pg_loss", "pg_update", "reply_advantages", "score", "surrogate_loss", "token_terms",
           "zoo_options"]
