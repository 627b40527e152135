"""REINFORCE for any Hugging Face causal LM: EMA baseline, RLOO, GRPO, Dr. GRPO, a per-token KL penalty.

The recipe of llm-ch6 §6.11-6.12. One step samples ``num_generations`` replies to each of
``prompts_per_step`` prompts at temperature 1 with a KV cache (banned tokens get probability 0
when sampling and when scoring, so the policy sampled from is the policy differentiated), scores
prompt + reply with the reward, turns the scores into per-token rewards with the KL penalty (k1
in the reward through ``kl_shaped_rewards``, or k3 in the loss as TRL's GRPO does), takes
reward-to-go, subtracts a baseline and takes one guarded Adam step (``policy_gradient_step``).

Batch layout (a ``TokenBatch``): every prompt is cut to ``prompt_length`` tokens, so ids are
[B, P + L] with the reply at positions P..P+L-1; a reply that samples end-of-text (when it is not
banned) is padded after it (attention and action mask 0). Rows are group-contiguous: the K
replies to one prompt are rows gK..gK+K-1.

Scale-out: under ``torchrun`` the policy is wrapped in DistributedDataParallel (gloo on CPU,
nccl on CUDA). Every rank samples whole groups (its share of the step's prompts); the returns of
all ranks are gathered so that baselines and metrics see the whole batch, and the loss is
normalised by global counts, so one step over N ranks equals one single-process step on the
union of their rows. Only rank 0 evaluates, logs and writes checkpoints.

Optional dependencies (transformers, vaderSentiment) are imported inside functions.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import gc
import inspect
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from pglab.estimators import (
    EMABaseline,
    aggregate_loss,
    discounted_returns,
    exact_kl,
    group_normalize,
    kl_estimate,
    kl_shaped_rewards,
    leave_one_out,
    reinforce_loss,
)
from pglab.estimators.losses import MODES
from pglab.progress import track
from pglab.rollout import POLICY, PROMPT, TokenBatch
from pglab.trainers.step import policy_gradient_step

ADVANTAGES = ("reinforce", "rloo", "grpo", "dr_grpo")
KL_IN = ("reward", "loss")
SCALES = ("group", "batch", "none")


@dataclass
class RLConfig:
    """Settings of ``train_lm`` (CLI: ``pglab train-lm --field-name VALUE``); TRL's names where TRL has one."""

    model: str = "default"
    """A causal-LM folder (or hub id) for AutoModelForCausalLM.from_pretrained; "default": the embedded tiny GPT-2."""
    default_size: str = "full"
    """Size of the embedded default when model is "default": full (pretrained in <= 3 min) or quick (seconds)."""
    reward: str = "vader"
    """vader | hf-classifier:PATH (positive minus negative logit) | module:function (texts -> floats)."""
    prompts: str | None = None
    """A text file with one prompt per line (split 7:1 into train and eval); None: held-out synthetic reviews."""
    max_steps: int = 200
    """Optimiser steps."""
    learning_rate: float = 1e-3
    """Adam step size."""
    prompts_per_step: int = 16
    """Prompts per step (the global batch under torchrun; divisible by the number of processes)."""
    num_generations: int = 4
    """Replies sampled per prompt (K, the group of RLOO and GRPO)."""
    prompt_length: int = 8
    """Every prompt is cut to its first this-many tokens (shorter prompts are dropped)."""
    max_completion_length: int = 24
    """Reply tokens sampled per prompt."""
    ban_eos: bool = True
    """Give end-of-text probability 0 when sampling and scoring: every reply has max_completion_length tokens."""
    banned_tokens: tuple[int, ...] = ()
    """More token ids to ban, in sampling and in scoring alike."""
    advantage: str = "rloo"
    """reinforce (EMA baseline) | rloo (leave-one-out) | grpo (group-normalised) | dr_grpo (centred only)."""
    scale_rewards: str = "group"
    """grpo only: divide by the group's std (group), the batch's (batch) or nothing (none)."""
    ema_decay: float = 0.9
    """reinforce only: decay of the running baseline."""
    beta: float = 0.05
    """Price of one nat of KL to the reference model (0: no penalty and no reference pass in training)."""
    kl_in: str = "reward"
    """reward: k1 per token in the reward, with reward-to-go (llm-ch6 §6.12); loss: k3 added to the loss (TRL GRPO)."""
    aggregation: str | None = None
    """token_mean | seq_mean_token_sum | seq_mean_token_mean | constant; None: constant for dr_grpo, else token_mean."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this."""
    seed: int = 0
    """Seed of the prompt draws and of sampling (per step, so a resumed run draws the same numbers)."""
    device: str = "cpu"
    """cpu | cuda (bf16 autocast; cuda is untested here)."""
    eval_every: int = 0
    """Evaluate on the held-out prompts every this-many steps (0: only before and after training)."""
    eval_prompts: int = 64
    """Held-out prompts per evaluation."""
    eval_generations: int = 4
    """Replies per held-out prompt."""
    sample_steps: tuple[int, ...] = ()
    """Also evaluate (and keep samples) after these steps."""
    samples: int = 4
    """Samples kept per evaluation."""
    output_dir: str | None = None
    """Folder for metrics.jsonl, eval.jsonl, checkpoint.pt and the final policy (None: nothing is written)."""
    checkpoint_every: int = 50
    """Write checkpoint.pt (atomically) every this-many steps, and at the end (0: only at the end)."""
    resume: bool = False
    """Continue from output_dir/checkpoint.pt (exact on CPU: the same numbers as an uninterrupted run)."""

    def validate(self) -> None:
        """Raise ValueError naming the fix for any inconsistent setting."""
        positive = ("max_steps", "prompts_per_step", "prompt_length", "max_completion_length", "eval_prompts",
                    "eval_generations")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        for name, value, known in (("advantage", self.advantage, ADVANTAGES), ("kl-in", self.kl_in, KL_IN),
                                   ("scale-rewards", self.scale_rewards, SCALES),
                                   ("aggregation", self.aggregation or "token_mean", MODES),
                                   ("device", self.device, ("cpu", "cuda"))):
            if value not in known:
                raise ValueError(f"unknown --{name} {value!r}; pass one of {', '.join(known)}")
        if self.advantage != "reinforce" and self.num_generations < 2:
            raise ValueError(f"--advantage {self.advantage} compares replies to one prompt: "
                             "pass --num-generations >= 2")
        if self.beta < 0 or self.learning_rate <= 0:
            raise ValueError("pass --beta >= 0 and --learning-rate > 0")
        if self.resume and not self.output_dir:
            raise ValueError("--resume needs --output-dir (the folder holding checkpoint.pt)")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda but torch sees no CUDA device; pass --device cpu")

    @property
    def loss_mode(self) -> str:
        return self.aggregation or ("constant" if self.advantage == "dr_grpo" else "token_mean")


