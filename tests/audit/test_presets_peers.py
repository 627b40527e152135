"""Every peer preset against the peer's own code, imported and run: TRL 1.16.0, verl 0.9.1, OpenRLHF 0.11.2.

On random float64 batches with replies of different lengths, old log-probs (the policy the ratio compares to)
and rollout log-probs (the sampler) different from logp, so that clips, dual clips, masks and truncations bind
(test_the_batches_make_every_mechanism_bind), each preset's loss value and gradient w.r.t. logp equal the peer's
to 1e-10 relative, except where the peer itself rounds, each bound derived:
- OpenRLHF's per-sample GSPO mean divides by (length + 1e-8): a relative change of at most 1e-8 per division
  (4e-8 allowed; verl's seq-mean-token-mean adds the same 1e-8 to the token count of its bool mask, an integer
  tensor, and the sum, in float32, rounds back to the count);
- TRL's nanstd computes Bessel's factor count / (count - 1) in float32 (integer tensors divide to float32), so
  every TRL GRPO advantage carries a relative error up to 2^-24 = 6e-8; TRL's SAPO temperatures are a float32
  tensor (torch.where on Python floats), so trl-sapo is compared with its temperatures rounded the same way;
- OpenRLHF's compute_approx_kl returns float32, compute_reward puts the score into a tensor of the KL's dtype,
  and the whitening runs in float32: with k1 in the reward, the KL loss or whitening it agrees to float32
  precision, checked at 1e-6 relative (unit roundoff 6e-8 through a few dozen operations and a division by a
  std; the largest seen is 1.3e-7).
The peer's arithmetic runs unchanged; what the tests write by hand is only the plumbing the peers do in their
trainers (advantages from scores as TRL's _generate_and_score_completions computes them, with TRL's nanstd).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import textwrap
import types
from collections import defaultdict

import numpy as np
import pytest
import torch

from pglab.audit.peers.common import group_advantages
from pglab.audit.peers.openrlhf import CORRECTIONS, ESTIMATORS
from pglab.audit.peers.trl import VLLM_MODES, trl_grpo_loss
from pglab.audit.peers.verl import covariance
from pglab.audit.presets import OPENRLHF_GRPO, PRESETS, VERL_CORRECTIONS, get_preset
from pglab.conform.losses import OneProcess
from pglab.estimators import geometric_mask, gspo, kl_estimate, masked_is, ppo_clip, truncated_is
from support import peers

GROUPS, K, T = 3, 4, 5
EXACT = 1e-10
LENGTH_EPS = 4e-8
TRL_STD = 6e-8
FLOAT32 = 1e-6


def make_batch(seed: int, reward_scale: float = 1.0, drift: float = 0.4):
    gen = torch.Generator().manual_seed(seed)
    b = GROUPS * K
    lengths = torch.randint(1, T + 1, (b,), generator=gen)
    mask = (torch.arange(T) < lengths[:, None]).double()
    logp = -torch.rand(b, T, generator=gen, dtype=torch.float64) * 2 * mask
    ref = -torch.rand(b, T, generator=gen, dtype=torch.float64) * 2 * mask
    old = (logp + drift * torch.randn(b, T, generator=gen, dtype=torch.float64)).clamp(max=-1e-3) * mask
    rollout = (old + drift * torch.randn(b, T, generator=gen, dtype=torch.float64)).clamp(max=-1e-3) * mask
    if drift:
        old[::3, 0] -= 1.5                   # ratios e^1.5 > 3: the dual clip binds where A < 0
        rollout[1] = (old[1] - 1.7) * mask[1]    # a reply whose geometric-mean ratio old / rollout is past 5
    rewards = reward_scale * torch.randn(b, generator=gen, dtype=torch.float64)
    return dict(logp=logp, ref=ref, rewards=rewards, mask=mask, group=torch.arange(GROUPS).repeat_interleave(K),
                old=old, rollout=rollout)


def value_and_grad(fn, batch):
    logp = batch["logp"].clone().requires_grad_(True)
    value = fn(logp, batch)
    (grad,) = torch.autograd.grad(value, logp)
    return value.detach(), grad * batch["mask"]


def ours(name, beta, loss_fn=None):
    loss_fn = loss_fn or get_preset(name, beta)
    return lambda logp, b: loss_fn(logp, b["ref"], b["rewards"], b["mask"], b["group"], rollout_logp=b["rollout"],
                                   old_logp=b["old"])


def assert_close(name, mine, theirs, rtol):
    (value, grad), (peer_value, peer_grad) = mine, theirs
    scale = peer_grad.abs().max()
    assert scale > 0, f"{name}: the peer's gradient is 0 on this batch"
    assert abs(value - peer_value) <= rtol * max(abs(peer_value), 1e-3), (name, float(value), float(peer_value))
    assert (grad - peer_grad).abs().max() <= rtol * scale, (name, float((grad - peer_grad).abs().max() / scale))


# --- TRL: GRPOTrainer._compute_loss and RLOOTrainer._compute_loss, on instances made without __init__ ------------

@pytest.fixture(scope="module")
def trl():
    found = peers.trl()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def trl_defaults(config_class, **overrides):
    fields = {f.name: f.default for f in dataclasses.fields(config_class)}
    return types.SimpleNamespace(**(fields | overrides))


def trl_trainer(trainer_class, args, logp):
    """An instance whose _compute_loss reads ``args`` as __init__ would have set them, and scores ``logp``."""
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
        max_completion_length=T, model=types.SimpleNamespace(training=True), current_gradient_accumulation_steps=1,
        accelerator=OneProcess(), _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        _entropy_bonus_enabled=False, aux_loss_enabled=False)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (logp, torch.zeros_like(logp), None)
    return trainer


def trl_vllm_ratio(trl, trainer, old, rollout, mask):
    """The importance_sampling_ratio block of GRPOTrainer._generate_and_score_completions, run from its source."""
    source = inspect.getsource(trl.grpo.GRPOTrainer._generate_and_score_completions)
    start = source.rindex("\n", 0, source.index("per_token_logps_diff = (old_per_token_logps")) + 1
    end = source.index("# Compute the per-token log probabilities for the reference model")
    scope = {"self": trainer, "torch": torch, "math": math, "old_per_token_logps": old,
             "sampling_per_token_logps": rollout, "mask": mask}
    exec(textwrap.dedent(source[start:end]), scope)
    return scope["vllm_importance_sampling_ratio"]


def trl_inputs(trl, b, logp, advantages):
    ids = torch.zeros(len(logp), T, dtype=torch.long)
    return {"prompt_ids": ids[:, :1], "prompt_mask": ids[:, :1] + 1, "completion_ids": ids,
            "completion_mask": b["mask"], "advantages": advantages, "ref_per_token_logps": b["ref"],
            "num_items_in_batch": b["mask"].sum()}


def trl_grpo_peer(trl, beta, **overrides):
    def loss(logp, b):
        args = trl_defaults(trl.grpo.GRPOConfig, beta=beta, steps_per_generation=1, **overrides)
        trainer = trl_trainer(trl.grpo.GRPOTrainer, args, logp)
        grouped = b["rewards"].view(-1, K)
        mean = grouped.mean(1).repeat_interleave(K)
        std = trl.utils.nanstd(grouped, dim=1).repeat_interleave(K)
        inputs = trl_inputs(trl, b, logp, (b["rewards"] - mean) / (std + 1e-4))
        inputs["old_per_token_logps"] = b["old"]
        if args.use_vllm:
            inputs["importance_sampling_ratio"] = trl_vllm_ratio(trl, trainer, b["old"], b["rollout"], b["mask"])
        return trainer._compute_loss(None, inputs)
    return loss


def trl_rloo_peer(trl, beta):
    def loss(logp, b):
        args = trl_defaults(trl.rloo.RLOOConfig, beta=beta)
        trainer = trl_trainer(trl.rloo.RLOOTrainer, args, logp)
        kl = ((b["old"] - b["ref"]) * b["mask"]).sum(-1)        # _generate_and_score_completions, beta != 0
        rewards = (b["rewards"] - beta * kl).view(-1, K)
        baselines = (rewards.sum(1, keepdim=True) - rewards) / (K - 1)
        inputs = trl_inputs(trl, b, logp, (rewards - baselines).view(-1))
        inputs["old_logps"] = (b["old"] * b["mask"]).sum(1)
        return trainer._compute_loss(None, inputs)
    return loss


TRL_CONFIGS = {f"trl-{t}": {"loss_type": t, "use_bias_correction_kl": False} for t in ("grpo", "bnpo", "dr_grpo",
                                                                                       "dapo")}
TRL_CONFIGS |= {f"{name}-kl-corrected": {**options, "use_bias_correction_kl": True}
                for name, options in list(TRL_CONFIGS.items())}
TRL_CONFIGS |= {"trl-cispo": {"loss_type": "cispo"}, "trl-sapo": {"loss_type": "sapo"},
                "trl-vespo": {"loss_type": "vespo"},
                "trl-luspo": {"loss_type": "luspo", "importance_sampling_level": "sequence", "epsilon": 3e-4,
                              "epsilon_high": 4e-4},
                "trl-gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4,
                             "epsilon_high": 4e-4}}
TRL_CONFIGS |= {f"trl-vllm-{mode}": {"use_vllm": True, "vllm_importance_sampling_mode": mode} for mode in VLLM_MODES}


@pytest.mark.parametrize("beta", [0.0, 0.3])
@pytest.mark.parametrize("name", sorted(TRL_CONFIGS) + ["trl-rloo"])
def test_trl_presets_equal_trl(trl, name, beta):
    for seed in (0, 1):
        batch = make_batch(seed)
        peer = trl_rloo_peer(trl, beta) if name == "trl-rloo" else trl_grpo_peer(trl, beta, **TRL_CONFIGS[name])
        rtol = EXACT if name == "trl-rloo" else TRL_STD
        mine = ours(name, beta, trl_float32_temperatures(name, beta))
        assert_close(name, value_and_grad(mine, batch), value_and_grad(peer, batch), rtol)


def trl_float32_temperatures(name, beta):
    """trl-sapo with SAPO's temperatures rounded to float32, as TRL's torch.where(advantages > 0, 1.0, 1.05) makes
    them (a float32 tensor: 1.05 becomes 1.0499999523); every other preset as registered (None)."""
    if name != "trl-sapo":
        return None
    cfg = PRESETS[name].build.args[0]
    rounded = tuple(float(torch.tensor(tau, dtype=torch.float32)) for tau in cfg.sapo_temperatures)
    return trl_grpo_loss(dataclasses.replace(cfg, sapo_temperatures=rounded), beta)


def test_trl_cispo_warning_states_the_default_cap(trl):
    """TRL's cispo default: epsilon_high None -> epsilon 0.2, and the weight is min(r, epsilon_high)."""
    defaults = trl_defaults(trl.grpo.GRPOConfig)
    assert defaults.epsilon_high is None and defaults.epsilon == 0.2
    assert "0.2" in PRESETS["trl-cispo"].warning
    batch = make_batch(0, drift=0.0)                              # on-policy: r = 1 everywhere
    _, cispo = value_and_grad(trl_grpo_peer(trl, 0.0, loss_type="cispo"), batch)
    _, reinforce = value_and_grad(trl_grpo_peer(trl, 0.0, loss_type="dapo"), batch)
    assert torch.allclose(cispo, 0.2 * reinforce, rtol=1e-12, atol=1e-15)   # TRL's own cispo: 0.2 x REINFORCE
    _, grad = value_and_grad(ours("trl-cispo", 0.0), batch)
    assert torch.allclose(grad, cispo, rtol=TRL_STD, atol=0)


