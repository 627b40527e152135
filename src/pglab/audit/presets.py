"""Named losses: the KL placements, and the configurations users run in TRL, verl and OpenRLHF.

Every preset is written with pglab's estimators and has the audit's signature
loss_fn(logp, ref_logp, rewards, mask, group) -> scalar. The batch is on-policy (the sampling
policy is the current one), so a clipped importance ratio exp(logp - logp_old) is 1 with gradient
grad logp: the policy term of PPO-style losses is ``reinforce_loss`` with the same aggregation.
Where each peer configuration comes from (file and option) is in docs/audit.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from pglab.estimators import (
    aggregate_loss,
    discounted_returns,
    kl_estimate,
    kl_shaped_rewards,
    leave_one_out,
    masked_mean,
    reinforce_loss,
)
from pglab.estimators.advantages import advantages

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def by_group(values: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """values [B] -> [G, K]: the rows must come group by group, K rows each (as the audit lays them out)."""
    counts = torch.bincount(group)
    k = int(counts[0])
    if (counts != k).any() or not torch.equal(group, torch.arange(len(counts)).repeat_interleave(k)):
        raise ValueError("group must list the rows group by group with the same count each, e.g. [0, 0, 1, 1]")
    return values.reshape(len(counts), k)


def ratio(logp: torch.Tensor) -> torch.Tensor:
    """The on-policy importance ratio pi / pi_old = exp(logp - logp.detach()): 1, with gradient grad logp."""
    return torch.exp(logp - logp.detach())


def kl_term(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str, corrected: bool = False) -> torch.Tensor:
    """Per-token KL estimate [B, T] with its gradient; ``corrected`` multiplies it by the importance ratio."""
    k = kl_estimate(logp, ref_logp, kind)
    return k * ratio(logp) if corrected else k


def placement_loss(kind: str, place: str, beta: float, *, reward_to_go: bool = False, corrected: bool = False,
                   mode: str = "seq_mean_token_sum") -> LossFn:
    """REINFORCE with a leave-one-out baseline on the score and the KL estimate ``kind`` in the reward or the loss.

    place="reward": per-token rewards -beta k_t (detached) plus the centred score on the last token;
    each token is weighted by its reward-to-go, or by the whole return. place="loss": beta k_t is
    added to the loss with its gradient (``corrected``: times the importance ratio).
    """
    if place not in ("reward", "loss"):
        raise ValueError(f"place must be 'reward' or 'loss', got {place!r}")

    def loss_fn(logp, ref_logp, rewards, mask, group):
        score = leave_one_out(by_group(rewards, group)).reshape(-1)
        if place == "loss":
            policy = reinforce_loss(logp, score, mask, mode)
            return policy + beta * aggregate_loss(kl_term(logp, ref_logp, kind, corrected) * mask, mask, mode)
        penalty = -beta * kl_estimate(logp.detach(), ref_logp, kind) * mask
        last = mask * (mask.cumsum(-1) == mask.sum(-1, keepdim=True))
        per_token = penalty + score[:, None] * last
        advantages = discounted_returns(per_token, 1.0, mask=mask) if reward_to_go else per_token.sum(-1)
        return reinforce_loss(logp, advantages, mask, mode)

    return loss_fn


def group_advantages(rewards: torch.Tensor, group: torch.Tensor, kind: str, **options) -> torch.Tensor:
    """``pglab.estimators.advantages`` (kind reinforce | rloo | grpo | dr_grpo) over the audit's groups; [B] -> [B]."""
    k = by_group(rewards, group).shape[1]
    return advantages(rewards, kind, k, **options)


def advantage_loss(kind: str, mode: str, *, beta: float = 0.0, kl: str = "k3", norm_const: float | None = None,
                   **options) -> LossFn:
    """A group advantage (``pglab.estimators.advantages`` kind and options) with an aggregation mode.

    The advantage weighs every token of its reply; ``beta`` > 0 adds the KL estimate ``kl`` to the loss.
    ``norm_const`` is for mode "constant" (default: B times the batch's T).
    """
    def loss_fn(logp, ref_logp, rewards, mask, group):
        adv = group_advantages(rewards, group, kind, **options)
        const = (norm_const or float(mask.numel())) if mode == "constant" else None
        per_token = -adv[:, None] * logp
        if beta:
            per_token = per_token + beta * kl_estimate(logp, ref_logp, kl)
        return aggregate_loss(per_token, mask, mode, const)

    return loss_fn