def config_help() -> dict[str, str]:
    """Field name -> its docstring, read from RLConfig's source (for the CLI's --help)."""
    tree = ast.parse(inspect.getsource(RLConfig))
    body = tree.body[0].body
    docs = {}
    for stmt, nxt in zip(body, body[1:]):
        if isinstance(stmt, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[stmt.target.id] = str(nxt.value.value)
    return docs


# ----------------------------------------------------------------------------------------------- processes


def world() -> tuple[int, int]:
    """(rank, world size) of the initialised process group, (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_rows(x: torch.Tensor) -> torch.Tensor:
    """Concatenate every rank's x [b, ...] along dim 0 in rank order (x itself in one process)."""
    import torch.distributed as dist

    if world()[1] == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(world()[1])]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a DistributedDataParallel wrapper (the model itself otherwise)."""
    return getattr(model, "module", model)


# ----------------------------------------------------------------------------------------------- forward passes


def _accepts(model: torch.nn.Module, name: str) -> bool:
    return name in inspect.signature(unwrap(model).forward).parameters


def _full_precision(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def autocast(device: torch.device):
    """bf16 autocast on CUDA, a no-op context on CPU."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def restrict(logits: torch.Tensor, banned: torch.Tensor | None) -> torch.Tensor:
    """logits [..., V] with the banned ids at -inf (probability 0); banned: long ids or None."""
    return logits if banned is None or banned.numel() == 0 else logits.index_fill(-1, banned, -math.inf)


def reply_logits(model: torch.nn.Module, ids: torch.Tensor, start: int, group_size: int = 1) -> torch.Tensor:
    """Logits that predict ids[:, start:]; ids [B, T] -> [B, T - start, V] (float32 under autocast).

    When every ``group_size`` consecutive rows share their first ``start`` tokens (the replies to
    one prompt), the prompt runs once per group and its KV cache is repeated for the group's rows:
    the same logits up to float rounding, for (K - 1) / K less prompt work in forward and backward.
    """
    keep = ids.shape[1] - start + 1
    if not _accepts(model, "logits_to_keep"):
        with autocast(ids.device):
            return _full_precision(model(input_ids=ids).logits[:, -keep:-1])
    prompts = ids[::group_size, :start]
    if group_size == 1 or keep < 3 or not bool((ids[:, :start].view(-1, group_size, start) == prompts[:, None]).all()):
        with autocast(ids.device):
            return _full_precision(model(input_ids=ids, logits_to_keep=keep).logits[:, :-1])
    cache_kw = "cache" if _accepts(model, "cache") else "past_key_values"
    with autocast(ids.device):
        head = unwrap(model)(input_ids=prompts, use_cache=True, logits_to_keep=1)
        cache = _cache_of(head)
        for layer in cache.layers:
            layer.batch_repeat_interleave(group_size)
        rest = model(input_ids=ids[:, start:-1], **{cache_kw: cache}).logits
    return _full_precision(torch.cat([head.logits.repeat_interleave(group_size, 0), rest], 1))


