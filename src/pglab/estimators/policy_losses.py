"""The surrogate-loss zoo: per-token policy losses over log-probabilities, pure functions.

Every loss takes the trained policy's log-probs ``logp`` [B, T] (with grad), the log-probs ``old_logp``
[B, T] of the policy its ratio compares to (detached inside), advantages [B] (one per reply) or [B, T]
(detached inside) and the action mask [B, T]. It returns the per-token loss [B, T], exactly 0 off the
policy tokens, to be reduced by :func:`pglab.estimators.aggregate_loss`, and a dict of detached scalar
diagnostics (shares of the policy tokens, or of the replies for the sequence-level losses).

Notation: l_t = log pi(y_t) - log pi_old(y_t), r_t = exp(l_t), |y_i| the policy tokens of reply i,
A the advantage. At r = 1 (logp equal to old_logp) every loss here has the on-policy gradient
-A grad log pi, whatever the aggregation. docs/losses.md has each formula with its source.
"""

from __future__ import annotations

import torch

from pglab.estimators._tokens import (
    check_at_least,
    frozen,
    log_ratio,
    on_tokens,
    policy_tokens,
    reply_advantages,
    reply_mean,
    reply_share,
    token_advantages,
    token_average,
    token_share,
)
from pglab.estimators._validate import check_mode, tensor

Losses = tuple[torch.Tensor, dict[str, torch.Tensor]]
"""A per-token loss [B, T] and its detached scalar diagnostics."""
DIVERGENCES = ("binary_tv", "binary_kl")
"""DPPO's divergences between two policies, each on the two outcomes {the sampled token, any other}."""


def clip_range(epsilon: float, epsilon_high: float | None) -> tuple[float, float]:
    """(epsilon, epsilon_high) as numbers >= 0; epsilon_high None is epsilon (a symmetric range)."""
    low = check_at_least("epsilon", epsilon, 0.0)
    return low, low if epsilon_high is None else check_at_least("epsilon_high", epsilon_high, 0.0)


def clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """-min(r A, clip(r, 1 - low, 1 + high) A), elementwise; ratio, adv of one shape -> that shape."""
    return torch.maximum(-ratio * adv, -ratio.clamp(1 - low, 1 + high) * adv)


def clip_flags(ratio: torch.Tensor, adv: torch.Tensor, low: float, high: float) -> dict[str, torch.Tensor]:
    """Where the clipped branch of :func:`clipped_surrogate` is the one taken (its gradient is 0 there)."""
    return {"clip_low_fraction": (adv < 0) & (ratio < 1 - low), "clip_high_fraction": (adv > 0) & (ratio > 1 + high)}


def ppo_clip(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
             epsilon: float = 0.2, epsilon_high: float | None = None, dual_clip: float | None = None) -> Losses:
    """PPO's clipped surrogate; logp, old_logp, mask [B, T], advantages [B] or [B, T] -> ([B, T], diagnostics).

    loss_t = -min(r_t A, clip(r_t, 1 - epsilon, 1 + epsilon_high) A) (Schulman et al. 2017); epsilon_high
    above epsilon is DAPO's clip-higher (Yu et al. 2025). ``dual_clip`` c > 1 also caps the loss of a
    negative advantage at -c A (Ye et al. 2020): loss_t = min(loss_t, -c A) where A < 0.
    Diagnostics: clip_low_fraction (A < 0, r < 1 - epsilon), clip_high_fraction (A > 0, r > 1 + epsilon_high),
    and with dual_clip, dual_clip_fraction (A < 0, r > c); shares of the policy tokens.
    """
    logp, mask = policy_tokens(logp, mask)
    adv = token_advantages(advantages, logp)
    low, high = clip_range(epsilon, epsilon_high)
    ratio = torch.exp(log_ratio(logp, frozen("old_logp", old_logp, logp), mask))
    per_token = clipped_surrogate(ratio, adv, low, high)
    flags = clip_flags(ratio, adv, low, high)
    if dual_clip is not None:
        cap = check_at_least("dual_clip", dual_clip, 1.0, strict=True)
        per_token = torch.where(adv < 0, torch.minimum(per_token, -cap * adv), per_token)
        flags["dual_clip_fraction"] = (adv < 0) & (ratio > cap)
    return on_tokens(per_token, mask), {name: token_share(f, mask) for name, f in flags.items()}