TRL_LOSS_TYPES = {"grpo": "seq_mean_token_mean", "bnpo": "token_mean", "dr_grpo": "constant", "dapo": "token_mean"}
"""TRL GRPOTrainer loss_type -> pglab aggregation mode (dapo's global token count is bnpo's on one process)."""


def trl_grpo(loss_type: str, beta: float, bias_correction: bool = False) -> LossFn:
    """TRL GRPOTrainer: (r - group mean) / (sample std + 1e-4), k3 (times the ratio if corrected) in the loss."""
    mode = TRL_LOSS_TYPES[loss_type]

    def loss_fn(logp, ref_logp, rewards, mask, group):
        adv = group_advantages(rewards, group, "grpo", unbiased=True, eps=1e-4)
        per_token = -adv[:, None] * ratio(logp)
        if beta:
            per_token = per_token + beta * kl_term(logp, ref_logp, "k3", bias_correction)
        const = float(mask.shape[0] * mask.shape[1]) if mode == "constant" else None  # B * max_completion_length
        return aggregate_loss(per_token, mask, mode, const)

    return loss_fn


def trl_rloo(beta: float) -> LossFn:
    """TRL RLOOTrainer: score - beta * sum of k1, leave-one-out, a sequence-level ratio per reply, mean over replies."""
    def loss_fn(logp, ref_logp, rewards, mask, group):
        kl = (kl_estimate(logp.detach(), ref_logp, "k1") * mask).sum(-1)
        adv = group_advantages(rewards - beta * kl, group, "rloo")
        return reinforce_loss(logp, adv, mask, "seq_mean_token_sum")

    return loss_fn


VERL_KL = {"low_var_kl": "k3", "k1": "k1", "mse": "k2"}
"""verl actor.kl_loss_type -> pglab KL estimator."""
VERL_MODES = {"token-mean": "token_mean", "seq-mean-token-sum": "seq_mean_token_sum",
              "seq-mean-token-mean": "seq_mean_token_mean", "seq-mean-token-sum-norm": "constant"}
"""verl actor.loss_agg_mode -> pglab aggregation mode (sum-norm divides the token sum by the response length)."""


def verl_grpo(kl_type: str, agg_mode: str, beta: float) -> LossFn:
    """verl GRPO with use_kl_loss: (r - mean) / (std + 1e-6), policy loss and kl loss both aggregated by agg_mode."""
    mode, kind = VERL_MODES[agg_mode], VERL_KL[kl_type]

    def loss_fn(logp, ref_logp, rewards, mask, group):
        adv = group_advantages(rewards, group, "grpo", unbiased=True, eps=1e-6)
        const = float(mask.shape[1]) if mode == "constant" else None
        return (reinforce_loss(logp, adv, mask, mode, const)
                + beta * aggregate_loss(kl_estimate(logp, ref_logp, kind), mask, mode, const))

    return loss_fn


OPENRLHF = {"reinforce": ("reinforce", {}, True), "rloo": ("rloo", {}, False),
            "group_norm": ("grpo", {"unbiased": True, "eps": 1e-9}, False)}
"""OpenRLHF algo.advantage.estimator -> (pglab advantage kind, its options, whether the returns are whitened)."""


def openrlhf(estimator: str, beta: float) -> LossFn:
    """OpenRLHF: the score (clipped to [-10, 10], then rloo / group_norm on it) on the last token, -beta k1 per
    token, reward-to-go (gamma 1); "reinforce" whitens the returns over the batch's tokens; token-mean loss."""
    kind, options, whiten = OPENRLHF[estimator]

    def loss_fn(logp, ref_logp, rewards, mask, group):
        score = group_advantages(rewards.clamp(-10.0, 10.0), group, kind, **options)
        returns = discounted_returns(kl_shaped_rewards(score, logp, ref_logp, mask, beta), 1.0, mask=mask)
        if whiten:
            centred = returns - masked_mean(returns, mask)
            returns = centred * masked_mean(centred.pow(2), mask).clamp(min=1e-8).rsqrt()
        return reinforce_loss(logp, returns, mask, "token_mean")

    return loss_fn


