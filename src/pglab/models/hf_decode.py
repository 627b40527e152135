"""Lockstep decoders for Hugging Face causal LMs: every row at the same position, one new token a call.

A Decoder maps (ids [B, q] at positions position..position+q-1, position) to the logits [B, V] of
the token after them. ``gpt2_decoder`` runs a GPT-2's own blocks over a preallocated cache;
``hf_decoder`` goes through any model's forward and cache. Both take the prompts' attention mask
(left padding: 0 on the padding, whose positions then do not count) and a ``group_size``: when
the K rows of each group share their prompt, the prompt runs once per group and its keys and
values are repeated over the group's rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from pglab.models.gpt2 import plain_gpt2, run_block
from pglab.models.logits import accepts, cache_keyword, cache_of, positions_of

Decoder = Callable[[torch.Tensor, int], torch.Tensor]
"""(ids [B, q] at positions position..position+q-1, position) -> logits [B, V] of the token after them."""


class Layout:
    """Rows, positions and attention of a lockstep decode over (maybe left-padded, maybe grouped) prompts.

    prompt_mask [B, P] (None: no padding); ``group_size`` K: the prompt is run on rows 0, K, 2K, ...
    """

    def __init__(self, prompt_mask: torch.Tensor | None, group_size: int) -> None:
        self.mask = None if prompt_mask is None or bool(prompt_mask.all()) else prompt_mask.bool()
        self.group_size = group_size

    def rows(self, ids: torch.Tensor, position: int) -> torch.Tensor:
        """The rows the forward runs on: one per group at the prompt, all of them afterwards."""
        return ids[::self.group_size] if position == 0 and self.group_size > 1 else ids

    def repeats(self, position: int) -> int:
        return self.group_size if position == 0 else 1

    def prompt_mask(self, position: int) -> torch.Tensor:
        return self.mask[::self.group_size] if position == 0 and self.group_size > 1 else self.mask

    def positions(self, q: int, position: int, device: torch.device) -> torch.Tensor:
        """Position ids [1 or B, q]: counting real tokens only when the prompts are padded."""
        if self.mask is None:
            return torch.arange(position, position + q, device=device)[None]
        if position == 0:
            return positions_of(self.prompt_mask(0))
        real = self.mask.sum(-1, keepdim=True)
        return real + (position - self.mask.shape[1]) + torch.arange(q, device=device)

    def keys(self, end: int) -> torch.Tensor | None:
        """Which of the first ``end`` positions may be attended [B, end] (None without padding)."""
        if self.mask is None:
            return None
        extra = end - self.mask.shape[1]
        return torch.cat([self.mask, self.mask.new_ones(self.mask.shape[0], extra)], 1) if extra > 0 else \
            self.mask[:, :end]


def hf_decoder(model: torch.nn.Module, prompt_mask: torch.Tensor | None = None, group_size: int = 1) -> Decoder:
    """A Decoder through the model's own forward and cache (any causal LM)."""
    keyword = cache_keyword(model)
    last_only = {"logits_to_keep": 1} if accepts(model, "logits_to_keep") else {}
    layout = Layout(prompt_mask, group_size)
    cache: dict[str, Any] = {}

    def step(ids: torch.Tensor, position: int) -> torch.Tensor:
        rows = layout.rows(ids, position)
        past = {keyword: cache["kv"]} if position else {}
        extra = {}
        if layout.mask is not None:
            keys = layout.prompt_mask(0) if position == 0 else layout.keys(position + ids.shape[1])
            extra = {"attention_mask": keys.long(),
                     "position_ids": layout.positions(ids.shape[1], position, ids.device)}
        out = model(input_ids=rows, use_cache=True, **last_only, **past, **extra)
        cache["kv"] = cache_of(out)
        repeat = layout.repeats(position)
        if repeat > 1:
            for layer in cache["kv"].layers:
                layer.batch_repeat_interleave(repeat)
        return out.logits[:, -1].repeat_interleave(repeat, 0) if repeat > 1 else out.logits[:, -1]

    return step


