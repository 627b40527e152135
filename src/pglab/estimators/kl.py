"""The KL penalty: per-token and per-reply estimators, the exact value from logits, and KL-shaped rewards."""

from __future__ import annotations

import torch

from pglab.estimators._tokens import frozen, log_ratio, policy_tokens
from pglab.estimators._validate import as_mask, check_finite, check_mode, check_same_shape, tensor

KINDS = ("k1", "k2", "k3", "k1+", "k3+")
"""KL estimators: Schulman's k1, k2, k3, and verl's straight-through forms (the value of k1 or k3, k2's gradient)."""


def estimate_from_log_ratio(log_ratios: torch.Tensor, kind: str) -> torch.Tensor:
    """The estimator ``kind`` of KL(pi || ref) from l = log pi - log ref, elementwise (see :func:`kl_estimate`)."""
    if kind == "k1":
        return log_ratios
    if kind == "k2":
        return 0.5 * log_ratios.pow(2)
    if kind == "k3":
        return torch.expm1(-log_ratios) + log_ratios
    k2 = estimate_from_log_ratio(log_ratios, "k2")
    return k2 + (estimate_from_log_ratio(log_ratios, kind[:-1]) - k2).detach()


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k1") -> torch.Tensor:
    """Per-token estimate of KL(pi || ref) from sampled-token log-probs; logp, ref_logp [B, T] -> [B, T].

    With log-ratio l = log pi - log ref at a token sampled from pi:
    k1 = l (unbiased, can be negative), k2 = l^2 / 2 (biased, low variance),
    k3 = exp(-l) - 1 + l (unbiased and never negative), written expm1(-l) + l: exact to rounding near
    l = 0, where exp(-l) - 1 cancels, and free of the overflow of the probability ratio pi_ref / pi
    when both probabilities underflow (Schulman 2020, "Approximating KL divergence").
    k1+ and k3+ (verl): the value of k1 or k3 with k2's gradient, k2 + sg(k - k2).
    """
    check_mode(kind, KINDS, "KL estimator kind")
    logp, ref_logp = tensor("logp", logp), tensor("ref_logp", ref_logp)
    check_same_shape("ref_logp", ref_logp, "logp", logp)
    check_finite("logp", logp)
    check_finite("ref_logp", ref_logp)
    return estimate_from_log_ratio(logp - ref_logp, kind)


def sequence_kl(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, kind: str = "k1") -> torch.Tensor:
    """Per-reply estimate of KL(pi || ref) over whole replies; logp, ref_logp, mask [B, T] -> [B].

    The estimator ``kind`` of :func:`kl_estimate` applied once to the reply's log-ratio
    L_i = sum_t (log pi - log ref) over its policy tokens: k1 is the token k1 summed; k3 of L_i is unbiased
    for the sequence KL and never negative, like the token k3 summed, with another variance and gradient.
    ref_logp is detached. Use it in the reward (score - beta KL_i) or in the loss (beta mean_i KL_i).
    """
    check_mode(kind, KINDS, "KL estimator kind")
    logp, mask = policy_tokens(logp, mask)
    return estimate_from_log_ratio(log_ratio(logp, frozen("ref_logp", ref_logp, logp), mask).sum(-1), kind)


def ratio_corrected_kl(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor,
                       kind: str = "k3") -> torch.Tensor:
    """(pi / pi_old) times the estimator ``kind`` per token, for tokens sampled from pi_old; [B, T] each -> [B, T].

    E_old[(pi / pi_old) k] = E_pi[k]: DeepSeek-V3.2's unbiased KL estimate, TRL's use_bias_correction_kl.
    The ratio keeps its gradient (old_logp and ref_logp are detached): on-policy, k3 corrected has the
    gradient l grad log pi of k2, whose expectation is the gradient of the per-token KL(pi || ref).
    """
    logp = tensor("logp", logp)
    old_logp, ref_logp = frozen("old_logp", old_logp, logp), frozen("ref_logp", ref_logp, logp)
    check_finite("old_logp", old_logp)
    return torch.exp(logp - old_logp) * kl_estimate(logp, ref_logp, kind)


def exact_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """KL(softmax(logits) || softmax(ref_logits)) over the last (vocabulary) dim; [..., V] -> [...]."""
    logits, ref_logits = tensor("logits", logits), tensor("ref_logits", ref_logits)
    check_same_shape("ref_logits", ref_logits, "logits", logits)
    check_finite("logits", logits)
    check_finite("ref_logits", ref_logits)
    logp = torch.log_softmax(logits, -1)
    ref = torch.log_softmax(ref_logits, -1)
    return (logp.exp() * (logp - ref)).sum(-1)


def kl_shaped_rewards(
    score: torch.Tensor,
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    mask: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Per-token rewards -beta * (log pi - log ref), plus ``score`` on each row's last policy token.

    score [B]; logp, ref_logp, mask [B, T] -> rewards [B, T] (detached, 0 on mask-0 positions).
    Summed over a row they give score - beta * sum of log-ratios (the k1 estimate of the KL).
    """
    score, logp, ref_logp, mask = (tensor(n, v) for n, v in
                                   (("score", score), ("logp", logp), ("ref_logp", ref_logp), ("mask", mask)))
    check_finite("score", score)
    check_finite("logp", logp)
    check_finite("ref_logp", ref_logp)
    check_same_shape("ref_logp", ref_logp, "logp", logp)
    mask = as_mask("mask", mask, "logp", logp)
    if score.shape != logp.shape[:1]:
        raise ValueError(f"score must be [B] with B={logp.shape[0]}, got shape {tuple(score.shape)}")
    if (mask.sum(-1) == 0).any():
        raise ValueError("a row of mask has no policy token: there is nowhere to put its score")
    rewards = -beta * (logp - ref_logp).detach() * mask
    positions = torch.arange(mask.shape[-1], device=mask.device)
    last = (mask * positions).argmax(-1)
    rewards[torch.arange(len(score)), last] += score.to(rewards.dtype)
    return rewards
