"""Evaluation of an LM policy: score sampled replies under the policy and the reference, the metrics of
llm-ch6 §6.12 (reward, exact KL, entropy, reference perplexity, distinct-n), pass@1 and pass@k with their
standard errors over prompts, the worked example, the figure."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from pglab.estimators import discounted_returns, kl_shaped_rewards
from pglab.models.policy import HFPolicy
from pglab.sampling.replies import decode_replies
from pglab.stats import mean_best_at_k, pass_summary


def distinct_n(texts: list[str], n: int) -> float:
    """Distinct n-grams of whitespace words over all n-grams in ``texts`` (0 when there is none)."""
    grams = [tuple(words[i:i + n]) for words in (t.split() for t in texts) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


@dataclass
class ScoredReplies:
    """Sampled replies with everything the evaluation and the worked example read off them."""

    ids: torch.Tensor
    """[B, T] prompt + reply."""
    mask: torch.Tensor
    """[B, T] action mask."""
    texts: list[str]
    """Prompt + reply, decoded."""
    replies: list[str]
    """The reply alone, decoded."""
    scores: torch.Tensor
    """[B] reward of each text."""
    logp: torch.Tensor
    """[B, T] policy log-probs of the sampled tokens."""
    ref_logp: torch.Tensor
    """[B, T] reference log-probs of the same tokens."""
    exact_kl: torch.Tensor
    """[B] sum over reply positions of the exact per-position KL(pi || ref) over the vocabulary pi can sample."""
    entropy: torch.Tensor
    """[B] sum over reply positions of the policy's entropy."""


def support_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """KL(p || q) over the last dim from log-probabilities [..., V]; ids where p is 0 (log -inf) add nothing."""
    p = logp.exp()
    return torch.where(p > 0, p * (logp - ref_logp), 0.0).sum(-1)


@torch.no_grad()
def score_replies(policy: HFPolicy, reference: Callable[[], Any], tokenizer: Any, ids: torch.Tensor,
                  mask: torch.Tensor, prompt_length: int, reward: Callable, prompt_mask: torch.Tensor | None = None,
                  completions: Callable[[list[str]], Any] | None = None, chunk: int = 32) -> ScoredReplies:
    """Teacher-force ids [B, T] through the policy and the reference (``chunk`` rows at a time) and score them.

    ``policy`` is the sampled policy (temperature, banned ids, top-p); ``reference()`` is a context
    giving the reference HFPolicy (same temperature and banned ids, no nucleus). The exact KL and
    the entropy are over the vocabulary the policy can sample. ``completions(replies)``, when given,
    builds what ``reward.score`` takes; else ``reward`` gets prompt + reply texts.
    """
    attention = mask.clone()
    attention[:, :prompt_length] = 1 if prompt_mask is None else prompt_mask
    parts: dict[str, list[torch.Tensor]] = {"logp": [], "ref_logp": [], "kl": [], "entropy": []}
    for i in range(0, ids.shape[0], chunk):
        rows, m = ids[i:i + chunk], mask[i:i + chunk, prompt_length:].to(torch.float64)
        extra = {"attention_mask": attention[i:i + chunk]} if prompt_mask is not None else {}
        logq = torch.log_softmax(policy.logits(rows, prompt_length, **extra).double(), -1)
        with reference() as ref:
            ref_logq = torch.log_softmax(ref.logits(rows, prompt_length, **extra).double(), -1)
        picked = rows[:, prompt_length:, None]
        on = mask[i:i + chunk].bool()
        parts["logp"].append(torch.where(on, F.pad(logq.gather(-1, picked)[..., 0], (prompt_length, 0)), 0.0))
        parts["ref_logp"].append(torch.where(on, F.pad(ref_logq.gather(-1, picked)[..., 0], (prompt_length, 0)), 0.0))
        parts["kl"].append((support_kl(logq, ref_logq) * m).sum(-1))
        parts["entropy"].append((-support_kl(logq, torch.zeros_like(logq)) * m).sum(-1))
    texts, replies = decode_replies(tokenizer, ids, mask, prompt_length)
    scores = reward.score(completions(replies)) if completions is not None else reward(texts)
    cat = {k: torch.cat(v) for k, v in parts.items()}
    return ScoredReplies(ids, mask, texts, replies, scores, cat["logp"], cat["ref_logp"], cat["kl"], cat["entropy"])


def pass_metrics(scores: torch.Tensor, generations: int, k: int) -> dict[str, float]:
    """pass@1 and pass@k (a reply passes when its score is positive) and best@k of the graded scores, over prompts
    of ``generations`` consecutive replies each; scores [P * generations]. Each mean comes with its standard error
    over the prompts; k is capped at ``generations``."""
    table = scores.detach().to(torch.float64).cpu().numpy().reshape(-1, generations)
    k = min(k, generations)
    passed = pass_summary(table > 0, k)
    best, best_se = mean_best_at_k(table, k)
    return {**{name: passed[name] for name in ("k", "pass_at_1", "pass_at_1_se", "pass_at_k", "pass_at_k_se")},
            "best_at_k": best, "best_at_k_se": best_se}


