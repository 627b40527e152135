"""Named losses: the KL placements, pglab's own trainer, and the configurations users run in TRL, verl and OpenRLHF.

Every preset is written with pglab's estimators. A peer preset (``pglab.audit.peers``) has the signature
loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None): off-policy the audit passes
the behaviour's and the proximal policy's log-probs of the sampled tokens, on-policy both are logp.detach().
The pglab presets, ``placement_loss`` and ``advantage_loss`` take the five arguments (REINFORCE: off-policy they
are the uncorrected estimator). Where each peer configuration comes from, and the test that runs the peer's own
code against it, is in docs/audit.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from pglab.audit.peers.common import LossFn, by_group, group_advantages
from pglab.audit.peers.openrlhf import ESTIMATORS, OpenRlhfConfig, openrlhf_loss
from pglab.audit.peers.trl import VLLM_MODES, TrlConfig, trl_grpo_loss, trl_rloo_loss
from pglab.audit.peers.verl import VERL_KL, VERL_MODES, VerlConfig, verl_loss
from pglab.estimators import (
    aggregate_loss,
    discounted_returns,
    kl_estimate,
    leave_one_out,
    reinforce_loss,
)


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
    warning: str | None = None
    """Where the peer's default defeats its own loss: what happens and the setting that avoids it."""


PGLAB = {
    "pglab": ({}, "pglab train-lm defaults through pg_loss: leave-one-out, k1 per token in the reward with "
                  "reward-to-go, token_mean"),
    "pglab-grpo": ({"advantage": "grpo", "kl_in": "loss", "std": "sample"},
                   "pglab train-lm --advantage grpo --kl-in loss --std sample (TRL's GRPO) through pg_loss"),
    "pglab-dr_grpo": ({"advantage": "dr_grpo"}, "pglab train-lm --advantage dr_grpo (centred, constant "
                                                 "aggregation) through pg_loss"),
}
"""The pglab presets: RLConfig overrides, summary."""

TRL_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
"""The TRL loss types with a use_bias_correction_kl=False preset and a '-kl-corrected' one."""
GSPO_RANGES = {"epsilon": 3e-4, "epsilon_high": 4e-4}
"""The GSPO paper's clip ranges (TRL's paper index and verl's GSPO recipe use them)."""
CISPO_WARNING = ("TRL's default epsilon_high (None, so epsilon = 0.2) caps CISPO's weight min(r, epsilon_high) at 0.2, "
                 "below every on-policy ratio: the policy term is 0.2 x REINFORCE's while the KL term is not (an "
                 "effective KL price of 5 beta) and off-policy the ratio is ignored; audited at V=3, L=2, beta 0.1 "
                 "the scaled bias is 0.87 on-policy and 0.97 under noise:0.5, against 0.27 and 0.61 with "
                 "epsilon_high=5.0 (ScaleRL's value)")
CLIP_COV_WARNING = ("Clip-Cov drops a token drawn at random (torch.randperm) among those whose covariance with the "
                    "advantage is in (1, 5), over the whole batch: the loss is neither a function of the batch nor "
                    "separable by group, which the audit's structure checks miss when no probe token falls in that "
                    "band; the report is then one draw per batch (V=3, L=2, beta 0.1: scaled bias 0.470, 0.466, 0.466 "
                    "at torch seeds 0, 1, 2)")


