"""The framework's own loss and advantage code as an audit loss, and the pglab preset its config documents.

``framework_loss(config)`` is loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp, old_logp) (the audit's
signature) that runs the installed framework's code: TRL's GRPOTrainer/RLOOTrainer ``_compute_loss`` on an instance
made without __init__ and its advantage block of ``_generate_and_score_completions`` (run from its source, as the
vLLM importance-ratio block); verl's advantage estimator, rollout correction, policy loss, kl_penalty and agg_loss;
OpenRLHF's experience maker's advantages, PolicyLoss and compute_approx_kl. What pglab writes is only the plumbing the
frameworks' trainers do between those calls. The audit's group size replaces num_generations (TRL),
rollout_n (verl) and n_samples_per_prompt (OpenRLHF); the batch's width replaces max_completion_length. The audited
batch is one optimizer step's whole batch on one process: TRL runs with steps_per_generation 1 and one accumulation
step, because how the step is split (accumulation, generation batches, processes) is the trainer level's check
(``pglab.conform.trl_trainer``).

``documented_preset(config)`` is (the pglab preset config its settings describe, its registered name or None), or
(None, the settings no preset models): the formula the framework documents, written with pglab's estimators.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import textwrap
import types
from collections import defaultdict
from functools import lru_cache, partial
from typing import Any

import numpy as np
import torch

from pglab.audit.peers.common import LossFn, by_group, sampled
from pglab.audit.peers.openrlhf import CORRECTIONS, ESTIMATORS, OpenRlhfConfig, openrlhf_loss
from pglab.audit.peers.trl import TRL_MODES, VLLM_MODES, TrlConfig, trl_grpo_loss, trl_rloo_loss
from pglab.audit.peers.verl import LOSSES, VERL_KL, VERL_MODES, VerlConfig, verl_loss
from pglab.audit.presets import PRESETS, VERL_CORRECTIONS
from pglab.conform.configs import FrameworkConfig
from pglab.runtime.options import SettingsError


@lru_cache(maxsize=16)
def source_block(function, start: str, end: str):
    """The compiled lines of ``function``'s source from the line holding ``start`` up to the line holding ``end``."""
    source = inspect.getsource(function)
    begin = source.rindex("\n", 0, source.index(start)) + 1
    stop = source.rindex("\n", 0, source.index(end, begin)) + 1
    return compile(textwrap.dedent(source[begin:stop]), f"<{function.__qualname__}>", "exec")


def run_block(function, start: str, end: str, scope: dict) -> dict:
    """Run ``source_block(function, start, end)`` in ``scope`` (the framework's own lines, unchanged)."""
    exec(source_block(function, start, end), scope)
    return scope


class OneProcess:
    """What the TRL losses ask of accelerate on one process."""

    num_processes = 1

    @staticmethod
    def gather(x):
        return x

    @staticmethod
    def reduce(x, reduction="sum"):
        return x

    gather_for_metrics = gather


def trl_trainer(trainer_class, args, logp: torch.Tensor, group_size: int):
    """An instance whose _compute_loss and advantage block read ``args`` as __init__ sets them, scoring ``logp``."""
    trainer = object.__new__(trainer_class)
    trainer.__dict__.update(
        args=args, loss_type=getattr(args, "loss_type", None), beta=args.beta, epsilon_low=args.epsilon,
        epsilon_high=args.epsilon if args.epsilon_high is None else args.epsilon_high,
        importance_sampling_level=getattr(args, "importance_sampling_level", None),
        use_vllm=args.use_vllm, top_entropy_quantile=getattr(args, "top_entropy_quantile", 1.0),
        off_policy_mask_threshold=getattr(args, "off_policy_mask_threshold", None),
        vllm_importance_sampling_correction=getattr(args, "vllm_importance_sampling_correction", False),
        vllm_importance_sampling_mode=getattr(args, "vllm_importance_sampling_mode", None),
        vllm_importance_sampling_clip_max=getattr(args, "vllm_importance_sampling_clip_max", None),
        vllm_importance_sampling_clip_min=getattr(args, "vllm_importance_sampling_clip_min", None),
        max_completion_length=logp.shape[1], model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, accelerator=OneProcess(), num_generations=group_size,
        scale_rewards=getattr(args, "scale_rewards", None), normalize_advantages=getattr(args,
                                                                                         "normalize_advantages", None),
        multi_objective_aggregation=getattr(args, "multi_objective_aggregation", "sum_then_normalize"),
        reward_weights=torch.ones(1), reward_clip_range=getattr(args, "reward_clip_range", None),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)}, _entropy_bonus_enabled=False,
        aux_loss_enabled=False)
    extra = (None,) * (logps_outputs(trainer_class._get_per_token_logps_and_entropies) - 2)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (logp, torch.zeros_like(logp), *extra)
    return trainer