# --- verl: core_algos' policy losses, agg_loss and kl_penalty, rollout_corr_helper ------------------------------

@pytest.fixture(scope="module")
def verl():
    found = peers.verl()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def verl_config(verl, beta, *, loss_mode="vanilla", rollout_correction=None, **actor):
    policy_loss = {"loss_mode": loss_mode}
    if rollout_correction is not None:
        policy_loss["rollout_correction"] = rollout_correction
    return verl.ActorConfig(strategy="fsdp", rollout_n=K, ppo_micro_batch_size_per_gpu=1, ppo_mini_batch_size=K,
                            use_kl_loss=beta > 0, kl_loss_coef=beta, policy_loss=verl.PolicyLossConfig(**policy_loss),
                            **actor)


def verl_advantages(verl, b, estimator="grpo"):
    scores = torch.zeros_like(b["mask"])
    scores[:, 0] = b["rewards"]
    fn = verl.core.compute_gpg_outcome_advantage if estimator == "gpg" else verl.core.compute_grpo_outcome_advantage
    return fn(scores, b["mask"], np.asarray(b["group"]))[0]


def verl_peer(verl, beta, *, correction=None, **settings):
    """ppo_loss (verl/workers/utils/losses.py) on padded tensors: the policy loss, then kl_loss_coef x agg_loss."""
    def loss(logp, b):
        mode = settings.get("loss_mode", "vanilla")
        bypass = correction is not None and correction.bypass_mode
        config = verl_config(verl, beta, rollout_correction=correction if bypass else None, **settings)
        adv = verl_advantages(verl, b, "gpg" if mode == "gpg" else "grpo")
        mask, weights, old = b["mask"], None, b["old"]
        if correction is not None and not bypass:
            fields = {k: getattr(correction, k) for k in ("rollout_is", "rollout_is_threshold", "rollout_rs",
                                                          "rollout_rs_threshold", "rollout_is_batch_normalize")}
            proto, mask, _ = verl.corr.compute_rollout_correction_and_rejection_mask(old, b["rollout"], mask, **fields)
            weights = None if proto is None else proto.batch["rollout_is_weights"]
        if bypass:
            old, mode = b["rollout"], "bypass_mode"
        pg_loss, _ = verl.core.get_policy_loss_fn(mode)(
            old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask.bool(),
            loss_agg_mode=config.loss_agg_mode, config=config, rollout_is_weights=weights)
        if beta:
            kld = verl.core.kl_penalty(logprob=logp, ref_logprob=b["ref"], kl_penalty=config.kl_loss_type)
            pg_loss = pg_loss + verl.core.agg_loss(kld, mask.bool(), config.loss_agg_mode) * beta
        return pg_loss
    return loss


