"""Corrections of the sampler/trainer mismatch: importance weights and masks from two policies' log-probs.

``old_logp`` [B, T] holds the log-probs of the policy the batch should have come from (the trainer's
own, at the parameters that sampled, or a proximal policy); ``rollout_logp`` [B, T] the sampler's log-probs
of the same tokens (vLLM, bf16 kernels, a copy some updates stale). rho_t = pi_old(y_t) / mu(y_t) =
exp(old_logp - rollout_logp) per token; at the sequence level rho_i = prod_t rho_t over reply i's policy
tokens. Each correction returns weights [B, T] and detached scalar diagnostics. The weights are detached
(a change of measure is a constant factor, not a term to differentiate) and 0 off the policy tokens;
multiply a per-token loss by them before :func:`pglab.estimators.aggregate_loss`.
"""

from __future__ import annotations

import torch

from pglab.estimators._tokens import (
    check_at_least,
    check_bounds,
    frozen,
    log_ratio,
    on_tokens,
    policy_tokens,
    reply_mean,
    reply_share,
    token_advantages,
    token_share,
)
from pglab.estimators._validate import check_mode
from pglab.estimators.policy_losses import Losses, ppo_clip

LEVELS = ("token", "sequence")
"""Where a correction acts: on each token's ratio, or on each reply's product of them (on all its tokens)."""


def mismatch_ratios(old_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor,
                    level: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(rho [B, T], mask [B, T]): rho_t per token, or each reply's rho_i on every one of its tokens; detached."""
    check_mode(level, LEVELS, "level")
    old, mask = policy_tokens(old_logp, mask, "old_logp")
    old = old.detach()
    log_rho = log_ratio(old, frozen("rollout_logp", rollout_logp, old, "old_logp"), mask)
    if level == "sequence":
        log_rho = log_rho.sum(-1, keepdim=True).expand_as(log_rho)
    return torch.exp(log_rho), mask


def share(flags: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """Share of the policy tokens (token level) or of the replies (sequence level) where flags [B, T] holds."""
    if level == "token":
        return token_share(flags, mask)
    return reply_share((flags & (mask > 0)).any(-1), mask)


def truncated_is(old_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor, *, cap: float,
                 level: str = "token") -> Losses:
    """Truncated importance sampling, TIS (Yao et al. 2025); old_logp, rollout_logp, mask [B, T] -> (w, diagnostics).

    w = min(rho, cap) with rho the token ratio (token TIS) or the reply's product (sequence TIS, on each of
    its tokens). Diagnostics: truncated_fraction, the share of tokens (or replies) with rho > cap.
    """
    cap = check_at_least("cap", cap, 0.0, strict=True)
    rho, mask = mismatch_ratios(old_logp, rollout_logp, mask, level)
    return on_tokens(rho.clamp(max=cap), mask), {"truncated_fraction": share(rho > cap, mask, level)}


def masked_is(old_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor, *, low: float, high: float,
              level: str = "token") -> Losses:
    """Masked importance sampling; old_logp, rollout_logp, mask [B, T] -> (w [B, T], diagnostics).

    w = rho where low <= rho <= high, 0 elsewhere: IcePop's M(k) on each token's ratio (Ling Team 2025), or the
    same test on each reply's product (verl's sequence-level masked IS, on all of its tokens).
    Diagnostics: masked_fraction, the share of tokens (or replies) outside [low, high].
    """
    low, high = check_bounds(low, high)
    rho, mask = mismatch_ratios(old_logp, rollout_logp, mask, level)
    inside = (rho >= low) & (rho <= high)
    return on_tokens(torch.where(inside, rho, 0.0), mask), {"masked_fraction": share(~inside, mask, level)}


def geometric_mask(old_logp: torch.Tensor, rollout_logp: torch.Tensor, mask: torch.Tensor, *, low: float,
                   high: float) -> Losses:
    """The geometric-mean sequence mask; old_logp, rollout_logp, mask [B, T] -> (M [B, T], diagnostics).

    M = 1 on the tokens of reply i when low <= rho_geo_i <= high, else 0, with rho_geo_i = exp(mean_t log rho_t)
    = rho_i^(1 / |y_i|): a per-token drift that does not grow with the length (Liu, Li et al. 2025, verl's
    geometric rejection). Diagnostics: masked_fraction, the share of the replies dropped.
    """
    low, high = check_bounds(low, high)
    old, mask = policy_tokens(old_logp, mask, "old_logp")
    old = old.detach()
    geometric = torch.exp(reply_mean(log_ratio(old, frozen("rollout_logp", rollout_logp, old, "old_logp"), mask), mask))
    keep = (geometric >= low) & (geometric <= high)
    return on_tokens(keep[:, None].expand_as(old).to(old.dtype), mask), {"masked_fraction": reply_share(~keep, mask)}


def off_policy_sequence_mask(logp: torch.Tensor, rollout_logp: torch.Tensor, advantages: torch.Tensor,
                             mask: torch.Tensor, *, delta: float) -> Losses:
    """DeepSeek-V3.2's off-policy sequence mask M [B, T] (0/1, detached) and its diagnostics.

    logp (the current policy), rollout_logp, mask [B, T], advantages [B] or [B, T].

    M_t = 0 where A_t < 0 and the reply's mean of log(mu(y_t) / pi(y_t)) over its policy tokens (a k1 estimate of
    KL(mu || pi) per token, with pi the current policy) exceeds delta; 1 elsewhere on the policy tokens.
    Negative replies that drifted far are dropped; positive ones are kept. Diagnostics: masked_fraction.
    """
    delta = check_at_least("delta", delta, 0.0)
    logp, mask = policy_tokens(logp, mask)
    logp = logp.detach()
    drift = reply_mean(log_ratio(frozen("rollout_logp", rollout_logp, logp), logp, mask), mask)
    dropped = (token_advantages(advantages, logp) < 0) & (drift > delta)[:, None]
    return on_tokens((~dropped).to(logp.dtype), mask), {"masked_fraction": token_share(dropped, mask)}


def decoupled_ppo(logp: torch.Tensor, proximal_logp: torch.Tensor, rollout_logp: torch.Tensor,
                  advantages: torch.Tensor, mask: torch.Tensor, *, epsilon: float = 0.2,
                  epsilon_high: float | None = None, dual_clip: float | None = None) -> Losses:
    """Decoupled PPO (Hilton et al. 2022); logp, proximal_logp, rollout_logp, mask [B, T], advantages [B] or [B, T].

    loss_t = -(pi_prox / mu)(y_t) min(r_t A, clip(r_t) A), r_t = pi / pi_prox: the clip acts against the
    proximal policy and the constant behaviour weight pi_prox / mu corrects for the sampler. Returns
    (loss [B, T], :func:`ppo_clip`'s diagnostics). To truncate or mask the behaviour weight, multiply
    ppo_clip(logp, proximal_logp, ...)'s loss by :func:`truncated_is` or :func:`masked_is` of
    (proximal_logp, rollout_logp) instead.
    """
    per_token, diagnostics = ppo_clip(logp, proximal_logp, advantages, mask, epsilon=epsilon,
                                      epsilon_high=epsilon_high, dual_clip=dual_clip)
    weights, _ = mismatch_ratios(proximal_logp, rollout_logp, mask, "token")
    return per_token * weights, diagnostics


__all__ = ["LEVELS", "decoupled_ppo", "geometric_mask", "masked_is", "mismatch_ratios", "off_policy_sequence_mask",
           "truncated_is"]