@lru_cache(maxsize=16)
def logps_outputs(method) -> int:
    """How many values ``method`` (_get_per_token_logps_and_entropies) returns: 3 in recent TRL, 2 in 1.0."""
    returns = [line.strip() for line in inspect.getsource(method).splitlines() if line.strip().startswith("return ")]
    return returns[-1].count(",") + 1


ADVANTAGE_STARTS = ("unscorable_mask = torch.isnan(rewards_per_func)",
                    "num_generations = self.num_generations if mode")
"""The first line of the advantage block in _generate_and_score_completions: TRL 1.6 on (after the unscorable
rows' comment), then older releases (from the group size)."""


@lru_cache(maxsize=16)
def advantage_start(function) -> str:
    """The first of ADVANTAGE_STARTS in ``function``'s source."""
    source = inspect.getsource(function)
    found = [start for start in ADVANTAGE_STARTS if start in source]
    if not found:
        raise ValueError(f"{function.__qualname__} has none of {ADVANTAGE_STARTS}: this TRL's advantage block is "
                         "not recognised; use TRL 0.29 or later")
    return found[0]


def trl_advantages(trl, trainer, rewards, old, ref_logp, mask) -> torch.Tensor:
    """The advantage block of the trainer's _generate_and_score_completions, run from its source: [B]."""
    scope = {"self": trainer, "torch": torch, "nanstd": trl.utils.nanstd, "gather": lambda x: x, "device": "cpu",
             "rewards_per_func": rewards[:, None].clone(), "num_generations": trainer.num_generations,
             "old_per_token_logps": old, "ref_per_token_logps": ref_logp, "completion_mask": mask, "mode": "train"}
    function = type(trainer)._generate_and_score_completions
    run_block(function, advantage_start(function), "# Slice to keep only the local part of the data", scope)
    return scope["advantages"]


def trl_loss(config: FrameworkConfig) -> LossFn:
    """GRPOTrainer or RLOOTrainer: TRL's advantages and _compute_loss."""
    trl, args = config.modules, copy.copy(config.native)
    args.steps_per_generation = 1     # one optimizer step's whole batch: the accumulation is the trainer level's
    trainer_class = trl.rloo.RLOOTrainer if config.trainer == "RLOOTrainer" else trl.grpo.GRPOTrainer

    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        old, rollout = sampled(logp, rollout_logp, old_logp)
        trainer = trl_trainer(trainer_class, args, logp, by_group(group, group).shape[1])
        advantages = trl_advantages(trl, trainer, rewards, old, ref_logp, mask)
        ids = torch.zeros(logp.shape, dtype=torch.long)
        inputs = {"prompt_ids": ids[:, :1], "prompt_mask": ids[:, :1] + 1, "completion_ids": ids,
                  "completion_mask": mask, "advantages": advantages, "ref_per_token_logps": ref_logp,
                  "num_items_in_batch": mask.sum()}
        if config.trainer == "RLOOTrainer":
            inputs["old_logps"] = (old * mask).sum(1)
            return trainer._compute_loss(None, inputs)
        inputs["old_per_token_logps"] = old
        if trainer.use_vllm and trainer.vllm_importance_sampling_correction:
            scope = {"self": trainer, "torch": torch, "math": math, "old_per_token_logps": old,
                     "sampling_per_token_logps": rollout, "mask": mask}
            run_block(trainer_class._generate_and_score_completions, "per_token_logps_diff = (old_per_token_logps",
                      "# Compute the per-token log probabilities for the reference model", scope)
            inputs["importance_sampling_ratio"] = scope["vllm_importance_sampling_ratio"]
        return trainer._compute_loss(None, inputs)

    return loss_fn