def token_logp(logits: torch.Tensor, ids: torch.Tensor, start: int) -> torch.Tensor:
    """log pi(ids[t] | ids[:t]) aligned with ids; logits [B, T - start, V], ids [B, T] -> [B, T] (0 before start)."""
    picked = torch.log_softmax(logits, -1).gather(-1, ids[:, start:, None]).squeeze(-1)
    return F.pad(picked, (start, 0))


Decoder = Callable[[torch.Tensor, int], torch.Tensor]
"""(ids [B, q] at positions position..position+q-1, position) -> logits [B, V] of the token after them."""


def _cache_of(output: Any) -> Any:
    return output["cache"] if "cache" in output.keys() else output["past_key_values"]


def _hf_decoder(model: torch.nn.Module) -> Decoder:
    """A Decoder through the model's own forward and cache (any causal LM)."""
    cache_kw = "cache" if _accepts(model, "cache") else "past_key_values"
    last_only = {"logits_to_keep": 1} if _accepts(model, "logits_to_keep") else {}
    cache: dict[str, Any] = {}

    def step(ids: torch.Tensor, position: int) -> torch.Tensor:
        past = {cache_kw: cache["kv"]} if position else {}
        out = model(input_ids=ids, use_cache=True, **last_only, **past)
        cache["kv"] = _cache_of(out)
        return out.logits[:, -1]

    return step


