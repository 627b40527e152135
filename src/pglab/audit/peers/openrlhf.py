"""OpenRLHF 0.11.2's critic-free PPO losses, written with pglab's estimators.

``compute_advantages_and_returns`` (openrlhf/trainer/ppo_utils/experience_maker.py): the estimator's baseline
acts on the score, then ``compute_reward`` (openrlhf/models/utils.py) clips it to ``--reward.clip_range``
(-10, 10), puts it on the last token and adds -beta k1 per token (k1 of the rollout-time log-probs, the audit's
``old_logp``) unless the KL is a loss; ``get_cumulative_returns`` sums the rewards to go (gamma 1); reinforce and
reinforce_baseline whiten the returns over the batch's tokens. ``PolicyLoss`` (openrlhf/models/loss.py): PPO's
clip (or GSPO's ratio), optional dual clip and train/rollout correction, a mean over the batch's tokens (GSPO: over
replies of each reply's token mean). With ``--algo.kl.use_loss`` the actor adds beta times the token mean of
``compute_approx_kl`` (ppo_actor.py). Defaults: openrlhf/cli/train_ppo_ray.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pglab.audit.peers.common import LossFn, group_advantages, sampled
from pglab.estimators import (
    aggregate_loss,
    discounted_returns,
    geometric_mask,
    gspo,
    kl_estimate,
    kl_shaped_rewards,
    masked_is,
    masked_mean,
    ppo_clip,
    truncated_is,
)
from pglab.estimators.corrections import mismatch_ratios

ESTIMATORS = {"reinforce": ("reinforce", {}, True), "rloo": ("rloo", {}, False),
              "group_norm": ("grpo", {"unbiased": True, "eps": 1e-9}, False),
              "reinforce_baseline": ("dr_grpo", {}, True), "dr_grpo": ("dr_grpo", {}, False)}
"""--algo.advantage.estimator -> (pglab advantage kind, its options, whether the returns are whitened)."""
CORRECTIONS = {"tis": ("token", "clip"), "icepop": ("token", "mask"), "seq-mask-tis": ("seq", "mask")}
"""OpenRLHF's named train/rollout corrections -> (--algo.advantage.is_correction_level, is_correction_mode)."""
REWARD_CLIP = 10.0
"""--reward.clip_range (-10, 10)."""
KL_CLAMP = 10.0
"""compute_approx_kl clamps every estimate to [-10, 10]."""


@dataclass(frozen=True)
class OpenRlhfConfig:
    """The train_ppo_ray.py options a loss reads, at OpenRLHF 0.11.2's defaults (the estimator named)."""

    estimator: str = "reinforce_baseline"
    """--algo.advantage.estimator: a key of ESTIMATORS."""
    policy_loss_type: str = "ppo"
    """--actor.policy_loss_type: 'ppo' or 'gspo'."""
    eps_clip: float = 0.2
    """--actor.eps_clip."""
    dual_clip: float | None = None
    """--actor.dual_clip."""
    kl_loss: str | None = None
    """None: k1 in the reward; else --algo.kl.use_loss with --algo.kl.estimator of this name."""
    correction: str | None = None
    """None (--algo.advantage.is_correction_level off) or a key of CORRECTIONS."""
    is_threshold: tuple[float, float] = (0.5, 5.0)
    """--algo.advantage.is_correction_threshold."""


def returns(cfg: OpenRlhfConfig, rewards, old, ref_logp, mask, group, beta: float) -> torch.Tensor:
    """Per-token advantages [B, T]: baseline, clip, k1 reward shaping, reward-to-go, whitening."""
    kind, options, whiten = ESTIMATORS[cfg.estimator]
    score = group_advantages(rewards, group, kind, **options).clamp(-REWARD_CLIP, REWARD_CLIP)
    shaping = 0.0 if cfg.kl_loss else beta
    out = discounted_returns(kl_shaped_rewards(score, old, ref_logp, mask, shaping), 1.0, mask=mask)
    if whiten:
        centred = out - masked_mean(out, mask)
        out = centred * masked_mean(centred.pow(2), mask).clamp(min=1e-8).rsqrt()
    return out


def dual_clipped(per_token: torch.Tensor, adv: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Dual clip on a GSPO loss: min(loss, -cap A) where A < 0 (PolicyLoss applies it to both loss types)."""
    return per_token if cap is None else torch.where(adv < 0, torch.minimum(per_token, -cap * adv), per_token)


def correction_weights(cfg: OpenRlhfConfig, old, rollout, mask) -> torch.Tensor:
    """The train/rollout weight [B, T] (detached): rho = pi_train / pi_rollout clamped to the band (tis), kept in it
    (icepop), or kept where the reply's geometric mean is in it (seq-mask-tis)."""
    level, mode = CORRECTIONS[cfg.correction]
    low, high = cfg.is_threshold
    if mode == "clip":
        return truncated_is(old, rollout, mask, cap=high)[0].clamp(min=low) * mask
    if level == "token":
        return masked_is(old, rollout, mask, low=low, high=high)[0]
    rho, _ = mismatch_ratios(old, rollout, mask, "token")
    return geometric_mask(old, rollout, mask, low=low, high=high)[0] * rho


def policy_loss(cfg: OpenRlhfConfig, logp, old, rollout, adv, mask) -> torch.Tensor:
    """PolicyLoss.forward: the scalar actor loss."""
    if cfg.policy_loss_type == "gspo":  # GSPO's ratio against the rollout when a correction is on
        reference = old if cfg.correction is None else rollout
        reply_adv = (adv * mask).sum(-1) / mask.sum(-1)  # the returns are constant along a reply here
        per_token = gspo(logp, reference, reply_adv, mask, epsilon=cfg.eps_clip, epsilon_high=cfg.eps_clip)[0]
        return aggregate_loss(dual_clipped(per_token, adv, cfg.dual_clip) * mask, mask, "seq_mean_token_mean")
    per_token = ppo_clip(logp, old, adv, mask, epsilon=cfg.eps_clip, dual_clip=cfg.dual_clip)[0]
    if cfg.correction is not None:
        per_token = per_token * correction_weights(cfg, old, rollout, mask)
    return aggregate_loss(per_token, mask, "token_mean")


def openrlhf_loss(cfg: OpenRlhfConfig, beta: float) -> LossFn:
    """The actor's loss with ``cfg`` and --algo.kl.init_coef ``beta``."""
    if cfg.estimator not in ESTIMATORS or (cfg.correction is not None and cfg.correction not in CORRECTIONS):
        raise ValueError(f"estimator must be one of {sorted(ESTIMATORS)} and correction None or one of "
                         f"{sorted(CORRECTIONS)}, got {cfg.estimator!r}, {cfg.correction!r}")
    if cfg.policy_loss_type == "gspo" and not cfg.kl_loss:
        raise ValueError("the GSPO preset needs one advantage per reply: set kl_loss (the KL as a loss, not a reward)")

    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        old, rollout = sampled(logp, rollout_logp, old_logp)
        adv = returns(cfg, rewards, old, ref_logp, mask, group, beta)
        loss = policy_loss(cfg, logp, old, rollout, adv, mask)
        if cfg.kl_loss and beta:
            kl = kl_estimate(logp, ref_logp, cfg.kl_loss).clamp(-KL_CLAMP, KL_CLAMP)
            loss = loss + beta * aggregate_loss(kl, mask, "token_mean")
        return loss

    return loss_fn