def gspo(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
         epsilon: float = 3e-4, epsilon_high: float | None = 4e-4) -> Losses:
    """GSPO (Zheng et al. 2025); logp, old_logp, mask [B, T], advantages [B] -> ([B, T], diagnostics).

    The sequence ratio s_i = (pi(y_i) / pi_old(y_i))^(1 / |y_i|) = exp(mean_t l_t), the length-normalised
    geometric mean of the token ratios; loss_i = -min(s_i A_i, clip(s_i, 1 - epsilon, 1 + epsilon_high) A_i),
    on each policy token of reply i. Aggregated by ``seq_mean_token_mean`` this is the paper's objective
    (1/B sum_i loss_i); the token-summing modes weigh reply i by |y_i|, as GSPO-token does. The defaults are
    the paper's ranges. Diagnostics: clip_low_fraction, clip_high_fraction, shares of the replies.
    """
    logp, mask = policy_tokens(logp, mask)
    adv = reply_advantages(advantages, logp)
    low, high = clip_range(epsilon, epsilon_high)
    ratio = torch.exp(reply_mean(log_ratio(logp, frozen("old_logp", old_logp, logp), mask), mask))
    per_reply = clipped_surrogate(ratio, adv, low, high)
    diagnostics = {name: reply_share(f, mask) for name, f in clip_flags(ratio, adv, low, high).items()}
    return on_tokens(per_reply[:, None].expand_as(logp), mask), diagnostics


def gspo_token(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
               epsilon: float = 3e-4, epsilon_high: float | None = 4e-4) -> Losses:
    """GSPO-token (Zheng et al. 2025); logp, old_logp, mask [B, T], advantages [B] or [B, T] -> ([B, T], diagnostics).

    s_i,t = sg[s_i] pi(y_t) / sg[pi(y_t)]: the value of GSPO's sequence ratio s_i with the gradient of one
    token; loss_t = -min(s_i,t A_t, clip(s_i,t, 1 - epsilon, 1 + epsilon_high) A_t). With advantages [B]
    its value and gradient are :func:`gspo`'s; [B, T] gives each token its own advantage.
    Diagnostics: clip_low_fraction, clip_high_fraction, shares of the policy tokens.
    """
    logp, mask = policy_tokens(logp, mask)
    adv = token_advantages(advantages, logp)
    low, high = clip_range(epsilon, epsilon_high)
    log_sequence_ratio = reply_mean(log_ratio(logp, frozen("old_logp", old_logp, logp), mask), mask).detach()
    ratio = torch.exp(log_sequence_ratio[:, None] + (logp - logp.detach()))
    per_token = clipped_surrogate(ratio, adv, low, high)
    diagnostics = {name: token_share(f, mask) for name, f in clip_flags(ratio, adv, low, high).items()}
    return on_tokens(per_token, mask), diagnostics


def gmpo(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
         epsilon: float = 0.4, epsilon_high: float | None = None) -> Losses:
    """GMPO (Zhao et al. 2025); logp, old_logp, mask [B, T], advantages [B] -> ([B, T], diagnostics).

    The geometric mean of the clipped token objectives: J_i = sgn(A_i) (prod_t |min(r_t A_i, clip(r_t) A_i)|)
    ^(1 / |y_i|) = A_i exp(mean_t l~_t), with the clip in log space: l~_t = min(l_t, clip(l_t, -epsilon,
    epsilon_high)) where A_i > 0 and max(...) where A_i < 0 (the paper's range is (e^-0.4, e^0.4)).
    loss_i = -J_i on each policy token of reply i (``seq_mean_token_mean`` gives the paper's 1/B sum_i).
    Diagnostics: clip_low_fraction (A < 0, l < -epsilon), clip_high_fraction (A > 0, l > epsilon_high),
    shares of the policy tokens.
    """
    logp, mask = policy_tokens(logp, mask)
    adv = reply_advantages(advantages, logp)
    low, high = clip_range(epsilon, epsilon_high)
    log_ratios = log_ratio(logp, frozen("old_logp", old_logp, logp), mask)
    sign = torch.sign(adv)[:, None]
    clipped = sign * torch.minimum(sign * log_ratios, sign * log_ratios.clamp(-low, high))
    per_reply = -adv * torch.exp(reply_mean(clipped, mask))
    flags = {"clip_low_fraction": (sign < 0) & (log_ratios < -low),
             "clip_high_fraction": (sign > 0) & (log_ratios > high)}
    diagnostics = {name: token_share(f, mask) for name, f in flags.items()}
    return on_tokens(per_reply[:, None].expand_as(logp), mask), diagnostics


