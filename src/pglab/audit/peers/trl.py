"""TRL 1.16's GRPOTrainer and RLOOTrainer losses, written with pglab's estimators.

GRPOTrainer._compute_loss (trl/trainer/grpo_trainer.py): advantages (r - group mean) / (sample std + 1e-4)
(``scale_rewards="group"``); the policy term of ``loss_type`` against ``old_per_token_logps`` (the audit's
``old_logp``); with ``use_vllm`` the vLLM importance-sampling ratio old / sampler (the audit's ``rollout_logp``)
of ``vllm_importance_sampling_mode`` multiplies it; beta k3 (times the importance ratio with
``use_bias_correction_kl``) is added; each loss type aggregates its own way. Defaults: trl/trainer/grpo_config.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pglab.audit.peers.common import LossFn, group_advantages, sampled
from pglab.estimators import (
    aggregate_loss,
    gspo,
    kl_estimate,
    kl_shaped_rewards,
    masked_is,
    ppo_clip,
    ratio_corrected_kl,
    sapo,
    truncated_is,
)

TRL_MODES = {"grpo": "seq_mean_token_mean", "bnpo": "token_mean", "dr_grpo": "constant", "dapo": "token_mean",
             "cispo": "token_mean", "sapo": "seq_mean_token_mean", "luspo": "seq_mean_token_sum",
             "vespo": "token_mean"}
"""GRPOConfig.loss_type -> pglab aggregation mode (dapo, cispo, vespo: num_items_in_batch, the token count on one
process; dr_grpo: B x max_completion_length; luspo: each reply's token sum, mean over replies)."""
VLLM_MODES = {"token_truncate": ("token", True), "token_mask": ("token", False),
              "sequence_truncate": ("sequence", True), "sequence_mask": ("sequence", False)}
"""GRPOConfig.vllm_importance_sampling_mode -> (level, truncate: True clips the ratio, False masks it)."""
CLIPPED = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
"""Loss types whose policy term is PPO's clipped surrogate (GSPO's at the sequence importance level)."""


@dataclass(frozen=True)
class TrlConfig:
    """The GRPOConfig fields a loss reads, at TRL 1.16's defaults."""

    loss_type: str = "dapo"
    """GRPOConfig.loss_type: a key of TRL_MODES."""
    use_bias_correction_kl: bool = True
    """Multiply the k3 term by the importance ratio (TRL 1.16's default: True)."""
    importance_sampling_level: str = "token"
    """'token' (per-token ratios) or 'sequence' (the GSPO ratio exp(mean_t log ratio))."""
    vllm_mode: str | None = None
    """None: use_vllm=False; else vllm_importance_sampling_mode, a key of VLLM_MODES."""
    vllm_clip_max: float = 3.0
    """vllm_importance_sampling_clip_max (clip_min is None: no lower bound)."""
    epsilon: float = 0.2
    """Lower clip range."""
    epsilon_high: float | None = None
    """Upper clip range; None is epsilon. For cispo, the cap on the weight itself (not 1 + epsilon_high)."""
    sapo_temperatures: tuple[float, float] = (1.0, 1.05)
    """(sapo_temperature_pos, sapo_temperature_neg)."""
    vespo: tuple[float, float, float, float] = (2.0, 3.0, 3.0, 2.0)
    """(vespo_k_pos, vespo_lambda_pos, vespo_k_neg, vespo_lambda_neg)."""

    @property
    def high(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high


def sequence_ratio(logp: torch.Tensor, old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO's ratio exp(mean_t (logp - old)) per reply [B], with its gradient; logp, old, mask [B, T]."""
    return torch.exp(((logp - old) * mask).sum(-1) / mask.sum(-1).clamp(min=1.0))


def vllm_weights(cfg: TrlConfig, old: torch.Tensor, rollout: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The vLLM importance-sampling weight [B, T] (detached): old / sampler, truncated at or masked above clip_max."""
    level, truncate = VLLM_MODES[cfg.vllm_mode]
    if truncate:
        return truncated_is(old, rollout, mask, cap=cfg.vllm_clip_max, level=level)[0]
    return masked_is(old, rollout, mask, low=0.0, high=cfg.vllm_clip_max, level=level)[0]


def vespo_weights(cfg: TrlConfig, logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                  is_weights: torch.Tensor | None) -> torch.Tensor:
    """VESPO's gamma weight phi(w) = exp(lambda + k log w - lambda w) per reply [B], detached (get_gamma_weights).

    w is the sequence ratio prod_t pi / pi_old (times the vLLM weights when given), in log space clamped
    to [log 1e-8, 20]; (k, lambda) are the positive pair where A >= 0, the negative pair elsewhere.
    """
    floor = math.log(1e-8)
    log_w = ((logp.detach() - old).clamp(-20.0, 20.0) * mask).sum(-1)
    if is_weights is not None:
        log_w = log_w + torch.where(mask > 0, torch.log(is_weights).clamp(floor, 20.0), 0.0).sum(-1)
    log_w = log_w.clamp(floor, 20.0)
    k_pos, lambda_pos, k_neg, lambda_neg = cfg.vespo
    k = torch.where(adv >= 0, k_pos, k_neg)
    lam = torch.where(adv >= 0, lambda_pos, lambda_neg).clamp(min=1e-4)
    return torch.exp(lam + k * log_w - lam * torch.exp(log_w)).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


def policy_term(cfg: TrlConfig, logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                is_weights: torch.Tensor | None) -> torch.Tensor:
    """The per-token policy loss [B, T] of cfg.loss_type (before the vLLM weight and the KL term)."""
    if cfg.loss_type == "cispo":  # the weight min(r, epsilon_high), detached, on -A log pi
        weight = truncated_is(logp, old, mask, cap=cfg.high)[0]
        return -weight * adv[:, None] * logp
    if cfg.loss_type == "sapo":
        return sapo(logp, old, adv, mask, tau_pos=cfg.sapo_temperatures[0], tau_neg=cfg.sapo_temperatures[1])[0]
    if cfg.loss_type == "vespo":
        return -vespo_weights(cfg, logp, old, adv, mask, is_weights)[:, None] * adv[:, None] * logp
    surrogate = gspo if cfg.importance_sampling_level == "sequence" else ppo_clip
    return surrogate(logp, old, adv, mask, epsilon=cfg.epsilon, epsilon_high=cfg.high)[0]


def kl_term(cfg: TrlConfig, logp: torch.Tensor, old: torch.Tensor, ref_logp: torch.Tensor,
            mask: torch.Tensor) -> torch.Tensor:
    """k3 per token [B, T], times the token (or, at the sequence level, the GSPO) ratio with bias correction."""
    if not cfg.use_bias_correction_kl:
        return kl_estimate(logp, ref_logp, "k3")
    if cfg.importance_sampling_level == "sequence":
        return kl_estimate(logp, ref_logp, "k3") * sequence_ratio(logp, old, mask)[:, None]
    return ratio_corrected_kl(logp, old, ref_logp, "k3")


def trl_grpo_loss(cfg: TrlConfig, beta: float) -> LossFn:
    """GRPOTrainer._compute_loss with ``cfg`` and KL coefficient ``beta``."""
    if cfg.loss_type not in TRL_MODES or (cfg.vllm_mode is not None and cfg.vllm_mode not in VLLM_MODES):
        raise ValueError(f"loss_type must be one of {sorted(TRL_MODES)} and vllm_mode None or one of "
                         f"{sorted(VLLM_MODES)}, got {cfg.loss_type!r}, {cfg.vllm_mode!r}")
    mode = TRL_MODES[cfg.loss_type]

    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        old, rollout = sampled(logp, rollout_logp, old_logp)
        adv = group_advantages(rewards, group, "grpo", unbiased=True, eps=1e-4)
        is_weights = None if cfg.vllm_mode is None else vllm_weights(cfg, old, rollout, mask)
        per_token = policy_term(cfg, logp, old, adv, mask, is_weights)
        if is_weights is not None and cfg.loss_type != "vespo":  # VESPO folds the weights into phi
            per_token = per_token * is_weights
        if beta:
            per_token = per_token + beta * kl_term(cfg, logp, old, ref_logp, mask)
        const = float(mask.shape[0] * mask.shape[1]) if mode == "constant" else None  # B * max_completion_length
        return aggregate_loss(per_token, mask, mode, const)

    return loss_fn


def trl_rloo_loss(beta: float, epsilon: float = 0.2) -> LossFn:
    """RLOOTrainer: score - beta sum_t (old - ref), leave-one-out, PPO's clip on the reply's ratio
    exp(sum_t (logp - old)), mean over replies (``normalize_advantages=False``)."""
    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        old, _ = sampled(logp, rollout_logp, old_logp)
        shaped = kl_shaped_rewards(rewards, old, ref_logp, mask, beta).sum(-1)
        adv = group_advantages(shaped, group, "rloo")
        reply = torch.ones_like(mask[:, :1])
        per_reply = ppo_clip((logp * mask).sum(-1, keepdim=True), (old * mask).sum(-1, keepdim=True), adv, reply,
                             epsilon=epsilon)[0]
        return per_reply.mean()

    return loss_fn