def pglab_trainer(beta: float, *, advantage: str = "rloo", kl_in: str = "reward", std: str = "population",
                  aggregation: str | None = None) -> LossFn:
    """pglab's own loss, ``trainers.update.pg_loss`` with train-lm's settings (RLConfig), on the audit's batch.

    The batch becomes a TokenBatch (a prompt token, then the reply) and the audit's log-probabilities
    go into pg_loss as the scored ones, behind the prompt's 0, as pg_update lays them out. Clipping
    is not part of the loss: the audit measures the gradient the clip would scale.
    """
    from pglab.batch import POLICY, PROMPT, TokenBatch
    from pglab.trainers.lm.config import RLConfig
    from pglab.trainers.lm.session import update_spec
    from pglab.trainers.update import pg_loss, reply_advantages

    cfg = RLConfig(advantage=advantage, kl_in=kl_in, std=std, aggregation=aggregation, beta=beta)
    cfg.validate()

    def loss_fn(logp, ref_logp, rewards, mask, group):
        rows, width = logp.shape
        spec = dataclasses.replace(update_spec(cfg), group_size=int(torch.bincount(group)[0]),
                                   norm_const=float(rows * width))
        zero = torch.zeros(rows, 1, dtype=logp.dtype)
        ids = torch.cat([2 + torch.arange(rows)[:, None], torch.zeros(rows, width, dtype=torch.long)], 1)
        action = torch.cat([zero, mask], 1)
        owner = torch.cat([torch.full((rows, 1), PROMPT), torch.where(mask.bool(), POLICY, 0)], 1)
        batch = TokenBatch(ids=ids, attention_mask=torch.cat([zero + 1, mask], 1), action_mask=action, owner=owner,
                           group=group, rewards=rewards, ref_logp=torch.cat([zero, ref_logp], 1))
        scored = torch.where(action.bool(), torch.cat([zero, logp], 1), 0.0)
        return pg_loss(scored, batch, reply_advantages(rewards.to(logp.dtype), spec), spec)[0]

    return loss_fn


@dataclass(frozen=True)
class Preset:
    build: Callable[[float], LossFn]
    """beta -> the loss function."""
    summary: str
    """One line: what the configuration is."""


PGLAB = {
    "pglab": ({}, "pglab train-lm defaults through pg_loss: leave-one-out, k1 per token in the reward with "
                  "reward-to-go, token_mean"),
    "pglab-grpo": ({"advantage": "grpo", "kl_in": "loss", "std": "sample"},
                   "pglab train-lm --advantage grpo --kl-in loss --std sample (TRL's GRPO) through pg_loss"),
    "pglab-dr_grpo": ({"advantage": "dr_grpo"}, "pglab train-lm --advantage dr_grpo (centred, constant "
                                                 "aggregation) through pg_loss"),
}
"""The pglab presets: RLConfig overrides, summary."""


def _presets() -> dict[str, Preset]:
    presets = {name: Preset(lambda beta, o=options: pglab_trainer(beta, **o), summary)
               for name, (options, summary) in PGLAB.items()}
    for loss_type, mode in TRL_LOSS_TYPES.items():
        for corrected in (False, True):
            name = f"trl-{loss_type}" + ("-kl-corrected" if corrected else "")
            presets[name] = Preset(
                lambda beta, t=loss_type, c=corrected: trl_grpo(t, beta, c),
                f"TRL GRPOTrainer loss_type={loss_type!r}, use_bias_correction_kl={corrected}: group-std advantage, "
                f"k3{' x ratio' if corrected else ''} in the loss, {mode}")
    presets["trl-rloo"] = Preset(trl_rloo, "TRL RLOOTrainer: k1 summed into the reward, leave-one-out, "
                                           "sequence-level ratio, mean over replies")
    for kl_type, kind in VERL_KL.items():
        for agg_mode in VERL_MODES:
            presets[f"verl-{kl_type}-{agg_mode}"] = Preset(
                lambda beta, k=kl_type, a=agg_mode: verl_grpo(k, a, beta),
                f"verl GRPO, use_kl_loss with kl_loss_type={kl_type} ({kind}), loss_agg_mode={agg_mode}")
    for estimator in OPENRLHF:
        presets[f"openrlhf-{estimator}"] = Preset(
            lambda beta, e=estimator: openrlhf(e, beta),
            f"OpenRLHF defaults (k1 in the reward, gamma 1, token-level loss) with advantage.estimator={estimator}")
    return presets


PRESETS: dict[str, Preset] = _presets()
"""Preset name -> Preset; ``pglab audit --list`` prints them."""


def get_preset(name: str, beta: float) -> LossFn:
    """The loss of preset ``name`` at KL coefficient ``beta``; ValueError listing the names otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; `pglab audit --list` shows: {', '.join(PRESETS)}")
    return PRESETS[name].build(beta)