def cispo(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
          epsilon_high: float, epsilon: float | None = None) -> Losses:
    """CISPO (MiniMax-M1, 2025); logp, old_logp, mask [B, T], advantages [B] or [B, T] -> ([B, T], diagnostics).

    loss_t = -sg(clip(r_t, 1 - epsilon, 1 + epsilon_high)) A log pi(y_t): the clipped ratio only weighs the
    REINFORCE term, so no token loses its gradient. epsilon None sets no lower bound (the paper's choice).
    Diagnostics: clip_low_fraction (r < 1 - epsilon), clip_high_fraction (r > 1 + epsilon_high), shares of
    the policy tokens.
    """
    logp, mask = policy_tokens(logp, mask)
    adv = token_advantages(advantages, logp)
    high = check_at_least("epsilon_high", epsilon_high, 0.0)
    low = None if epsilon is None else 1 - check_at_least("epsilon", epsilon, 0.0)
    ratio = torch.exp(log_ratio(logp.detach(), frozen("old_logp", old_logp, logp), mask))
    weight = ratio.clamp(low, 1 + high)
    flags = {"clip_low_fraction": ratio < (-torch.inf if low is None else low), "clip_high_fraction": ratio > 1 + high}
    return on_tokens(-weight * adv * logp, mask), {name: token_share(f, mask) for name, f in flags.items()}


def sapo(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
         tau_pos: float = 1.0, tau_neg: float = 1.05) -> Losses:
    """SAPO (Gao et al. 2025); logp, old_logp, mask [B, T], advantages [B] or [B, T] -> ([B, T], diagnostics).

    A soft gate in place of the clip: loss_t = -f(r_t) A with f(r) = 4 / tau sigmoid(tau (r - 1)),
    tau = tau_pos where A > 0 and tau_neg elsewhere (the paper's defaults). Its gradient is
    -g_t A grad log pi with the gate g_t = 4 sigma (1 - sigma) r_t, 1 at r = 1, fading as r leaves 1.
    The paper aggregates with ``seq_mean_token_mean``. Diagnostics: gate, the mean g_t over the policy tokens.
    """
    logp, mask = policy_tokens(logp, mask)
    adv = token_advantages(advantages, logp)
    tau = adv.new_full(adv.shape, check_at_least("tau_neg", tau_neg, 0.0, strict=True)).masked_fill(
        adv > 0, check_at_least("tau_pos", tau_pos, 0.0, strict=True))
    ratio = torch.exp(log_ratio(logp, frozen("old_logp", old_logp, logp), mask))
    sigma = torch.sigmoid(tau * (ratio - 1))
    return on_tokens(-4 / tau * sigma * adv, mask), {"gate": token_average(4 * sigma * (1 - sigma) * ratio, mask)}


def binary_divergence(logp: torch.Tensor, old_logp: torch.Tensor, divergence: str) -> torch.Tensor:
    """DPPO's divergence of pi from pi_old on {the sampled token, any other}; logp, old_logp [B, T] -> [B, T].

    binary_tv: |pi - pi_old|; binary_kl: pi_old log(pi_old / pi) + (1 - pi_old) log((1 - pi_old) / (1 - pi)).
    """
    check_mode(divergence, DIVERGENCES, "divergence")
    if divergence == "binary_tv":
        return (logp.exp() - old_logp.exp()).abs()
    rest, old_rest = -torch.expm1(logp), -torch.expm1(old_logp)
    return old_logp.exp() * (old_logp - logp) + torch.xlogy(old_rest, old_rest) - torch.xlogy(old_rest, rest)