def attention_of(layout: Layout, q: int, position: int, device: torch.device) -> torch.Tensor | None:
    """sdpa's boolean mask [B or 1, 1, q, position + q] of q new tokens (None: no padding, and causal attention
    needs no mask: a prompt from position 0, or a single query).

    A padding query attends to itself, so that no row is fully masked (which would give NaN).
    """
    keys = layout.keys(position + q)
    if keys is None and (position == 0 or q == 1):
        return None
    causal = torch.ones(q, position + q, dtype=torch.bool, device=device).tril(position)
    if keys is None:
        return causal[None, None]
    if position == 0:
        keys = layout.prompt_mask(0)[:, None, :] | torch.eye(q, dtype=torch.bool, device=device)
        return (causal & keys)[:, None]
    return (causal & keys[:, None, :])[:, None]


def gpt2_decoder(model: torch.nn.Module, length: int, prompt_mask: torch.Tensor | None = None,
                 group_size: int = 1) -> Decoder | None:
    """A Decoder that runs a ``plain_gpt2`` model's blocks (``pglab.models.gpt2.run_block``) over preallocated
    keys and values, or None for any other model.

    Each layer keeps one [B, heads, length, head_dim] buffer of keys and one of values; a group's
    prompt runs once and its keys and values are written to all K rows of the group. A one-token
    step attends with two matmuls (HF's eager attention, faster than sdpa's CPU kernel for a single
    query); the last layer norm and lm_head see only the last position.
    """
    if not plain_gpt2(model):
        return None
    body = model.transformer
    layout = Layout(prompt_mask, group_size)
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []

    def step(ids: torch.Tensor, position: int) -> torch.Tensor:
        rows, width = layout.rows(ids, position), ids.shape[1]
        end, repeat = position + width, layout.repeats(position)
        mask = attention_of(layout, width, position, ids.device)
        if width == 1 and mask is not None:
            mask = torch.zeros(mask.shape, device=ids.device).masked_fill_(~mask, -math.inf)
        if position == 0:
            keys.clear()
            values.clear()
        hidden = body.wte(rows) + body.wpe(layout.positions(width, position, ids.device))
        for layer, block in enumerate(body.h):
            def attend(q, k, v, scale, layer=layer):
                if layer == len(keys):
                    shape = (k.shape[0] * repeat, k.shape[1], length, k.shape[3])
                    keys.append(k.new_empty(shape))
                    values.append(v.new_empty(shape))
                for buffer, new in ((keys[layer], k), (values[layer], v)):
                    buffer.view(-1, repeat, *buffer.shape[1:])[:, :, :, position:end] = new[:, None]
                if position == 0:
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                                          scale=scale)
                past_keys, past_values = keys[layer][:, :, :end], values[layer][:, :, :end]
                if width > 1:
                    return F.scaled_dot_product_attention(q, past_keys, past_values, attn_mask=mask, scale=scale)
                weights = torch.matmul(q, past_keys.transpose(-1, -2)) * scale
                if mask is not None:
                    weights = weights + mask.to(weights.dtype)
                return torch.matmul(torch.softmax(weights, -1).to(past_values.dtype), past_values)

            hidden = run_block(block, hidden, attend)
        logits = model.lm_head(body.ln_f(hidden[:, -1]))
        return logits.repeat_interleave(repeat, 0) if repeat > 1 else logits

    return step


def lockstep_decoder(model: torch.nn.Module, length: int, prompt_mask: torch.Tensor | None = None,
                     group_size: int = 1) -> Decoder:
    """The fastest Decoder for ``model``: GPT-2's static-cache loop where it applies, else the model's forward."""
    return gpt2_decoder(model, length, prompt_mask, group_size) or hf_decoder(model, prompt_mask, group_size)