def trl_presets() -> dict[str, Preset]:
    """TRL 1.16's GRPOTrainer loss types, its vLLM importance-sampling modes, and RLOOTrainer."""
    presets = {}
    for loss_type in TRL_LOSS_TYPES:
        for corrected in (False, True):
            name = f"trl-{loss_type}" + ("-kl-corrected" if corrected else "")
            presets[name] = Preset(
                partial(trl_grpo_loss, TrlConfig(loss_type, use_bias_correction_kl=corrected)),
                f"GRPOTrainer loss_type={loss_type!r}, use_bias_correction_kl={corrected}"
                f"{'' if corrected else ' (TRL 1.16 defaults to True: -kl-corrected)'}: group-std advantage, "
                f"PPO clip 0.2, k3{' x ratio' if corrected else ''} in the loss")
    others = {"cispo": (TrlConfig("cispo"), "loss_type='cispo': sg(min(r, epsilon_high)) A log pi, token mean",
                        CISPO_WARNING),
              "sapo": (TrlConfig("sapo"), "loss_type='sapo': the soft gate (tau 1.0 / 1.05), seq-mean-token-mean",
                       None),
              "vespo": (TrlConfig("vespo"), "loss_type='vespo': the gamma weight of the sequence ratio on "
                                            "-A log pi, token mean", None),
              "luspo": (TrlConfig("luspo", importance_sampling_level="sequence", **GSPO_RANGES),
                        "loss_type='luspo', importance_sampling_level='sequence', epsilon 3e-4 / 4e-4: GSPO's loss "
                        "times the reply's length", None),
              "gspo": (TrlConfig("grpo", importance_sampling_level="sequence", **GSPO_RANGES),
                       "loss_type='grpo', importance_sampling_level='sequence', epsilon 3e-4 / 4e-4 (GSPO)", None)}
    for name, (cfg, summary, warning) in others.items():
        presets[f"trl-{name}"] = Preset(partial(trl_grpo_loss, cfg),
                                        f"GRPOTrainer {summary}; use_bias_correction_kl=True", warning)
    for mode in VLLM_MODES:
        presets[f"trl-vllm-{mode}"] = Preset(
            partial(trl_grpo_loss, TrlConfig("dapo", vllm_mode=mode)),
            f"GRPOTrainer loss_type='dapo' with use_vllm: vllm_importance_sampling_mode={mode!r}, clip_max 3.0, "
            "on the sampler/trainer ratio")
    presets["trl-rloo"] = Preset(trl_rloo_loss, "RLOOTrainer: k1 summed into the reward, leave-one-out, PPO clip "
                                                "on the reply's ratio, mean over replies")
    return presets


VERL_LOSSES = {
    "vanilla": ({}, "PPO clip 0.2 and dual clip 3 on GRPO's advantage, token-mean"),
    "gspo": ({"clip_ratio": (3e-4, 4e-4), "loss_agg_mode": "seq-mean-token-mean"},
             "GSPO-token, clip 3e-4 / 4e-4, seq-mean-token-mean (the GSPO recipe)"),
    "sapo": ({}, "the soft gate (tau 1.0 / 1.05), seq-mean-token-mean"),
    "gpg": ({}, "-A log pi on GPG's advantage (centred, times B / non-zero scores), token-mean"),
    "clip_cov": ({}, "PPO clip 0.2, one random token of covariance in (1, 5) loses its gradient, token-mean"),
    "kl_cov": ({}, "the unclipped ratio, 0.1 |log r| on the top-covariance token, token-mean"),
    "geo_mean": ({}, "GMPO, clip 0.2 in log space, mean over replies"),
    "cispo": ({}, "sg(clip(r, 0.8, 1.2)) A log pi, token-mean"),
}
"""verl policy_loss.loss_mode (LOSSES) -> (VerlConfig overrides, what it is at verl's actor defaults)."""

VERL_CORRECTIONS = {
    "decoupled_token_is": (VerlConfig(rollout_is=("token", 2.0)), "token TIS, cap 2"),
    "decoupled_seq_is": (VerlConfig(rollout_is=("sequence", 2.0)), "sequence TIS, cap 2"),
    "decoupled_token_icepop": (VerlConfig(rollout_is=("token", (0.5, 5.0))), "token IcePop, [0.5, 5]"),
    "decoupled_seq_is_rs": (VerlConfig(rollout_is=("sequence", 2.0), rollout_rs=("seq_sum_k1", (0.5, 2.0))),
                            "sequence TIS cap 2, replies rejected outside ratio [0.5, 2]"),
    "decoupled_geo_rs": (VerlConfig(rollout_rs=("seq_mean_k1", (0.999, 1.001))),
                         "replies rejected outside geometric-mean ratio [1/1.001, 1/0.999]"),
    "bypass_ppo_clip": (VerlConfig(bypass="ppo_clip"), "bypass mode: PPO's ratio against the rollout"),
    "bypass_pg_is": (VerlConfig(bypass="pg", rollout_is=("sequence", 2.0)),
                     "bypass mode: REINFORCE times min(pi / pi_rollout of the reply, 2)"),
}
"""verl's RolloutCorrectionConfig factory methods (on the vanilla loss) -> (config, what it does)."""


