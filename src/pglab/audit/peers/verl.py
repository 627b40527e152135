"""verl 0.9.1's actor losses, written with pglab's estimators.

verl/workers/utils/losses.py ``ppo_loss``: the policy loss of ``policy_loss.loss_mode``
(verl/trainer/ppo/core_algos.py, ``compute_policy_loss_*``) on GRPO's advantages
(``compute_grpo_outcome_advantage``: (r - mean) / (torch.std + 1e-6)), times the rollout-correction weights,
plus ``kl_loss_coef`` times ``agg_loss(kl_penalty(...))`` with ``use_kl_loss``. The rollout correction
(verl/trainer/ppo/rollout_corr_helper.py) compares the trainer's old log-probs (the audit's ``old_logp``)
with the rollout's (``rollout_logp``); a rejection mask replaces the response mask everywhere.
Defaults: verl/trainer/config/actor/actor.yaml.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pglab.audit.peers.common import LossFn, group_advantages, sampled
from pglab.estimators import (
    aggregate_loss,
    cispo,
    geometric_mask,
    gmpo,
    gspo_token,
    kl_estimate,
    masked_is,
    masked_mean,
    ppo_clip,
    sapo,
    truncated_is,
)
from pglab.estimators.policy_losses import clip_flags

VERL_KL = {"low_var_kl": "k3", "k1": "k1", "mse": "k2"}
"""verl actor.kl_loss_type -> pglab KL estimator."""
VERL_KL_CLAMP = 10.0
"""kl_penalty_forward clamps low_var_kl to [-10, 10]: where the clamp binds the KL term has no gradient."""
VERL_MODES = {"token-mean": "token_mean", "seq-mean-token-sum": "seq_mean_token_sum",
              "seq-mean-token-mean": "seq_mean_token_mean", "seq-mean-token-sum-norm": "seq_mean_token_sum_norm"}
"""verl actor.loss_agg_mode -> pglab aggregation mode (0.9.1's sum-norm: the mean over replies of the token sum,
divided by the response length T; verl before 0.9 left out the mean over replies)."""


@dataclass(frozen=True)
class VerlConfig:
    """The actor and rollout-correction settings a verl loss reads, at verl 0.9.1's defaults."""

    loss_mode: str = "vanilla"
    """policy_loss.loss_mode: a key of LOSSES."""
    loss_agg_mode: str = "token-mean"
    """actor.loss_agg_mode, a key of VERL_MODES (sapo and geo_mean aggregate their own way)."""
    kl_loss_type: str = "low_var_kl"
    """actor.kl_loss_type, a key of VERL_KL (the term is added with use_kl_loss at kl_loss_coef = beta)."""
    clip_ratio: tuple[float, float] = (0.2, 0.2)
    """(clip_ratio_low, clip_ratio_high)."""
    rollout_is: tuple[str, float | tuple[float, float]] | None = None
    """rollout_is and its threshold: a float truncates (TIS), (low, high) masks (IcePop); None: no weights."""
    rollout_rs: tuple[str, tuple[float, float]] | None = None
    """Rejection: ('seq_sum_k1' | 'seq_mean_k1', (low, high) bounds on the ratio), or None."""
    bypass: str | None = None
    """None (decoupled mode); 'ppo_clip' (loss_mode's loss) or 'pg' (loss_type 'reinforce': -w A log pi): bypass
    mode, where the rollout is the old policy and the IS weights compare the current policy with it."""


def verl_kl(logp: torch.Tensor, ref_logp: torch.Tensor, kl_type: str) -> torch.Tensor:
    """kl_penalty per token [B, T]: k1, k2 (mse) or k3 clamped to [-10, 10] (low_var_kl)."""
    kl = kl_estimate(logp, ref_logp, VERL_KL[kl_type])
    return kl.clamp(-VERL_KL_CLAMP, VERL_KL_CLAMP) if kl_type == "low_var_kl" else kl