def trust_region_mask(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
                      delta: float, delta_high: float | None = None, divergence: str = "binary_tv") -> Losses:
    """DPPO's trust region (Qi et al. 2026); logp, old_logp, mask [B, T], advantages [B] or [B, T] -> (M, diagnostics).

    M [B, T] (0/1, detached) drops a token where the policy has left pi_old by more than the bound in the
    direction its advantage pushes: A > 0, pi > pi_old and D > delta_high, or A < 0, pi < pi_old and
    D > delta, with D the :func:`binary_divergence`. delta_high None is delta. M is 0 off the policy tokens.
    Diagnostics: masked_fraction, the share of the policy tokens dropped.
    """
    logp, mask = policy_tokens(logp, mask)
    adv = token_advantages(advantages, logp)
    low = check_at_least("delta", delta, 0.0)
    high = low if delta_high is None else check_at_least("delta_high", delta_high, 0.0)
    current, old = logp.detach(), on_tokens(frozen("old_logp", old_logp, logp), mask)
    spread = binary_divergence(current, old, divergence)
    dropped = ((adv > 0) & (current > old) & (spread > high)) | ((adv < 0) & (current < old) & (spread > low))
    return on_tokens((~dropped).to(logp.dtype), mask), {"masked_fraction": token_share(dropped, mask)}


def dppo(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
         delta: float, delta_high: float | None = None, divergence: str = "binary_tv") -> Losses:
    """DPPO (Qi et al. 2026); logp, old_logp, mask [B, T], advantages [B] or [B, T] -> ([B, T], diagnostics).

    loss_t = -M_t r_t A with M the :func:`trust_region_mask` in place of PPO's clip: its gradient is
    -M_t r_t A grad log pi. Diagnostics: the mask's masked_fraction.
    """
    keep, diagnostics = trust_region_mask(logp, old_logp, advantages, mask, delta=delta, delta_high=delta_high,
                                          divergence=divergence)
    logp, mask = policy_tokens(logp, mask)
    ratio = torch.exp(log_ratio(logp, frozen("old_logp", old_logp, logp), mask))
    return on_tokens(-keep * ratio * token_advantages(advantages, logp), mask), diagnostics


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) at every position; logits [B, T, V] -> [B, T] (with grad; 0 log 0 = 0)."""
    logits = tensor("logits", logits)
    if logits.dim() != 3:
        raise ValueError(f"logits must be [B, T, V], got shape {tuple(logits.shape)}")
    logp = torch.log_softmax(logits, -1)
    probs = logp.exp()
    return -(probs * torch.where(probs > 0, logp, 0.0)).sum(-1)


def entropy_bonus(coefficient: float, *, logits: torch.Tensor | None = None,
                  entropies: torch.Tensor | None = None) -> torch.Tensor:
    """-coefficient H per token [B, T]: added to a loss, it rewards entropy (Williams and Peng 1991; A3C).

    Pass logits [B, T, V] (H from :func:`entropy_from_logits`) or entropies [B, T], not both.
    """
    if (logits is None) == (entropies is None):
        raise ValueError("pass exactly one of logits [B, T, V] or entropies [B, T]")
    coefficient = check_at_least("coefficient", coefficient, 0.0)
    if logits is not None:
        return -coefficient * entropy_from_logits(logits)
    entropies = tensor("entropies", entropies)
    if entropies.dim() != 2:
        raise ValueError(f"entropies must be [B, T], got shape {tuple(entropies.shape)}")
    return -coefficient * entropies


__all__ = ["DIVERGENCES", "binary_divergence", "cispo", "clipped_surrogate", "dppo", "entropy_bonus",
           "entropy_from_logits", "gmpo", "gspo", "gspo_token", "ppo_clip", "sapo", "trust_region_mask"]