def verl_actor(verl, actor: dict, group_size: int, correction=None):
    """verl's ActorConfig from the config's actor section (its loss fields; batch sizes of one audit group)."""
    policy = {k: v for k, v in actor["policy_loss"].items() if k in ("loss_mode", "clip_cov_ratio", "clip_cov_lb",
                                                                    "clip_cov_ub", "kl_cov_ratio", "ppo_kl_coef")}
    if correction is not None:
        policy["rollout_correction"] = correction
    keys = ("clip_ratio", "clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "loss_agg_mode", "use_kl_loss",
            "kl_loss_coef", "kl_loss_type", "tau_pos", "tau_neg")
    return verl.ActorConfig(strategy="fsdp", rollout_n=group_size, ppo_micro_batch_size_per_gpu=1,
                            ppo_mini_batch_size=group_size, policy_loss=verl.PolicyLossConfig(**policy),
                            **{k: actor[k] for k in keys if k in actor})


def verl_advantages(verl, algorithm: dict, rewards, mask, group) -> torch.Tensor:
    """verl's advantage estimator ``algorithm.adv_estimator`` on outcome scores (on each reply's first token)."""
    estimator = verl.core.get_adv_estimator_fn(algorithm["adv_estimator"])
    scores = torch.zeros_like(mask)
    scores[:, 0] = rewards
    given = {"token_level_rewards": scores, "response_mask": mask, "index": np.asarray(group),
             "norm_adv_by_std_in_grpo": algorithm["norm_adv_by_std_in_grpo"], "config": None}
    parameters = inspect.signature(estimator).parameters
    return estimator(**{k: v for k, v in given.items() if k in parameters})[0]


def verl_correction(verl, algorithm: dict):
    """verl's RolloutCorrectionConfig of algorithm.rollout_correction, or None when it does nothing."""
    fields = {f.name for f in dataclasses.fields(verl.RolloutCorrectionConfig)}
    given = {k: v for k, v in algorithm.get("rollout_correction", {}).items() if k in fields and k != "_target_"}
    correction = verl.RolloutCorrectionConfig(**given)
    active = correction.bypass_mode or correction.rollout_is is not None or correction.rollout_rs is not None
    return correction if active else None


def verl_check(config: FrameworkConfig) -> None:
    estimator = config.native["algorithm"]["adv_estimator"]
    try:
        fn = config.modules.core.get_adv_estimator_fn(estimator)
    except (ValueError, KeyError, NotImplementedError):
        raise SettingsError(f"verl has no advantage estimator {estimator!r}; set algorithm.adv_estimator") from None
    needed = [n for n, p in inspect.signature(fn).parameters.items() if p.default is inspect.Parameter.empty
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
              and n not in ("token_level_rewards", "response_mask", "index")]
    if needed:
        raise SettingsError(f"algorithm.adv_estimator={estimator} needs {', '.join(needed)} (a critic or reward "
                            f"baselines); pglab conform checks critic-free estimators: e.g. --set "
                            f"algorithm.adv_estimator=grpo")


