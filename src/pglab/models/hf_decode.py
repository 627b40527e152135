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

from pglab.models.hf import accepts, cache_keyword, cache_of, positions_of

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


class StaticCache:
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

    def repeat(self, times: int) -> None:
        """Repeat every row ``times`` times (row b becomes rows b*times .. b*times+times-1)."""
        self.keys = [k.repeat_interleave(times, 0) for k in self.keys]
        self.values = [v.repeat_interleave(times, 0) for v in self.values]


def attention_of(layout: Layout, q: int, position: int) -> torch.Tensor | None:
    """sdpa's boolean mask [B, 1, q, position + q] over padded prompts (None: plain causal attention).

    A padding query attends to itself, so that no row is fully masked (which would give NaN).
    """
    keys = layout.keys(position + q)
    if keys is None:
        return None
    if position == 0:
        keys = layout.prompt_mask(0)
        causal = torch.ones(q, q, dtype=torch.bool, device=keys.device).tril()
        eye = torch.eye(q, dtype=torch.bool, device=keys.device)
        return (causal & (keys[:, None, :] | eye))[:, None]
    return keys[:, None, None, :].expand(-1, 1, q, -1)


def gpt2_decoder(model: torch.nn.Module, length: int, prompt_mask: torch.Tensor | None = None,
                 group_size: int = 1) -> Decoder | None:
    """A Decoder that runs a GPT2LMHeadModel's own blocks over a ``StaticCache`` of ``length`` positions.

    The same function as the model's forward, without HF's per-call cache and mask machinery (which
    costs more than a 2-layer model's arithmetic); the last layer norm and lm_head see only the last
    position, and a one-token step attends through HF's eager (matmul) attention, faster than sdpa
    for a single query on the CPU. None for any other model, or for attention other than sdpa (which masks causally when
    given no mask).
    """
    from transformers import GPT2LMHeadModel

    config = getattr(model, "config", None)
    if not isinstance(model, GPT2LMHeadModel) or config._attn_implementation != "sdpa" or config.add_cross_attention:
        return None
    body, cache = model.transformer, StaticCache(config.n_layer, length)
    layout = Layout(prompt_mask, group_size)

    def step(ids: torch.Tensor, position: int) -> torch.Tensor:
        rows = layout.rows(ids, position)
        cache.filled = position
        hidden = body.wte(rows) + body.wpe(layout.positions(ids.shape[1], position, ids.device))
        attention = attention_of(layout, ids.shape[1], position)
        one = ids.shape[1] == 1       # one query: two plain matmuls beat sdpa's CPU flash kernel (~1.7x)
        if one and attention is not None:
            attention = torch.zeros(attention.shape, dtype=hidden.dtype, device=hidden.device).masked_fill_(
                ~attention, -math.inf)
        config._attn_implementation = "eager" if one else "sdpa"
        try:
            for block in body.h:
                hidden = block(hidden, cache, attention_mask=attention)
        finally:
            config._attn_implementation = "sdpa"
        logits = model.lm_head(body.ln_f(hidden[:, -1]))
        repeat = layout.repeats(position)
        if repeat > 1:
            cache.repeat(repeat)
            logits = logits.repeat_interleave(repeat, 0)
        return logits

    return step


def lockstep_decoder(model: torch.nn.Module, length: int, prompt_mask: torch.Tensor | None = None,
                     group_size: int = 1) -> Decoder:
    """The fastest Decoder for ``model``: GPT-2's static-cache loop where it applies, else the model's forward."""
    return gpt2_decoder(model, length, prompt_mask, group_size) or hf_decoder(model, prompt_mask, group_size)


__all__ = ["Decoder", "Layout", "StaticCache", "gpt2_decoder", "hf_decoder", "lockstep_decoder"]