def verl_settings(name: str) -> dict:
    rest = name.removeprefix("verl-")
    for kl in ("low_var_kl", "k1", "mse"):
        if rest.startswith(kl + "-"):
            return {"kl_loss_type": kl, "loss_agg_mode": rest.removeprefix(kl + "-")}
    if rest == "gspo":
        return {"loss_mode": "gspo", "clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4,
                "loss_agg_mode": "seq-mean-token-mean"}
    return {"loss_mode": rest}


VERL_NAMES = sorted(n for n in PRESETS if n.startswith("verl-") and n.removeprefix("verl-") not in VERL_CORRECTIONS)


@pytest.mark.parametrize("beta", [0.0, 0.3])
@pytest.mark.parametrize("name", VERL_NAMES)
def test_verl_presets_equal_verl(verl, name, beta):
    for seed in (0, 1):
        batch = make_batch(seed)
        torch.manual_seed(seed)                    # clip_cov draws its token with torch.randperm
        mine = value_and_grad(ours(name, beta), batch)
        torch.manual_seed(seed)
        assert_close(name, mine, value_and_grad(verl_peer(verl, beta, **verl_settings(name)), batch), EXACT)


@pytest.mark.parametrize("beta", [0.0, 0.3])
@pytest.mark.parametrize("name", sorted(VERL_CORRECTIONS))
def test_verl_rollout_corrections_equal_verl(verl, name, beta):
    correction = getattr(verl.RolloutCorrectionConfig, name)()
    for seed in (0, 1):
        batch = make_batch(seed, drift=0.1 if name == "decoupled_geo_rs" else 0.4)
        if name == "decoupled_geo_rs":     # a band of 0.1%: move half of the replies inside it
            batch["rollout"][::2] = batch["old"][::2] * (1 + 1e-4)
        peer = value_and_grad(verl_peer(verl, beta, correction=correction), batch)
        assert_close(name, value_and_grad(ours(f"verl-{name}", beta), batch), peer, EXACT)