def verl_loss_of(config: FrameworkConfig) -> LossFn:
    """ppo_loss (verl/workers/utils/losses.py) on padded tensors: the policy loss, then kl_loss_coef x agg_loss."""
    verl_check(config)
    verl, actor, algorithm = config.modules, config.native["actor_rollout_ref"]["actor"], config.native["algorithm"]
    correction = verl_correction(verl, algorithm)
    bypass = correction is not None and correction.bypass_mode

    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        old, rollout = sampled(logp, rollout_logp, old_logp)
        settings = verl_actor(verl, actor, by_group(group, group).shape[1], correction if bypass else None)
        adv = verl_advantages(verl, algorithm, rewards, mask, group)
        mode, weights = settings.policy_loss.loss_mode, None
        if correction is not None and not bypass:
            fields = {k: getattr(correction, k) for k in ("rollout_is", "rollout_is_threshold", "rollout_rs",
                                                          "rollout_rs_threshold", "rollout_is_batch_normalize")}
            proto, mask, _ = verl.corr.compute_rollout_correction_and_rejection_mask(old, rollout, mask, **fields)
            weights = None if proto is None else proto.batch["rollout_is_weights"]
        if bypass:
            old, mode = rollout, "bypass_mode"
        loss, _ = verl.core.get_policy_loss_fn(mode)(
            old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask.bool(),
            loss_agg_mode=settings.loss_agg_mode, config=settings, rollout_is_weights=weights)
        if settings.use_kl_loss and settings.kl_loss_coef:
            kld = verl.core.kl_penalty(logprob=logp, ref_logprob=ref_logp, kl_penalty=settings.kl_loss_type)
            loss = loss + verl.core.agg_loss(kld, mask.bool(), settings.loss_agg_mode) * settings.kl_loss_coef
        return loss

    return loss_fn


def openrlhf_group_args(args, group_size: int):
    """A copy of the parsed arguments with the audit's group size as --rollout.n_samples_per_prompt."""
    args = copy.deepcopy(args)
    args.rollout.n_samples_per_prompt = group_size
    return args


def openrlhf_loss_of(config: FrameworkConfig) -> LossFn:
    """PPOActor's loss: the experience maker's advantages (k1 reward shaping from make_experience), PolicyLoss, and
    --algo.kl.init_coef x compute_approx_kl as a loss with --algo.kl.use_loss."""
    openrlhf, parsed = config.modules, config.native
    if parsed.algo.advantage.estimator not in ESTIMATORS:
        raise SettingsError(f"--algo.advantage.estimator {parsed.algo.advantage.estimator} needs a critic; pglab "
                            f"conform checks the critic-free ones: {', '.join(ESTIMATORS)}")

    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None, old_logp=None):
        old, rollout = sampled(logp, rollout_logp, old_logp)
        args = openrlhf_group_args(parsed, by_group(group, group).shape[1])
        algo, beta = args.algo, args.algo.kl.init_coef
        maker_class = openrlhf.maker.RemoteExperienceMaker
        maker = types.SimpleNamespace(strategy=types.SimpleNamespace(args=args),
                                      advantage_estimator=algo.advantage.estimator,
                                      kl_ctl=types.SimpleNamespace(value=beta))
        maker.get_cumulative_returns = types.MethodType(maker_class.get_cumulative_returns, maker)
        kl = torch.zeros_like(old) if algo.kl.use_loss or not beta else \
            openrlhf.utils.compute_approx_kl(old, ref_logp, kl_estimator=algo.kl.estimator)   # make_experience
        experience = types.SimpleNamespace(index=list(range(len(logp))), rewards=rewards.clone(), info={}, kl=kl,
                                           action_mask=mask)
        maker_class.compute_advantages_and_returns(maker, [experience])
        low, high = args.actor.eps_clip_low_high
        policy = openrlhf.loss.PolicyLoss(low, high, dual_clip=args.actor.dual_clip,
                                          policy_loss_type=args.actor.policy_loss_type,
                                          is_correction_level=algo.advantage.is_correction_level,
                                          is_correction_mode=algo.advantage.is_correction_mode,
                                          is_correction_threshold=algo.advantage.is_correction_threshold)
        loss = policy(logp, old, experience.advantages, action_mask=mask, rollout_log_probs=rollout)[0]
        if algo.kl.use_loss and beta > 0:                                   # PPOActor.training_step
            kl = openrlhf.utils.compute_approx_kl(logp, ref_logp, log_probs_old=old, kl_estimator=algo.kl.estimator)
            loss = loss + openrlhf.loss.aggregate_loss(kl, mask) * beta
        return loss

    return loss_fn