def verl_presets() -> dict[str, Preset]:
    """verl's GRPO with use_kl_loss: each KL type x aggregation, each policy loss, each rollout correction."""
    presets = {}
    for kl_type, kind in VERL_KL.items():
        for agg_mode in VERL_MODES:
            presets[f"verl-{kl_type}-{agg_mode}"] = Preset(
                partial(verl_loss, VerlConfig(loss_agg_mode=agg_mode, kl_loss_type=kl_type)),
                f"verl GRPO, use_kl_loss with kl_loss_type={kl_type} ({kind}), loss_agg_mode={agg_mode}")
    for loss_mode, (options, summary) in VERL_LOSSES.items():
        presets[f"verl-{loss_mode}"] = Preset(
            partial(verl_loss, VerlConfig(loss_mode=loss_mode, **options)),
            f"verl policy_loss.loss_mode={loss_mode!r}: {summary}; use_kl_loss low_var_kl",
            CLIP_COV_WARNING if loss_mode == "clip_cov" else None)
    for name, (cfg, summary) in VERL_CORRECTIONS.items():
        presets[f"verl-{name}"] = Preset(partial(verl_loss, cfg),
                                         f"verl RolloutCorrectionConfig.{name}(): {summary}; vanilla loss")
    return presets


OPENRLHF_GRPO = OpenRlhfConfig(estimator="group_norm", kl_loss="k3")
"""OpenRLHF's GRPO recipe: group_norm advantage, --algo.kl.use_loss with --algo.kl.estimator k3."""


def openrlhf_presets() -> dict[str, Preset]:
    """OpenRLHF: each critic-free estimator (k1 in the reward), PPO and GSPO with dual clip, the corrections."""
    presets = {}
    for estimator in ESTIMATORS:
        presets[f"openrlhf-{estimator}"] = Preset(
            partial(openrlhf_loss, OpenRlhfConfig(estimator=estimator)),
            f"OpenRLHF defaults (k1 in the reward, reward clip after the baseline, gamma 1, PPO clip 0.2, token "
            f"mean) with --algo.advantage.estimator {estimator}")
    for loss_type in ("ppo", "gspo"):
        cfg = dataclasses.replace(OPENRLHF_GRPO, policy_loss_type=loss_type, dual_clip=3.0)
        presets[f"openrlhf-{loss_type}"] = Preset(
            partial(openrlhf_loss, cfg),
            f"OpenRLHF --actor.policy_loss_type {loss_type} --actor.dual_clip 3, group_norm, KL k3 as a loss")
    for correction in ("tis", "icepop", "seq-mask-tis"):
        cfg = dataclasses.replace(OPENRLHF_GRPO, correction=correction)
        presets[f"openrlhf-{correction}"] = Preset(
            partial(openrlhf_loss, cfg),
            f"OpenRLHF PPO (group_norm, KL k3 as a loss) with the {correction} correction, threshold [0.5, 5]")
    return presets


def _presets() -> dict[str, Preset]:
    presets = {name: Preset(lambda beta, o=options: pglab_trainer(beta, **o), summary)
               for name, (options, summary) in PGLAB.items()}
    return presets | trl_presets() | verl_presets() | openrlhf_presets()


PRESETS: dict[str, Preset] = _presets()
"""Preset name -> Preset; ``pglab audit --list`` prints them."""
FRAMEWORKS = {"pglab": "pglab", "trl": "TRL 1.16.0", "verl": "verl 0.9.1", "openrlhf": "OpenRLHF 0.11.2"}
"""Name prefix -> the framework (and version) its presets reproduce."""


def grouped_presets() -> dict[str, list[str]]:
    """Framework -> its preset names, in PRESETS' order (for ``pglab audit --list``)."""
    groups: dict[str, list[str]] = {label: [] for label in FRAMEWORKS.values()}
    for name in PRESETS:
        groups[FRAMEWORKS[name.split("-")[0]]].append(name)
    return groups


def get_preset(name: str, beta: float) -> LossFn:
    """The loss of preset ``name`` at KL coefficient ``beta``; ValueError listing the names otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; `pglab audit --list` shows: {', '.join(PRESETS)}")
    return PRESETS[name].build(beta)
