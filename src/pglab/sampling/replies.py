"""Single-turn replies: sample ``length`` tokens after each prompt, in lockstep, and decode them.

Each token is argmax(logits + Gumbel noise), an exact draw from softmax(logits); banned ids, at
-inf, never win. The noise [length, B, V] is drawn in one call, several times cheaper than a
multinomial per step.
"""

from __future__ import annotations

from typing import Any

import torch

from pglab.batch import POLICY, PROMPT, TokenBatch
from pglab.distributed import unwrap
from pglab.models.hf import autocast, full_precision, restrict
from pglab.models.hf_decode import lockstep_decoder
from pglab.models.policy import HFPolicy


@torch.no_grad()
def sample_replies(policy: HFPolicy, prompt_ids: torch.Tensor, length: int, generator: torch.Generator,
                   eos_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``length`` tokens after each prompt at temperature 1 with a KV cache.

    prompt_ids [B, P] -> ids [B, P + length], action_mask [B, P + length] (1 on sampled tokens up to
    and including the first end-of-text; the tokens after it are the policy's ``pad_id`` with mask 0).
    """
    model = unwrap(policy.module)
    batch, start = prompt_ids.shape
    decoder = lockstep_decoder(model, start + length)
    ids = torch.empty(batch, start + length, dtype=torch.long, device=prompt_ids.device)
    ids[:, :start] = prompt_ids
    mask = torch.zeros_like(ids)
    alive = torch.ones(batch, dtype=torch.bool, device=ids.device)
    with autocast(ids.device):
        logits = decoder(prompt_ids, 0)
    uniform = torch.rand(length, *logits.shape, generator=generator, device=ids.device)
    gumbel = uniform.log_().neg_().log_().neg_()
    for t in range(length):
        token = (restrict(full_precision(logits), policy.banned) + gumbel[t]).argmax(-1)
        ids[:, start + t] = torch.where(alive, token, torch.full_like(token, policy.pad_id))
        mask[:, start + t] = alive.long()
        if eos_id is not None:
            alive &= token != eos_id
        if t + 1 < length:
            with autocast(ids.device):
                logits = decoder(ids[:, start + t:start + t + 1], start + t)
    return ids, mask


def decode_replies(tokenizer: Any, ids: torch.Tensor, mask: torch.Tensor,
                   prompt_length: int) -> tuple[list[str], list[str]]:
    """(prompt + reply texts, reply texts) of ids [B, T], stopping at each row's last action."""
    ends = (mask * torch.arange(mask.shape[1], device=mask.device)).amax(-1) + 1
    rows = [row[:end].tolist() for row, end in zip(ids, ends.tolist())]
    texts = tokenizer.batch_decode(rows, skip_special_tokens=True)
    replies = tokenizer.batch_decode([r[prompt_length:] for r in rows], skip_special_tokens=True)
    return texts, replies


def reply_batch(ids: torch.Tensor, action_mask: torch.Tensor, prompt_length: int, group_size: int,
                scores: torch.Tensor, ref_logp: torch.Tensor | None = None) -> TokenBatch:
    """A TokenBatch of group-contiguous replies; ids, action_mask [B, T], scores [B] (float64)."""
    attention = action_mask.clone()
    attention[:, :prompt_length] = 1
    owner = torch.where(action_mask.bool(), POLICY, 0)
    owner[:, :prompt_length] = PROMPT
    group = torch.arange(ids.shape[0] // group_size, device=ids.device).repeat_interleave(group_size)
    return TokenBatch(ids=ids, attention_mask=attention, action_mask=action_mask, owner=owner, group=group,
                      rewards=scores.to(ids.device), ref_logp=ref_logp)


__all__ = ["decode_replies", "reply_batch", "sample_replies"]