def framework_loss(config: FrameworkConfig) -> LossFn:
    """The framework's own loss on the audit's batch (see the module)."""
    builders = {"trl": trl_loss, "verl": verl_loss_of, "openrlhf": openrlhf_loss_of}
    return builders[config.framework](config)


def trl_documented(args, trainer: str) -> tuple[Any, list[str]]:
    """(TrlConfig or ('rloo', epsilon), the settings outside every preset)."""
    unmodelled = []
    if trainer == "RLOOTrainer":
        if args.normalize_advantages or args.reward_clip_range or args.epsilon_high not in (None, args.epsilon):
            unmodelled.append("normalize_advantages, reward_clip_range or an asymmetric clip")
        return ("rloo", args.epsilon), unmodelled
    checks = {"scale_rewards": (args.scale_rewards, "group"), "top_entropy_quantile": (args.top_entropy_quantile, 1.0),
              "off_policy_mask_threshold": (args.off_policy_mask_threshold, None), "delta": (args.delta, None),
              "vllm_importance_sampling_clip_min": (getattr(args, "vllm_importance_sampling_clip_min", None), None)}
    unmodelled = [f"{k}={v!r}" for k, (v, default) in checks.items() if v != default]
    if args.loss_type not in TRL_MODES:
        unmodelled.append(f"loss_type={args.loss_type!r}")
    vllm = args.vllm_importance_sampling_mode if args.use_vllm and args.vllm_importance_sampling_correction else None
    if vllm is not None and vllm not in VLLM_MODES:
        unmodelled.append(f"vllm_importance_sampling_mode={vllm!r}")
    if unmodelled:
        return None, unmodelled
    return TrlConfig(args.loss_type, use_bias_correction_kl=args.use_bias_correction_kl,
                     importance_sampling_level=args.importance_sampling_level, vllm_mode=vllm,
                     vllm_clip_max=getattr(args, "vllm_importance_sampling_clip_max",  # older: "cap"
                                           getattr(args, "vllm_importance_sampling_cap", TrlConfig.vllm_clip_max)),
                     epsilon=args.epsilon, epsilon_high=args.epsilon_high,
                     sapo_temperatures=(args.sapo_temperature_pos, args.sapo_temperature_neg),
                     vespo=tuple(getattr(args, f"vespo_{name}", default)  # vespo fields: since TRL 1.0
                                 for name, default in zip(("k_pos", "lambda_pos", "k_neg", "lambda_neg"),
                                                          TrlConfig.vespo))), []


