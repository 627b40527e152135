"""Lockstep decoders for Hugging Face causal LMs: every row at the same position, one new token a call.

A Decoder maps (ids [B, q] at positions position..position+q-1, position) to the logits [B, V] of
the token after them. ``gpt2_decoder`` runs a GPT-2's own blocks over a preallocated cache;
``hf_decoder`` goes through any model's forward and cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pglab.models.hf import accepts, cache_keyword, cache_of

Decoder = Callable[[torch.Tensor, int], torch.Tensor]
"""(ids [B, q] at positions position..position+q-1, position) -> logits [B, V] of the token after them."""


def hf_decoder(model: torch.nn.Module) -> Decoder:
    """A Decoder through the model's own forward and cache (any causal LM)."""
    keyword = cache_keyword(model)
    last_only = {"logits_to_keep": 1} if accepts(model, "logits_to_keep") else {}
    cache: dict[str, Any] = {}

    def step(ids: torch.Tensor, position: int) -> torch.Tensor:
        past = {keyword: cache["kv"]} if position else {}
        out = model(input_ids=ids, use_cache=True, **last_only, **past)
        cache["kv"] = cache_of(out)
        return out.logits[:, -1]

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


def gpt2_decoder(model: torch.nn.Module, length: int) -> Decoder | None:
    """A Decoder that runs a GPT2LMHeadModel's own blocks over a ``StaticCache`` of ``length`` positions.

    The same function as the model's forward, without HF's per-call cache and mask machinery (which
    costs more than a 2-layer model's arithmetic); the last layer norm and lm_head see only the last
    position. None for any other model, or for attention other than sdpa (which masks causally when
    given no mask).
    """
    from transformers import GPT2LMHeadModel

    config = getattr(model, "config", None)
    if not isinstance(model, GPT2LMHeadModel) or config._attn_implementation != "sdpa" or config.add_cross_attention:
        return None
    body, cache = model.transformer, StaticCache(config.n_layer, length)

    def step(ids: torch.Tensor, position: int) -> torch.Tensor:
        cache.filled = position
        hidden = body.wte(ids) + body.wpe(torch.arange(position, position + ids.shape[1], device=ids.device))
        for block in body.h:
            hidden = block(hidden, cache)
        return model.lm_head(body.ln_f(hidden[:, -1]))

    return step


def lockstep_decoder(model: torch.nn.Module, length: int) -> Decoder:
    """The fastest Decoder for ``model``: GPT-2's static-cache loop where it applies, else the model's forward."""
    return gpt2_decoder(model, length) or hf_decoder(model)


__all__ = ["Decoder", "StaticCache", "gpt2_decoder", "hf_decoder", "lockstep_decoder"]