def covariance(adv: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Clip-Cov's and KL-Cov's per-token covariance (A - mean A)(log pi - mean log pi) over the policy tokens."""
    return (adv - masked_mean(adv, mask)) * (logp.detach() - masked_mean(logp.detach(), mask))


def clip_cov(logp, old, adv, mask, cfg: VerlConfig, *, ratio: float = 2e-4, bounds=(1.0, 5.0)) -> torch.Tensor:
    """compute_policy_loss_clip_cov: PPO's clip, and ``ratio`` of the tokens (at least one), drawn at random
    (torch.randperm) among those with covariance inside ``bounds`` and not already clipped, lose their gradient."""
    adv = adv[:, None].expand_as(logp)
    per_token = ppo_clip(logp, old, adv, mask, epsilon=cfg.clip_ratio[0], epsilon_high=cfg.clip_ratio[1])[0]
    flags = clip_flags(torch.exp(logp.detach() - old), adv, *cfg.clip_ratio)
    clipped = (flags["clip_low_fraction"] | flags["clip_high_fraction"]) & (mask > 0)
    cov = covariance(adv, logp, mask).masked_fill((mask == 0) | clipped, -torch.inf)
    candidates = torch.nonzero((cov < bounds[1]) & (cov > bounds[0]) & (mask > 0))
    count = max(int(ratio * mask.sum().item()), 1)
    chosen = candidates[torch.randperm(len(candidates))[:count]] if len(candidates) else candidates
    keep = torch.ones_like(per_token)
    keep[chosen[:, 0], chosen[:, 1]] = 0
    return per_token * keep


def kl_cov(logp, old, adv, mask, cfg: VerlConfig, *, ratio: float = 2e-4, coef: float = 0.1) -> torch.Tensor:
    """compute_policy_loss_kl_cov: the unclipped -r A, plus coef |log r| on the ``ratio`` of the tokens (at least
    one) with the largest covariance (torch.topk over the policy tokens in row order)."""
    per_token = ppo_clip(logp, old, adv, mask, epsilon=math.inf)[0]
    valid = torch.nonzero(mask.reshape(-1) > 0)[:, 0]
    cov = covariance(adv[:, None].expand_as(logp), logp, mask).reshape(-1)[valid]
    top = valid[torch.topk(cov, max(1, int(len(cov) * ratio))).indices]
    penalty = torch.zeros_like(per_token).reshape(-1)
    penalty[top] = 1.0
    return per_token + coef * penalty.reshape(logp.shape) * (logp - old).abs()


def policy_term(cfg: VerlConfig, logp, old, adv, mask) -> torch.Tensor:
    """The per-token policy loss [B, T] of cfg.loss_mode (before the rollout-correction weights)."""
    low, high = cfg.clip_ratio
    if cfg.bypass == "pg" or cfg.loss_mode == "gpg":
        return -adv[:, None] * logp
    if cfg.loss_mode == "vanilla":
        return ppo_clip(logp, old, adv, mask, epsilon=low, epsilon_high=high, dual_clip=3.0)[0]
    if cfg.loss_mode == "gspo":
        return gspo_token(logp, old, adv, mask, epsilon=low, epsilon_high=high)[0]
    if cfg.loss_mode == "sapo":
        return sapo(logp, old, adv, mask, tau_pos=1.0, tau_neg=1.05)[0]
    if cfg.loss_mode == "geo_mean":
        return gmpo(logp, old, adv, mask, epsilon=low, epsilon_high=high)[0]
    if cfg.loss_mode == "cispo":
        return cispo(logp, old, adv, mask, epsilon=low, epsilon_high=high)[0]
    if cfg.loss_mode == "clip_cov":
        return clip_cov(logp, old, adv, mask, cfg)
    return kl_cov(logp, old, adv, mask, cfg)


LOSSES = ("vanilla", "gspo", "sapo", "gpg", "clip_cov", "kl_cov", "geo_mean", "cispo")
"""The policy_loss.loss_mode values the presets cover."""
OWN_AGGREGATION = {"sapo": "seq_mean_token_mean", "geo_mean": "seq_mean_token_mean"}
"""Loss modes that ignore loss_agg_mode: sapo's seq-mean-token-mean, geo_mean's mean over replies."""


def correction(cfg: VerlConfig, old: torch.Tensor, rollout: torch.Tensor,
               mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(IS weights [B, T] (1 without rollout_is), the response mask after rejection [B, T])."""
    weights = torch.ones_like(mask)
    if cfg.rollout_is is not None:
        level, threshold = cfg.rollout_is
        if isinstance(threshold, tuple):
            weights = masked_is(old, rollout, mask, low=threshold[0], high=threshold[1], level=level)[0]
        else:
            weights = truncated_is(old, rollout, mask, cap=threshold, level=level)[0]
    if cfg.rollout_rs is None:
        return weights, mask
    option, (low, high) = cfg.rollout_rs
    if option == "seq_mean_k1":  # -mean log rho in [log low, log high]: the geometric mean in [1/high, 1/low]
        keep = geometric_mask(old, rollout, mask, low=1 / high, high=1 / low)[0]
    else:  # seq_sum_k1: the reply's ratio in [1/high, 1/low]
        keep = (masked_is(old, rollout, mask, low=1 / high, high=1 / low, level="sequence")[0] > 0).to(mask.dtype)
    return weights, mask * keep


def verl_loss(cfg: VerlConfig, beta: float) -> LossFn:
    """ppo_loss with ``cfg`` and kl_loss_coef ``beta`` (use_kl_loss; beta 0 leaves the KL term out)."""
    if cfg.loss_mode not in LOSSES or cfg.loss_agg_mode not in VERL_MODES or cfg.kl_loss_type not in VERL_KL:
        raise ValueError(f"loss_mode must be one of {LOSSES}, loss_agg_mode one of {sorted(VERL_MODES)}, "
                         f"kl_loss_type one of {sorted(VERL_KL)}")

    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        old, rollout = sampled(logp, rollout_logp, old_logp)
        if cfg.bypass is not None:
            old = rollout
        adv = group_advantages(rewards, group, "grpo", unbiased=True, eps=1e-6)
        if cfg.loss_mode == "gpg":  # compute_gpg_outcome_advantage: centred, times B / (non-zero scores)
            adv = group_advantages(rewards, group, "dr_grpo") * (len(rewards) / (rewards != 0).sum().clamp(min=1))
        weights, kept = correction(cfg, logp.detach() if cfg.bypass else old, rollout, mask)
        per_token = policy_term(cfg, logp, old, adv, kept) * weights
        mode = VERL_MODES[cfg.loss_agg_mode]
        loss = aggregate_loss(per_token, kept, OWN_AGGREGATION.get(cfg.loss_mode, mode))
        if beta:
            loss = loss + beta * aggregate_loss(verl_kl(logp, ref_logp, cfg.kl_loss_type), kept, mode)
        return loss

    return loss_fn