def test_verl_low_var_kl_clamp_binds_with_zero_gradient(verl):
    """kl_penalty clamps low_var_kl at 10: at log-ratios below -2.6 the term's gradient is 0, as the preset's."""
    batch = make_batch(0)
    batch["ref"] = batch["ref"] * 0 + batch["mask"] * 3.0 * torch.sign(torch.randn(batch["ref"].shape))
    batch["logp"] = batch["logp"] - 3.0 * batch["mask"]
    assert ((batch["logp"] - batch["ref"] < -2.7) & (batch["mask"] > 0)).any()
    name = "verl-low_var_kl-token-mean"
    peer = value_and_grad(verl_peer(verl, 0.3, **verl_settings(name)), batch)
    assert_close(name, value_and_grad(ours(name, 0.3), batch), peer, EXACT)
    k3 = kl_estimate(batch["logp"], batch["ref"], "k3")
    assert ((k3 > 10) & (batch["mask"] > 0)).any()      # the clamp binds; unclamped, k3's gradient there is not 0


# --- OpenRLHF: compute_advantages_and_returns, compute_reward, PolicyLoss, compute_approx_kl ------------------

@pytest.fixture(scope="module")
def openrlhf():
    found = peers.openrlhf()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def openrlhf_args(cfg, beta):
    threshold = list(cfg.is_threshold)
    level, mode = CORRECTIONS.get(cfg.correction, ("off", "mask"))
    return types.SimpleNamespace(
        algo=types.SimpleNamespace(
            advantage=types.SimpleNamespace(estimator=cfg.estimator, gamma=1.0, no_std_norm=False,
                                            is_correction_level=level, is_correction_mode=mode,
                                            is_correction_threshold=threshold),
            kl=types.SimpleNamespace(use_loss=cfg.kl_loss is not None, estimator=cfg.kl_loss or "k1",
                                     init_coef=beta, unbiased_gradient=False)),
        rollout=types.SimpleNamespace(n_samples_per_prompt=K), reward=types.SimpleNamespace(clip_range=(-10, 10)))