def turn_rows(held: list[int], rows: list[int], chunks: list[list[int]],
              pad_id: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """One turn of incremental decoding over the rows ``held`` by a cache, of which ``rows`` get ``chunks``:
    (ids [len(held), W] right-padded with ``pad_id``, new [len(held), W] bool (the real tokens), each of ``rows``'
    index in ``held``); W is the longest chunk, and a held row with nothing new is padding only."""
    width = max(len(c) for c in chunks)
    ids = torch.full((len(held), width), pad_id, dtype=torch.long)
    new = torch.zeros(len(held), width, dtype=torch.bool)
    place = [held.index(r) for r in rows]
    for p, chunk in zip(place, chunks):
        ids[p, :len(chunk)] = torch.tensor(chunk, dtype=torch.long)
        new[p, :len(chunk)] = True
    return ids, new, place


class GPT2Prefixes:
    """Incremental decoding of rows at their own lengths (the ``Prefixes`` of ``pglab.models.policy``) through a
    ``plain_gpt2`` model's blocks over growing key and value buffers, without Hugging Face's cache and mask
    machinery, whose per-call overhead sets the decoding time of a small model on a CPU. ``shape`` turns the raw
    logits [rows, V] into the policy's (temperature, banned ids, nucleus).

    Each ``extend`` feeds every live row right-padded to the longest chunk, as ``HFPrefixes`` does: the padding
    stays in the buffers as holes that no query attends to, and positions count each row's real tokens. The same
    kernels in the same order as HF's forward (sdpa with the same boolean mask, also for one query, where two
    matmuls would be no faster here and not bit-equal), so the same logits: equal bits in the episodes measured,
    and float64-equal in tests/models/test_gpt2_fast.py.
    """

    def __init__(self, model: torch.nn.Module, rows: int, pad_id: int = 0,
                 shape: Callable[[torch.Tensor], torch.Tensor] = lambda logits: logits) -> None:
        self.model, self.pad_id, self.rows, self.shape = model, pad_id, list(range(rows)), shape
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.real = torch.zeros(rows, 0, dtype=torch.bool)        # [rows, columns filled]: which are real tokens
        self.length = torch.zeros(rows, dtype=torch.long)

    def _grow(self, filled: int, end: int) -> None:
        """Buffers of at least ``end`` columns, the first ``filled`` kept (doubled when full, so a long episode costs
        few copies)."""
        if self.keys and self.keys[0].shape[2] >= end:
            return
        for buffers in (self.keys, self.values):
            for layer, old in enumerate(buffers):
                grown = old.new_empty(*old.shape[:2], max(end, 2 * old.shape[2]), old.shape[3])
                grown[:, :, :filled] = old[:, :, :filled]
                buffers[layer] = grown

    def extend(self, rows: list[int], chunks: list[list[int]]) -> torch.Tensor:
        body, device = self.model.transformer, self.model.lm_head.weight.device
        ids, new, place = turn_rows(self.rows, rows, chunks, self.pad_id)
        width, start = ids.shape[1], self.real.shape[1]
        end = start + width
        positions = (self.length[:, None] + new.cumsum(1) - 1).clamp(min=0)
        self.real = torch.cat([self.real, new], 1)
        causal = torch.ones(width, end, dtype=torch.bool).tril(start)
        itself = torch.zeros(width, end, dtype=torch.bool)
        itself[torch.arange(width), start + torch.arange(width)] = True      # a padding query: no empty row (NaN)
        mask = ((causal & self.real[:, None, :]) | itself)[:, None].to(device)
        self._grow(start, end)
        hidden = body.wte(ids.to(device)) + body.wpe(positions.to(device))
        for layer, block in enumerate(body.h):
            def attend(q, k, v, scale, layer=layer):
                if layer == len(self.keys):
                    shape = (k.shape[0], k.shape[1], max(end, 64), k.shape[3])
                    self.keys.append(k.new_empty(shape))
                    self.values.append(v.new_empty(shape))
                self.keys[layer][:, :, start:end] = k
                self.values[layer][:, :, start:end] = v
                return F.scaled_dot_product_attention(q, self.keys[layer][:, :, :end], self.values[layer][:, :, :end],
                                                      attn_mask=mask, scale=scale)

            hidden = run_block(block, hidden, attend)
        self.length += new.sum(1)
        last = hidden[torch.tensor(place), torch.tensor([len(c) - 1 for c in chunks])]
        return self.shape(self.model.lm_head(body.ln_f(last)))

    def keep(self, rows: list[int]) -> None:
        if rows == self.rows:
            return
        index = torch.tensor([self.rows.index(r) for r in rows], dtype=torch.long)
        device_index = index.to(self.model.lm_head.weight.device)
        self.keys = [k.index_select(0, device_index) for k in self.keys]
        self.values = [v.index_select(0, device_index) for v in self.values]
        self.real, self.length, self.rows = self.real[index], self.length[index], list(rows)


__all__ = ["Decoder", "GPT2Prefixes", "Layout", "attention_of", "gpt2_decoder", "hf_decoder", "lockstep_decoder",
           "turn_rows"]