class _StaticCache:
    """Preallocated keys and values, one [B, heads, T, head_dim] pair per layer, filled through ``update``.

    GPT-2's attention layers call ``update`` with the new positions' keys and values and attend to
    what it returns; ``filled`` is the number of positions written before the current forward.
    """

    def __init__(self, layers: int, length: int) -> None:
        self.layers, self.length, self.filled = layers, length, 0
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def update(self, key: torch.Tensor, value: torch.Tensor, layer: int, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Write key, value [B, heads, q, head_dim] at filled..filled+q-1; return [B, heads, filled+q, head_dim]."""
        if layer == len(self.keys):
            batch, heads, _, dim = key.shape
            self.keys.append(key.new_empty(batch, heads, self.length, dim))
            self.values.append(value.new_empty(batch, heads, self.length, dim))
        end = self.filled + key.shape[2]
        self.keys[layer][:, :, self.filled:end] = key
        self.values[layer][:, :, self.filled:end] = value
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]


def _gpt2_decoder(model: torch.nn.Module, length: int) -> Decoder | None:
    """A Decoder that runs a GPT2LMHeadModel's own blocks over a ``_StaticCache`` of ``length`` positions.

    The same function as the model's forward, without HF's per-call cache and mask machinery (which
    costs more than a 2-layer model's arithmetic); the last layer norm and lm_head see only the last
    position. None for any other model, or for attention other than sdpa (which masks causally when
    given no mask).
    """
    from transformers import GPT2LMHeadModel

    config = getattr(model, "config", None)
    if not isinstance(model, GPT2LMHeadModel) or config._attn_implementation != "sdpa" or config.add_cross_attention:
        return None
    body, cache = model.transformer, _StaticCache(config.n_layer, length)

    def step(ids: torch.Tensor, position: int) -> torch.Tensor:
        cache.filled = position
        hidden = body.wte(ids) + body.wpe(torch.arange(position, position + ids.shape[1], device=ids.device))
        for block in body.h:
            hidden = block(hidden, cache)
        return model.lm_head(body.ln_f(hidden[:, -1]))

    return step


@torch.no_grad()
def sample_replies(model: torch.nn.Module, prompt_ids: torch.Tensor, length: int, generator: torch.Generator,
                   banned: torch.Tensor | None = None, eos_id: int | None = None,
                   pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``length`` tokens after each prompt at temperature 1 with a KV cache.

    prompt_ids [B, P] -> ids [B, P + length], action_mask [B, P + length] (1 on sampled tokens up to
    and including the first end-of-text; the tokens after it are ``pad_id`` with mask 0). Each token
    is argmax(logits + Gumbel noise), an exact draw from softmax(logits) (banned ids, at -inf, never
    win); the noise [length, B, V] is drawn in one call, several times cheaper than a multinomial per step.
    """
    model = unwrap(model)
    batch, start = prompt_ids.shape
    decoder = _gpt2_decoder(model, start + length) or _hf_decoder(model)
    ids = torch.empty(batch, start + length, dtype=torch.long, device=prompt_ids.device)
    ids[:, :start] = prompt_ids
    mask = torch.zeros_like(ids)
    alive = torch.ones(batch, dtype=torch.bool, device=ids.device)
    with autocast(ids.device):
        logits = decoder(prompt_ids, 0)
    uniform = torch.rand(length, *logits.shape, generator=generator, device=ids.device)
    gumbel = uniform.log_().neg_().log_().neg_()
    for t in range(length):
        token = (restrict(_full_precision(logits), banned) + gumbel[t]).argmax(-1)
        ids[:, start + t] = torch.where(alive, token, torch.full_like(token, pad_id))
        mask[:, start + t] = alive.long()
        if eos_id is not None:
            alive &= token != eos_id
        if t + 1 < length:
            with autocast(ids.device):
                logits = decoder(ids[:, start + t:start + t + 1], start + t)
    return ids, mask


def make_batch(ids: torch.Tensor, action_mask: torch.Tensor, prompt_length: int, group_size: int,
               scores: torch.Tensor, ref_logp: torch.Tensor | None = None) -> TokenBatch:
    """A TokenBatch of group-contiguous rows; ids, action_mask [B, T], scores [B] (float64)."""
    batch, _ = ids.shape
    attention = action_mask.clone()
    attention[:, :prompt_length] = 1
    owner = torch.where(action_mask.bool(), POLICY, 0)
    owner[:, :prompt_length] = PROMPT
    group = torch.arange(batch // group_size, device=ids.device).repeat_interleave(group_size)
    return TokenBatch(ids=ids, attention_mask=attention, action_mask=action_mask, owner=owner, group=group,
                      rewards=scores.to(ids.device), ref_logp=ref_logp)


# ----------------------------------------------------------------------------------------------- the update


def advantages(returns: torch.Tensor, mask: torch.Tensor, kind: str, group_size: int, scale: str = "group",
               ema: EMABaseline | None = None) -> torch.Tensor:
    """Per-token advantages from reward-to-go; returns, mask [B, T] (B = groups x group_size) -> [B, T].

    reinforce: G_t minus the EMA of the batch's mean return (then folds this batch in); rloo:
    leave-one-out within each group, position by position (llm-ch6 §6.11); grpo: group-normalised
    with ``scale``; dr_grpo: centred only. Non-policy positions get 0.
    """
    batch, length = returns.shape
    if kind == "reinforce":
        if ema is None:
            raise ValueError("advantage 'reinforce' needs an EMABaseline; pass ema=EMABaseline(0.0, decay)")
        first = mask.argmax(-1)
        baseline = ema.value
        ema.update(returns.gather(1, first[:, None]).mean())
        return (returns - baseline) * mask
    grouped = returns.view(batch // group_size, group_size, length)
    if kind == "rloo":
        adv = leave_one_out(grouped, dim=1)
    elif kind == "grpo":
        adv = group_normalize(grouped, dim=1, scale=scale)
    elif kind == "dr_grpo":
        adv = group_normalize(grouped, dim=1, scale="none")
    else:
        raise ValueError(f"unknown advantage {kind!r}; pass one of {', '.join(ADVANTAGES)}")
    return adv.reshape(batch, length) * mask


def zero_advantage_fraction(adv: torch.Tensor, group_size: int) -> float:
    """Fraction of groups whose advantages are all 0 (no gradient signal: e.g. K equal rewards); adv [B, T]."""
    per_group = adv.view(-1, group_size * adv.shape[1]).abs().amax(-1)
    return float((per_group < 1e-12).double().mean())


def rl_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: TokenBatch, cfg: RLConfig, *,
              prompt_length: int, banned: torch.Tensor | None = None, ema: EMABaseline | None = None) -> dict:
    """One policy-gradient step on this process's rows of ``batch`` (rewards = the scores [B]).

    ``batch.ref_logp`` [B, T] is needed when beta > 0. Under DistributedDataParallel the rows of all
    ranks are gathered for the baseline and the metrics, and the loss is normalised by global
    counts, so the step equals one single-process step on every rank's rows together.
    Returns the step's metrics (global).
    """
    rank, size = world()
    group_size = cfg.num_generations
    rows, length = batch.ids.shape
    if rows % group_size or not (batch.group.view(-1, group_size) == batch.group.view(-1, group_size)[:, :1]).all():
        raise ValueError(f"rows must come in whole, contiguous groups of {group_size}; sample num_generations "
                         "replies per prompt on the same process")
    if cfg.beta > 0 and batch.ref_logp is None:
        raise ValueError("beta > 0 needs batch.ref_logp (the reference model's log-probs of the batch)")
    logits = restrict(reply_logits(model, batch.ids, prompt_length, group_size), banned)
    logp = torch.where(batch.action_mask.bool(), token_logp(logits, batch.ids, prompt_length), 0.0)
    mask = batch.action_mask.to(logp.dtype)
    ref_logp = batch.ref_logp.to(logp.dtype) if batch.ref_logp is not None else logp.detach()
    scores = batch.rewards.to(logp.dtype)
    shaped_beta = cfg.beta if cfg.kl_in == "reward" else 0.0
    returns = discounted_returns(kl_shaped_rewards(scores, logp.detach(), ref_logp, mask, shaped_beta), 1.0,
                                 mask=mask)
    all_returns, all_mask = gather_rows(returns), gather_rows(mask)
    all_adv = advantages(all_returns, all_mask, cfg.advantage, group_size, cfg.scale_rewards, ema)
    adv = all_adv[rank * rows:(rank + 1) * rows]

    mode, norm_const = cfg.loss_mode, None
    if mode == "constant":
        norm_const = all_mask.shape[0] * cfg.max_completion_length / size
    elif mode == "token_mean" and size > 1:
        mode, norm_const = "constant", float(all_mask.sum()) / size
    loss = reinforce_loss(logp, adv, mask, mode, norm_const)
    if cfg.beta > 0 and cfg.kl_in == "loss":
        loss = loss + cfg.beta * aggregate_loss(kl_estimate(logp, ref_logp, "k3"), mask, mode, norm_const)
    step = policy_gradient_step(model, optimizer, loss, max_grad_norm=cfg.max_grad_norm)

    k1 = ((logp.detach() - ref_logp) * mask).sum(-1)
    gathered = gather_rows(torch.stack([scores, k1, mask.sum(-1)], -1).detach())
    loss_sum = gather_rows(torch.tensor([step["loss"]], dtype=torch.float64, device=logp.device)).mean()
    return {"reward": float(gathered[:, 0].mean()), "reward_std": float(gathered[:, 0].std()),
            "kl_k1": float(gathered[:, 1].mean()), "reply_tokens": float(gathered[:, 2].mean()),
            "zero_adv_groups": zero_advantage_fraction(all_adv, group_size), "loss": float(loss_sum),
            "grad_norm": step["grad_norm"], "skipped": step["skipped"]}


# ----------------------------------------------------------------------------------------------- evaluation


def distinct_n(texts: list[str], n: int) -> float:
    """Distinct n-grams of whitespace words over all n-grams in ``texts`` (0 when there is none)."""
    grams = [tuple(words[i:i + n]) for words in (t.split() for t in texts) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


@dataclass
class Rollout:
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
    """[B] sum over reply positions of the exact per-position KL(pi || ref) over the (allowed) vocabulary."""
    entropy: torch.Tensor
    """[B] sum over reply positions of the policy's entropy."""


def decode(tokenizer: Any, ids: torch.Tensor, mask: torch.Tensor, prompt_length: int) -> tuple[list[str], list[str]]:
    """(prompt + reply texts, reply texts) of ids [B, T], stopping at each row's last action."""
    ends = (mask * torch.arange(mask.shape[1], device=mask.device)).amax(-1) + 1
    rows = [row[:end].tolist() for row, end in zip(ids, ends.tolist())]
    texts = tokenizer.batch_decode(rows, skip_special_tokens=True)
    replies = tokenizer.batch_decode([r[prompt_length:] for r in rows], skip_special_tokens=True)
    return texts, replies


@torch.no_grad()
def score_rollout(policy: torch.nn.Module, ref: torch.nn.Module, tokenizer: Any, ids: torch.Tensor,
                  mask: torch.Tensor, prompt_length: int, reward: Callable, banned: torch.Tensor | None,
                  chunk: int = 32) -> Rollout:
    """Teacher-force ids [B, T] through policy and reference (``chunk`` rows at a time) and score the texts."""
    vocab = unwrap(policy).get_output_embeddings().weight.shape[0]
    keep = torch.ones(vocab, dtype=torch.bool, device=ids.device)
    if banned is not None:
        keep[banned] = False
    allowed = keep.nonzero().flatten()
    parts: dict[str, list[torch.Tensor]] = {"logp": [], "ref_logp": [], "kl": [], "entropy": []}
    for i in range(0, ids.shape[0], chunk):
        rows, m = ids[i:i + chunk], mask[i:i + chunk, prompt_length:].to(torch.float64)
        logits = reply_logits(unwrap(policy), rows, prompt_length).index_select(-1, allowed).double()
        ref_logits = reply_logits(unwrap(ref), rows, prompt_length).index_select(-1, allowed).double()
        local = torch.searchsorted(allowed, rows.clamp(max=vocab - 1))  # position of each id among the allowed
        parts["logp"].append(torch.where(mask[i:i + chunk].bool(), token_logp(logits, local, prompt_length), 0.0))
        parts["ref_logp"].append(torch.where(mask[i:i + chunk].bool(),
                                             token_logp(ref_logits, local, prompt_length), 0.0))
        parts["kl"].append((exact_kl(logits, ref_logits) * m).sum(-1))
        logq = torch.log_softmax(logits, -1)
        parts["entropy"].append((-(logq.exp() * logq).sum(-1) * m).sum(-1))
    texts, replies = decode(tokenizer, ids, mask, prompt_length)
    cat = {k: torch.cat(v) for k, v in parts.items()}
    return Rollout(ids, mask, texts, replies, reward(texts), cat["logp"], cat["ref_logp"], cat["kl"],
                   cat["entropy"])


def rollout_metrics(r: Rollout, reward: Any) -> dict:
    """Means (and standard errors) over the replies of a scored rollout."""
    n = len(r.texts)
    tokens = r.mask.sum().double()
    k1 = (r.logp - r.ref_logp).sum(-1)
    se = lambda x: float(x.std() / math.sqrt(n)) if n > 1 else math.nan  # noqa: E731
    positive = reward.positive_probability(r.texts) if hasattr(reward, "positive_probability") else None
    return {"reward": float(r.scores.mean()), "reward_se": se(r.scores),
            "p_positive": float(positive.mean()) if positive is not None else None,
            "kl_exact": float(r.exact_kl.mean()), "kl_exact_se": se(r.exact_kl),
            "kl_k1": float(k1.mean()), "kl_k1_se": se(k1), "kl_gap_se": se(k1 - r.exact_kl),
            "entropy": float(r.entropy.sum() / tokens),
            "ref_perplexity": float(torch.exp(-r.ref_logp.sum() / tokens)),
            "distinct_1": distinct_n(r.replies, 1), "distinct_2": distinct_n(r.replies, 2), "replies": n}


def worked_example(r: Rollout, row: int, beta: float, tokenizer: Any, prompt_length: int) -> tuple[list[dict], dict]:
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
    check = {"prompt": tokenizer.decode(r.ids[row, :prompt_length].tolist()), "R": float(r.scores[row]),
             "beta": beta, "sum_log_ratio": ratio_sum, "R_minus_beta_sum": float(r.scores[row]) - beta * ratio_sum,
             "G_0": rows[0]["G_t"], "sum_r_t": float(rewards.sum())}
    gaps = (check["G_0"] - check["R_minus_beta_sum"], check["sum_r_t"] - check["G_0"])
    check["sums_agree"] = max(abs(g) for g in gaps) < 1e-9
    return rows, check


# ----------------------------------------------------------------------------------------------- models and prompts


def load_model(cfg: RLConfig, progress: bool = True) -> tuple[torch.nn.Module, Any]:
    """(policy, tokenizer) from cfg.model through from_pretrained; "default" builds the embedded default first."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as err:
        raise ValueError("train-lm needs transformers: pip install 'pglab[lm]'") from err
    hf_logging.disable_progress_bar()   # weight-loading bars would interleave with the JSON lines
    from pglab.trainers.lm_default import ensure_default_model

    path = ensure_default_model(cfg.default_size, progress=progress) if cfg.model == "default" else cfg.model
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)
    except OSError as err:
        raise ValueError(f"cannot load --model {cfg.model}: {err}".splitlines()[0] +
                         "; pass a folder written by save_pretrained (no network is used)") from err
    return fuse_activations(model), tokenizer


def fuse_activations(model: torch.nn.Module) -> torch.nn.Module:
    """Swap each ``gelu_new`` module (GPT-2's tanh GELU, six elementwise kernels) for ``GELUTanh``, in place.

    The same function in one fused kernel (``F.gelu(approximate="tanh")``; equal up to float rounding):
    it roughly halves the MLP's elementwise time in sampling, scoring and backward. The saved config
    still names gelu_new, so a reloaded model computes the same function.
    """
    from transformers.activations import GELUTanh, NewGELUActivation

    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, NewGELUActivation):
                setattr(module, name, GELUTanh())
    return model


def prompt_tensors(cfg: RLConfig, tokenizer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, eval) prompt ids [N, prompt_length]: each prompt's first prompt_length tokens."""
    if cfg.prompts:
        lines = [s.strip() for s in Path(cfg.prompts).read_text().splitlines() if s.strip()]
        cut = len(lines) * 7 // 8
        texts = {"train": lines[:cut], "eval": lines[cut:]}
    else:
        from pglab.trainers.lm_default import review_openings

        texts = {"train": review_openings("train", 4000), "eval": review_openings("eval", max(256, cfg.eval_prompts))}
    out = []
    for split in ("train", "eval"):
        ids = [x[:cfg.prompt_length] for x in tokenizer(texts[split])["input_ids"] if len(x) >= cfg.prompt_length]
        if not ids:
            raise ValueError(f"no {split} prompt has {cfg.prompt_length} tokens; pass a smaller --prompt-length "
                             "or longer prompts")
        out.append(torch.tensor(ids, dtype=torch.long))
    return out[0], out[1]


def banned_ids(cfg: RLConfig, tokenizer: Any) -> torch.Tensor:
    """The banned token ids (end-of-text when ban_eos, then banned_tokens) as a long tensor."""
    ids = list(cfg.banned_tokens)
    if cfg.ban_eos and tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    return torch.tensor(sorted(set(ids)), dtype=torch.long)


def step_generator(seed: int, step: int, stream: int, device: torch.device) -> torch.Generator:
    """A generator for one step's draws: stream 0 picks prompts (shared by ranks), 1 + rank samples, -1 evaluates."""
    return torch.Generator(device=device).manual_seed(((seed * 1_000_003 + step) * 1009 + stream + 1) % 2**63)


# ----------------------------------------------------------------------------------------------- the loop


@dataclass
class LMRun:
    """What train_lm returns: per-step metrics, evaluations (with samples) and the worked example."""

    config: dict
    history: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    worked_example: list[dict] = field(default_factory=list)
    worked_check: dict = field(default_factory=dict)
    final_replies: list[str] = field(default_factory=list)
    policy: Any = None
    tokenizer: Any = None


def _init_distributed(device: str) -> tuple[torch.device, bool]:
    """Join the torchrun process group when WORLD_SIZE > 1; returns (this rank's device, whether we joined)."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        return torch.device(f"cuda:{local}" if device == "cuda" else "cpu"), False
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    return torch.device(f"cuda:{local}" if device == "cuda" else "cpu"), True


def _atomic_save(obj: Any, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


RESUME_KEYS = ("model", "default_size", "reward", "prompts", "learning_rate", "prompts_per_step", "num_generations",
               "prompt_length", "max_completion_length", "ban_eos", "banned_tokens", "advantage", "scale_rewards",
               "ema_decay", "beta", "kl_in", "aggregation", "max_grad_norm", "seed")
"""Settings a resumed run must share with the checkpoint."""


def train_lm(cfg: RLConfig, *, reward: Callable | None = None, log: Callable[[dict], None] | None = None,
             progress: bool = True) -> LMRun:
    """Train cfg.model with REINFORCE and the chosen baseline and KL penalty; evaluate before, during and after.

    ``reward`` overrides cfg.reward with a Reward (or any callable texts -> scores); ``log`` receives
    one dict of metrics per step. Under torchrun (WORLD_SIZE > 1) joins the process group.
    """
    from pglab.trainers.lm_rewards import make_reward

    cfg.validate()
    device, joined = _init_distributed(cfg.device)
    rank, size = world()
    if cfg.prompts_per_step % size:
        raise ValueError(f"--prompts-per-step {cfg.prompts_per_step} must be divisible by the {size} processes")
    import torch.distributed as dist

    try:
        run = _train(cfg, device, rank, size, reward or make_reward(cfg.reward, device), log, progress)
        if joined:
            gc.collect()                   # free the DDP reducer while its process group still exists
            dist.barrier()                 # no rank leaves while another still talks to it (gloo aborts then)
        return run
    finally:
        if joined:
            dist.destroy_process_group()


def _train(cfg: RLConfig, device: torch.device, rank: int, size: int, reward: Callable,
           log: Callable[[dict], None] | None, progress: bool) -> LMRun:
    policy, tokenizer = load_model(cfg, progress=progress and rank == 0)
    policy.to(device).eval()                      # eval mode: no dropout, so sampling and scoring share one policy
    ref = copy.deepcopy(policy).requires_grad_(False) if cfg.beta > 0 else None   # no copy at beta = 0
    train_prompts, eval_prompts = (p.to(device) for p in prompt_tensors(cfg, tokenizer))
    banned = banned_ids(cfg, tokenizer).to(device)
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos or 0)
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate)
    ema = EMABaseline(0.0, cfg.ema_decay) if cfg.advantage == "reinforce" else None
    run = LMRun(config=dataclasses.asdict(cfg), tokenizer=tokenizer)
    out = Path(cfg.output_dir) if cfg.output_dir else None
    first = 0
    if cfg.resume and (out / "checkpoint.pt").exists():
        state = torch.load(out / "checkpoint.pt", map_location=device, weights_only=False)
        changed = [k for k in RESUME_KEYS if state["config"].get(k) != run.config.get(k)]
        if changed:
            raise ValueError(f"cannot resume: {', '.join(changed)} differ from the checkpoint; pass the same settings")
        policy.load_state_dict(state["policy"])
        optimizer.load_state_dict(state["optimizer"])
        if ema is not None:
            ema.value, ema.count = state["ema"]
        first, run.history, run.evals = state["step"], state["history"], state["evals"]
    if out is not None and rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        if first == 0:
            for name in ("metrics.jsonl", "eval.jsonl"):
                (out / name).unlink(missing_ok=True)
    model = policy
    if size > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(policy, device_ids=[device.index] if device.type == "cuda" else None)
    eval_steps = {0, cfg.max_steps, *cfg.sample_steps}
    if cfg.eval_every:
        eval_steps.update(range(cfg.eval_every, cfg.max_steps + 1, cfg.eval_every))
    local_prompts = cfg.prompts_per_step // size

    def evaluate(step: int) -> None:
        gen = step_generator(cfg.seed, 0, -1, device)
        prompts = eval_prompts[:cfg.eval_prompts].repeat_interleave(cfg.eval_generations, 0)
        ids, mask = sample_replies(policy, prompts, cfg.max_completion_length, gen, banned, eos, pad)
        # at beta = 0 the reference is loaded only while evaluating (before training it is the policy itself)
        reference = ref if ref is not None else policy if step == 0 else load_model(cfg, False)[0].to(device).eval()
        rollout = score_rollout(policy, reference, tokenizer, ids, mask, cfg.prompt_length, reward, banned)
        record = {"step": step, **rollout_metrics(rollout, reward), "samples": rollout.texts[:cfg.samples]}
        run.evals.append(record)
        if out is not None:
            with open(out / "eval.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")
        if step == cfg.max_steps:
            run.final_replies = rollout.replies
            run.worked_example, run.worked_check = worked_example(rollout, 0, cfg.beta, tokenizer, cfg.prompt_length)

    if rank == 0 and first == 0:
        evaluate(0)
    steps = range(first, cfg.max_steps)
    for step in track(steps, "train-lm", total=len(steps)) if progress and rank == 0 else steps:
        start = time.perf_counter()
        pick = torch.randint(len(train_prompts), (cfg.prompts_per_step,), generator=step_generator(cfg.seed, step, 0,
                                                                                                    device),
                             device=device)[rank * local_prompts:(rank + 1) * local_prompts]
        prompts = train_prompts[pick].repeat_interleave(cfg.num_generations, 0)
        ids, mask = sample_replies(policy, prompts, cfg.max_completion_length,
                                   step_generator(cfg.seed, step, 1 + rank, device), banned, eos, pad)
        texts, _ = decode(tokenizer, ids, mask, cfg.prompt_length)
        ref_logp = None
        if cfg.beta > 0:
            with torch.no_grad():
                ref_logits = restrict(reply_logits(ref, ids, cfg.prompt_length, cfg.num_generations), banned)
                ref_logp = torch.where(mask.bool(), token_logp(ref_logits, ids, cfg.prompt_length), 0.0)
        batch = make_batch(ids, mask, cfg.prompt_length, cfg.num_generations, reward(texts), ref_logp)
        metrics = rl_update(model, optimizer, batch, cfg, prompt_length=cfg.prompt_length, banned=banned, ema=ema)
        record = {"step": step + 1, **metrics, "seconds": time.perf_counter() - start}
        run.history.append(record)
        if rank == 0:
            if log is not None:
                log(record)
            if out is not None:
                with open(out / "metrics.jsonl", "a") as f:
                    f.write(json.dumps(record) + "\n")
            if step + 1 in eval_steps:
                evaluate(step + 1)
            due = cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0
            if out is not None and (due or step + 1 == cfg.max_steps):
                _atomic_save({"step": step + 1, "policy": policy.state_dict(), "optimizer": optimizer.state_dict(),
                              "ema": (ema.value, ema.count) if ema else None, "history": run.history,
                              "evals": run.evals, "config": run.config}, out / "checkpoint.pt")
    if out is not None and rank == 0:
        policy.save_pretrained(out / "policy")
        tokenizer.save_pretrained(out / "policy")
        if run.worked_example:
            (out / "worked_example.json").write_text(json.dumps({"rows": run.worked_example,
                                                                 "check": run.worked_check}, indent=1))
    run.policy = policy
    return run


def curves_figure(runs: dict[str, LMRun]):
    """Reward, exact KL, entropy per token and distinct-1 at each evaluation, one line per run."""
    from pglab.plots import new_figure

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