def openrlhf_peer(openrlhf, cfg, beta):
    def loss(logp, b):
        args = openrlhf_args(cfg, beta)
        maker_class = openrlhf.maker.RemoteExperienceMaker
        maker = types.SimpleNamespace(strategy=types.SimpleNamespace(args=args), advantage_estimator=cfg.estimator,
                                      kl_ctl=types.SimpleNamespace(value=beta))
        maker.get_cumulative_returns = types.MethodType(maker_class.get_cumulative_returns, maker)
        kl = torch.zeros_like(b["old"]) if args.algo.kl.use_loss else \
            openrlhf.utils.compute_approx_kl(b["old"], b["ref"], kl_estimator="k1")   # make_experience
        experience = types.SimpleNamespace(index=list(range(len(logp))), rewards=b["rewards"].clone(), info={},
                                           kl=kl, action_mask=b["mask"])
        maker_class.compute_advantages_and_returns(maker, [experience])
        advantage = args.algo.advantage
        policy = openrlhf.loss.PolicyLoss(cfg.eps_clip, cfg.eps_clip, dual_clip=cfg.dual_clip,
                                          policy_loss_type=cfg.policy_loss_type,
                                          is_correction_level=advantage.is_correction_level,
                                          is_correction_mode=advantage.is_correction_mode,
                                          is_correction_threshold=advantage.is_correction_threshold)
        actor_loss = policy(logp, b["old"], experience.advantages, action_mask=b["mask"],
                            rollout_log_probs=b["rollout"])[0]
        if args.algo.kl.use_loss and beta > 0:                                   # PPOActor.training_step
            kl = openrlhf.utils.compute_approx_kl(logp, b["ref"], log_probs_old=b["old"],
                                                  kl_estimator=args.algo.kl.estimator)
            actor_loss = actor_loss + openrlhf.loss.aggregate_loss(kl, b["mask"]) * beta
        return actor_loss
    return loss


OPENRLHF_CONFIGS = {f"openrlhf-{e}": dataclasses.replace(OPENRLHF_GRPO, estimator=e, kl_loss=None)
                    for e in ESTIMATORS}
OPENRLHF_CONFIGS |= {f"openrlhf-{t}": dataclasses.replace(OPENRLHF_GRPO, policy_loss_type=t, dual_clip=3.0)
                     for t in ("ppo", "gspo")}
OPENRLHF_CONFIGS |= {f"openrlhf-{c}": dataclasses.replace(OPENRLHF_GRPO, correction=c) for c in CORRECTIONS}