def verl_documented(verl, tree: dict) -> tuple[Any, list[str]]:
    """(VerlConfig, the settings outside every preset)."""
    actor, algorithm = tree["actor_rollout_ref"]["actor"], tree["algorithm"]
    mode = actor["policy_loss"]["loss_mode"]
    estimator = "gpg" if mode == "gpg" else "grpo"
    checks = {"algorithm.adv_estimator": (algorithm["adv_estimator"], estimator),
              "algorithm.norm_adv_by_std_in_grpo": (algorithm["norm_adv_by_std_in_grpo"], True),
              "algorithm.use_kl_in_reward": (algorithm["use_kl_in_reward"], False),
              "actor.clip_ratio_c": (actor["clip_ratio_c"], 3.0), "actor.policy_loss.loss_mode in the presets":
              (mode in LOSSES, True), "actor.loss_agg_mode": (actor["loss_agg_mode"] in VERL_MODES, True),
              "actor.kl_loss_type": (actor["kl_loss_type"] in VERL_KL, True)}
    unmodelled = [f"{k}={v!r}" for k, (v, want) in checks.items() if v != want]
    correction = verl_correction(verl, algorithm)
    factory = None
    if correction is not None:
        named = [n for n in VERL_CORRECTIONS if getattr(verl.RolloutCorrectionConfig, n)() == correction]
        if not named or mode != "vanilla":
            unmodelled.append("a rollout correction other than verl's factory configurations on the vanilla loss")
        factory = named[0] if named else None
    if unmodelled:
        return None, unmodelled
    low = actor.get("clip_ratio_low") or actor["clip_ratio"]
    high = actor.get("clip_ratio_high") or actor["clip_ratio"]
    base = VERL_CORRECTIONS[factory][0] if factory else VerlConfig(loss_mode=mode)
    return dataclasses.replace(base, loss_agg_mode=actor["loss_agg_mode"], kl_loss_type=actor["kl_loss_type"],
                               clip_ratio=(low, high)), []


def openrlhf_documented(args) -> tuple[Any, list[str]]:
    """(OpenRlhfConfig, the settings outside every preset)."""
    algo, actor = args.algo, args.actor
    low, high = actor.eps_clip_low_high
    correction = {levels: name for name, levels in CORRECTIONS.items()}.get(
        (algo.advantage.is_correction_level, algo.advantage.is_correction_mode))
    checks = {"--algo.advantage.gamma": (algo.advantage.gamma, 1.0), "--actor.eps_clip_low_high": (low, high),
              "--algo.kl.unbiased_gradient": (algo.kl.unbiased_gradient, False),
              "--algo.advantage.no_std_norm": (algo.advantage.no_std_norm, False),
              "--reward.clip_range": (tuple(args.reward.clip_range), (-10.0, 10.0)),
              "--algo.kl.estimator (k1 in the reward)": (algo.kl.estimator if not algo.kl.use_loss else "k1", "k1"),
              "--algo.advantage.is_correction_*": (correction is None and algo.advantage.is_correction_level != "off",
                                                   False)}
    unmodelled = [f"{k}={v!r}" for k, (v, want) in checks.items() if v != want]
    if unmodelled:
        return None, unmodelled
    return OpenRlhfConfig(estimator=algo.advantage.estimator, policy_loss_type=actor.policy_loss_type, eps_clip=low,
                          dual_clip=actor.dual_clip, kl_loss=algo.kl.estimator if algo.kl.use_loss else None,
                          correction=correction, is_threshold=tuple(algo.advantage.is_correction_threshold)), []


def preset_name(settings: Any) -> str | None:
    """The registered preset built from ``settings`` (a peer config dataclass), or None."""
    for name, preset in PRESETS.items():
        build = preset.build
        if isinstance(build, partial) and build.args == (settings,):
            return name
        if settings == ("rloo", 0.2) and build is trl_rloo_loss:
            return name
    return None


def documented_preset(config: FrameworkConfig) -> tuple[LossFn | None, str]:
    """(the pglab loss the config documents at its beta, its description), or (None, the settings none models)."""
    if config.framework == "trl":
        settings, unmodelled = trl_documented(config.native, config.trainer)
    elif config.framework == "verl":
        settings, unmodelled = verl_documented(config.modules, config.native)
    else:
        settings, unmodelled = openrlhf_documented(config.native)
    if settings is None:
        return None, "no pglab preset models " + ", ".join(unmodelled)
    name = preset_name(settings)
    label = f"preset {name}" if name else f"pglab's {settings}"
    if isinstance(settings, tuple):
        return trl_rloo_loss(config.beta, settings[1]), label
    build = {TrlConfig: trl_grpo_loss, VerlConfig: verl_loss, OpenRlhfConfig: openrlhf_loss}[type(settings)]
    return build(settings, config.beta), label
