"""The KL penalty: per-token estimators, the exact value from logits, and KL-shaped rewards."""

from __future__ import annotations

import torch

from pglab.estimators._validate import as_mask, check_finite, check_mode, check_same_shape, tensor

KINDS = ("k1", "k2", "k3")


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k1") -> torch.Tensor:
    """Per-token estimate of KL(pi || ref) from sampled-token log-probs; logp, ref_logp [B, T] -> [B, T].

    With log-ratio l = log pi - log ref at a token sampled from pi:
    k1 = l (unbiased, can be negative), k2 = l^2 / 2 (biased, low variance),
    k3 = exp(-l) - 1 + l (unbiased and never negative).
    """
    check_mode(kind, KINDS, "KL estimator kind")
    logp, ref_logp = tensor("logp", logp), tensor("ref_logp", ref_logp)
    check_same_shape("ref_logp", ref_logp, "logp", logp)
    check_finite("logp", logp)
    check_finite("ref_logp", ref_logp)
    log_ratio = logp - ref_logp
    if kind == "k1":
        return log_ratio
    if kind == "k2":
        return 0.5 * log_ratio.pow(2)
    return torch.expm1(-log_ratio) + log_ratio


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