def openrlhf_rtol(cfg, beta):
    """float32 where the peer casts: compute_approx_kl returns float32, and compute_reward places the score in a
    tensor of the KL's dtype (so with k1 in the reward, the score itself is rounded to float32); the KL loss;
    the whitening of reinforce and reinforce_baseline."""
    float32 = cfg.kl_loss is None or beta > 0 or ESTIMATORS[cfg.estimator][2]
    if float32:
        return FLOAT32
    return LENGTH_EPS if cfg.policy_loss_type == "gspo" else EXACT   # GSPO's per-sample mean: length + 1e-8


def openrlhf_batch(seed):
    """Rewards inside [-10, 10] whose leave-one-out and centred advantages go past 10."""
    batch = make_batch(seed, reward_scale=8.0)
    batch["rewards"] = batch["rewards"].clamp(-9.5, 9.5)
    return batch


@pytest.mark.parametrize("beta", [0.0, 0.3])
@pytest.mark.parametrize("name", sorted(OPENRLHF_CONFIGS))
def test_openrlhf_presets_equal_openrlhf(openrlhf, name, beta):
    cfg = OPENRLHF_CONFIGS[name]
    for seed in (0, 1):
        batch = openrlhf_batch(seed)
        peer = value_and_grad(openrlhf_peer(openrlhf, cfg, beta), batch)
        assert_close(name, value_and_grad(ours(name, beta), batch), peer, openrlhf_rtol(cfg, beta))


def test_openrlhf_reward_clip_binds_after_the_baseline(openrlhf):
    """On the batches of the test above every reward is inside [-10, 10] (a clip before the baseline, as the old
    preset did, changes nothing) while some leave-one-out advantages are past 10 (the clip after it binds)."""
    for seed in (0, 1):
        batch = openrlhf_batch(seed)
        grouped = batch["rewards"].view(-1, K)
        loo = grouped - (grouped.sum(1, keepdim=True) - grouped) / (K - 1)
        assert (loo.abs() > 10).any() and (batch["rewards"].abs() < 10).all(), seed


def test_the_batches_make_every_mechanism_bind():
    """On the test batches each clip, dual clip, truncation, mask and rejection acts on some tokens or replies
    (at one seed at least) and never on all, so that a preset that left one out would fail its comparison."""
    shares = defaultdict(list)
    for seed in (0, 1):
        b = make_batch(seed)
        m, old, rollout = b["mask"], b["old"], b["rollout"]
        adv = group_advantages(b["rewards"], b["group"], "grpo", unbiased=True, eps=1e-6)
        for name, share in ppo_clip(b["logp"], old, adv, m, dual_clip=3.0)[1].items():
            shares[f"ppo {name}"].append(share)
        for name, share in gspo(b["logp"], old, adv, m, epsilon=3e-4, epsilon_high=4e-4)[1].items():
            shares[f"gspo {name}"].append(share)
        for level in ("token", "sequence"):
            for cap in (2.0, 3.0):
                shares[f"{level} TIS {cap}"].append(truncated_is(old, rollout, m, cap=cap, level=level)[1][
                    "truncated_fraction"])
            for low, high in ((0.0, 3.0), (0.5, 5.0), (0.5, 2.0)):
                shares[f"{level} mask [{low}, {high}]"].append(masked_is(old, rollout, m, low=low, high=high,
                                                                          level=level)[1]["masked_fraction"])
        shares["geometric mask"].append(geometric_mask(old, rollout, m, low=0.5, high=5.0)[1]["masked_fraction"])
        cov = covariance(adv[:, None].expand_as(m), b["logp"], m)
        shares["clip_cov candidates"].append(((cov > 1) & (cov < 5) & (m > 0)).double().mean())
    for name, found in shares.items():
        assert max(found) > 0 and max(found) < 1, (name, [round(float(s), 3) for s in found])


# --- coverage -----------------------------------------------------------------------------------------------

def test_every_peer_preset_is_checked_against_its_peer():
    checked = set(TRL_CONFIGS) | {"trl-rloo"} | set(VERL_NAMES) | {f"verl-{n}" for n in VERL_CORRECTIONS}
    checked |= set(OPENRLHF_CONFIGS)
    assert {n for n in PRESETS if not n.startswith("pglab")} == checked