def reply_metrics(r: ScoredReplies, reward: Any, generations: int | None = None, k: int = 1) -> dict:
    """Means (and standard errors) over the replies of a ScoredReplies; with ``generations`` (replies per prompt,
    rows by prompt) also :func:`pass_metrics` at ``k``.

    ``kl_gap_se`` is the standard error of the mean of k1 - exact KL, the one to test k1 against the exact KL with:
    the two are correlated along a reply's path (the exact KL of a later position depends on the tokens sampled
    before it), so the gap's spread is not that of k1 alone (on lm-kl's beta = 0.05 runs about 1.4 times larger:
    docs/results/lm-kl-k1-gap/). With ``generations`` it is taken over prompt means, as replies of one prompt may
    be correlated.
    """
    n = len(r.texts)
    tokens = r.mask.sum().double()
    k1 = (r.logp - r.ref_logp).sum(-1)
    se = lambda x: float(x.std() / math.sqrt(n)) if n > 1 else math.nan  # noqa: E731
    gap = k1 - r.exact_kl
    if generations and n % generations == 0 and n // generations > 1:
        prompts = gap.reshape(-1, generations).mean(-1)
        gap_se = float(prompts.std() / math.sqrt(len(prompts)))
    else:
        gap_se = se(gap)
    positive = reward.positive_probability(r.texts) if hasattr(reward, "positive_probability") else None
    return {"reward": float(r.scores.mean()), "reward_se": se(r.scores),
            "p_positive": float(positive.mean()) if positive is not None else None,
            "kl_exact": float(r.exact_kl.mean()), "kl_exact_se": se(r.exact_kl),
            "kl_k1": float(k1.mean()), "kl_k1_se": se(k1), "kl_gap_se": gap_se,
            "entropy": float(r.entropy.sum() / tokens),
            "ref_perplexity": float(torch.exp(-r.ref_logp.sum() / tokens)),
            "distinct_1": distinct_n(r.replies, 1), "distinct_2": distinct_n(r.replies, 2), "replies": n,
            **(pass_metrics(r.scores, generations, k) if generations else {})}


def worked_example(r: ScoredReplies, row: int, beta: float, tokenizer: Any,
                   prompt_length: int) -> tuple[list[dict], dict]:
    """The token-by-token table of llm-ch6 §6.12 for reply ``row``: log pi, log ref, log-ratio, r_t, G_t.

    Returns (rows, check) where check holds R, the sum of log-ratios, R - beta * sum and G_0:
    the last two agree (the shaped rewards sum to the KL-penalised score).
    """
    m = r.mask[row:row + 1].double()
    logp, ref = r.logp[row:row + 1].double(), r.ref_logp[row:row + 1].double()
    rewards = kl_shaped_rewards(r.scores[row:row + 1].to(m.device, torch.float64), logp, ref, m, beta)
    returns = discounted_returns(rewards, 1.0, mask=m)
    positions = m[0].nonzero().flatten().tolist()
    rows = [{"t": t - prompt_length, "token": tokenizer.decode([int(r.ids[row, t])]), "log_pi": float(logp[0, t]),
             "log_ref": float(ref[0, t]), "log_ratio": float(logp[0, t] - ref[0, t]), "r_t": float(rewards[0, t]),
             "G_t": float(returns[0, t])} for t in positions]
    ratio_sum = float(((logp - ref) * m).sum())
    prompt = tokenizer.decode(r.ids[row, :prompt_length].tolist(), skip_special_tokens=True)
    check = {"prompt": prompt, "R": float(r.scores[row]),
             "beta": beta, "sum_log_ratio": ratio_sum, "R_minus_beta_sum": float(r.scores[row]) - beta * ratio_sum,
             "G_0": rows[0]["G_t"], "sum_r_t": float(rewards.sum())}
    gaps = (check["G_0"] - check["R_minus_beta_sum"], check["sum_r_t"] - check["G_0"])
    check["sums_agree"] = max(abs(g) for g in gaps) < 1e-9
    return rows, check


def curves_figure(runs: dict[str, Any]):
    """Reward, exact KL, entropy per token and distinct-1 at each evaluation, one line per run."""
    from pglab.reporting.plots import new_figure

    fig, axes = new_figure(2, 2, figsize=(10, 7))
    panels = (("reward", "held-out reward"), ("kl_exact", "exact KL to the reference (nats / reply)"),
              ("entropy", "entropy (nats / token)"), ("distinct_1", "distinct-1"))
    for ax, (key, title) in zip(axes.flat, panels):
        for label, run in runs.items():
            ax.plot([e["step"] for e in run.evals], [e[key] for e in run.evals], marker="o", label=label)
        ax.set_title(title)
        ax.set_xlabel("step")
    axes.flat[0].legend()
    return fig


__all__ = ["ScoredReplies", "curves_figure", "distinct_n", "pass_metrics", "reply_metrics", "score_replies",
           "worked_example"]
