"""Single-turn replies: sample ``length`` tokens after each prompt, in lockstep, and decode them.

Each token is argmax(logits + Gumbel noise), an exact draw from softmax(logits); banned ids, at
-inf, never win. The noise [length, B, V] is drawn in one call, several times cheaper than a
multinomial per step. The sampled policy is the one ``HFPolicy.logits`` scores:
softmax(logits / T) with banned ids removed, cut to the top-p nucleus and renormalised.
"""

from __future__ import annotations

from typing import Any

import torch

from pglab.batch import POLICY, PROMPT, TokenBatch
from pglab.models.hf_decode import lockstep_decoder
from pglab.models.logits import autocast, full_precision, restrict, shape_logits
from pglab.models.policy import HFPolicy
from pglab.runtime.distributed import unwrap


@torch.no_grad()
def sample_replies(policy: HFPolicy, prompt_ids: torch.Tensor, length: int, generator: torch.Generator,
                   eos_id: int | None = None, *, group_size: int = 1,
                   prompt_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``length`` tokens after each prompt from the policy's shaped softmax, with a KV cache.

    prompt_ids [B, P] (left-padded where ``prompt_mask`` [B, P] is 0) -> ids [B, P + length],
    action_mask [B, P + length] (1 on sampled tokens up to and including the first end-of-text; the
    tokens after it are the policy's ``pad_id`` with mask 0). When the ``group_size`` rows of each
    group share their prompt, it is run once per group. The policy's temperature T and banned ids
    are folded into the noise once: argmax(z + T g) = argmax(z / T + g), and a banned id's noise is
    -inf. End-of-text banned (or None): every reply is ``length`` tokens, with no per-step bookkeeping.
    """
    model = unwrap(policy.module)
    batch, start = prompt_ids.shape
    decoder = lockstep_decoder(model, start + length, prompt_mask, group_size)
    ids = torch.empty(batch, start + length, dtype=torch.long, device=prompt_ids.device)
    ids[:, :start] = prompt_ids
    mask = torch.zeros_like(ids)
    with autocast(ids.device):
        logits = decoder(prompt_ids, 0)
    noise = torch.rand(length, *logits.shape, generator=generator, device=ids.device)
    noise = noise.log_().neg_().log_().neg_()
    temperature, top_p = getattr(policy, "temperature", 1.0), getattr(policy, "top_p", 1.0)
    if top_p >= 1.0:
        if temperature != 1.0:
            noise.mul_(temperature)
        restrict(noise, policy.banned, in_place=True)
    banned = policy.banned
    ends = eos_id is not None and not (banned is not None and bool((banned == eos_id).any()))
    alive = torch.ones(batch, dtype=torch.bool, device=ids.device) if ends else None
    if not ends:
        mask[:, start:] = 1
    for t in range(length):
        logits = full_precision(logits)
        if top_p < 1.0:
            logits = shape_logits(logits, banned, temperature, top_p)
        token = (logits + noise[t]).argmax(-1)
        if ends:
            ids[:, start + t] = torch.where(alive, token, torch.full_like(token, policy.pad_id))
            mask[:, start + t] = alive.long()
            alive &= token != eos_id
        else:
            ids[:, start + t] = token
        if t + 1 < length:
            with autocast(ids.device):
                logits = decoder(ids[:, start + t:start + t + 1], start + t)
    return ids, mask


@torch.no_grad()
def plain_sample_replies(policy: HFPolicy, prompt_ids: torch.Tensor, length: int, generator: torch.Generator,
                         eos_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference for :func:`sample_replies` (same arguments, same draws, bitwise): every row prefilled, the
    policy's shaping applied to the logits every step, every row's end-of-text bookkeeping every step."""
    model = unwrap(policy.module)
    batch, start = prompt_ids.shape
    decoder = lockstep_decoder(model, start + length)
    ids = torch.cat([prompt_ids, prompt_ids.new_zeros(batch, length)], 1)
    mask = torch.zeros_like(ids)
    alive = torch.ones(batch, dtype=torch.bool, device=ids.device)
    with autocast(ids.device):
        logits = decoder(prompt_ids, 0)
    gumbel = torch.rand(length, *logits.shape, generator=generator, device=ids.device).log_().neg_().log_().neg_()
    temperature, top_p = getattr(policy, "temperature", 1.0), getattr(policy, "top_p", 1.0)
    for t in range(length):
        token = (shape_logits(full_precision(logits), policy.banned, temperature, top_p) + gumbel[t]).argmax(-1)
        ids[:, start + t] = torch.where(alive, token, torch.full_like(token, policy.pad_id))
        mask[:, start + t] = alive.long()
        if eos_id is not None:
            alive &= token != eos_id
        if t + 1 < length:
            with autocast(ids.device):
                logits = decoder(ids[:, start + t:start + t + 1], start + t)
    return ids, mask


def decode_replies(tokenizer: Any, ids: torch.Tensor, mask: torch.Tensor, prompt_length: int,
                   prompt_texts: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(prompt + reply texts, reply texts) of ids [B, T], each reply stopping at its row's last action.

    The replies are decoded once; ``prompt_texts`` (one per row), when given, are the prompts as
    text, else the prompt ids are decoded (once per distinct prompt row).
    """
    ends = (mask * torch.arange(mask.shape[1], device=mask.device)).amax(-1) + 1
    rows = [row[prompt_length:end].tolist() for row, end in zip(ids, ends.tolist())]
    replies = tokenizer.batch_decode(rows, skip_special_tokens=True)
    if prompt_texts is None:
        prompts = {}
        for row in ids[:, :prompt_length].tolist():
            key = tuple(row)
            if key not in prompts:
                prompts[key] = tokenizer.decode(row, skip_special_tokens=True)
        prompt_texts = [prompts[tuple(row)] for row in ids[:, :prompt_length].tolist()]
    return [p + r for p, r in zip(prompt_texts, replies)], replies


def reply_batch(ids: torch.Tensor, action_mask: torch.Tensor, prompt_length: int, group_size: int,
                scores: torch.Tensor, ref_logp: torch.Tensor | None = None,
                prompt_mask: torch.Tensor | None = None) -> TokenBatch:
    """A TokenBatch of group-contiguous replies; ids, action_mask [B, T], scores [B] (float64).

    prompt_mask [B, prompt_length]: 0 on left padding (None: every prompt token is real).
    """
    attention = action_mask.clone()
    attention[:, :prompt_length] = 1 if prompt_mask is None else prompt_mask
    owner = torch.where(action_mask.bool(), POLICY, 0)
    owner[:, :prompt_length] = PROMPT if prompt_mask is None else prompt_mask * PROMPT
    group = torch.arange(ids.shape[0] // group_size, device=ids.device).repeat_interleave(group_size)
    return TokenBatch(ids=ids, attention_mask=attention, action_mask=action_mask, owner=owner, group=group,
                      rewards=scores.to(ids.device), ref_logp=ref_logp)


__all__ = ["decode_replies", "plain_sample_replies", "reply_batch", "sample_replies"]
