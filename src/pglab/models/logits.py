"""Logits of a sampling policy: banned ids, temperature, the top-p nucleus, positions, KV caches.

The same functions shape the logits when sampling and when scoring, so the policy that is
differentiated is the one that sampled. Pure torch (no transformers import).
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch

from pglab.runtime.distributed import unwrap


def accepts(model: torch.nn.Module, name: str) -> bool:
    """Whether the (unwrapped) model's forward takes the keyword ``name``."""
    return name in inspect.signature(unwrap(model).forward).parameters


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """x in float32 when it is half precision, else x itself."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def autocast(device: torch.device):
    """bf16 autocast on CUDA, a no-op context on CPU."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def restrict(logits: torch.Tensor, banned: torch.Tensor | None, in_place: bool = False) -> torch.Tensor:
    """logits [..., V] with the banned ids at -inf (probability 0); banned: long ids or None."""
    if banned is None or banned.numel() == 0:
        return logits
    return logits.index_fill_(-1, banned, -math.inf) if in_place else logits.index_fill(-1, banned, -math.inf)


def nucleus(logits: torch.Tensor, top_p: float, keep: torch.Tensor | None = None) -> torch.Tensor:
    """logits [..., V] with the ids outside the top-p nucleus at -inf; ``keep`` [...] ids always stay in.

    The nucleus is the smallest set of most likely ids whose probabilities sum to at least
    ``top_p`` (the most likely id is always in it). ``keep`` (the sampled tokens, when scoring)
    guards against a token at the edge of the nucleus falling out under float rounding.
    """
    if top_p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(-1, descending=True)
    probs = torch.softmax(sorted_logits.float(), -1)
    outside_sorted = probs.cumsum(-1) - probs >= top_p
    outside = torch.zeros_like(outside_sorted).scatter_(-1, order, outside_sorted)
    if keep is not None:
        outside.scatter_(-1, keep[..., None], False)
    return logits.masked_fill(outside, -math.inf)


def shape_logits(logits: torch.Tensor, banned: torch.Tensor | None = None, temperature: float = 1.0,
                 top_p: float = 1.0, keep: torch.Tensor | None = None, in_place: bool = False) -> torch.Tensor:
    """The sampling policy's logits [..., V]: divided by ``temperature``, banned ids and (top_p < 1) ids
    outside the nucleus at -inf. The same function in sampling and in scoring. ``in_place``: ``logits``
    is a fresh tensor of the caller's (autograd allows it: no backward needs the logits themselves)."""
    if temperature != 1.0:
        logits = logits.div_(temperature) if in_place else logits / temperature
    return nucleus(restrict(logits, banned, in_place), top_p, keep)


def positions_of(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids that count real tokens only (left padding gets 0); [B, T] -> [B, T] long."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def cache_of(output: Any) -> Any:
    """The KV cache a forward returned (``cache`` or ``past_key_values``, by the model's naming)."""
    return output["cache"] if "cache" in output.keys() else output["past_key_values"]


def cache_keyword(model: torch.nn.Module) -> str:
    return "cache" if accepts(model, "cache") else "past_key_values"


def shares_prompt(ids: torch.Tensor, start: int, group_size: int) -> bool:
    """Whether each ``group_size`` consecutive rows of ids [B, T] share their first ``start`` tokens, with at
    least two reply positions to score after them (else running the prompt once per group saves nothing)."""
    rows, length = ids.shape
    if group_size < 2 or length - start < 2 or rows % group_size:
        return False
    return bool((ids[:, :start].reshape(-1, group_size, start) == ids[::group_size, None, :start]).all())


__all__ = ["accepts", "autocast", "cache_keyword", "cache_of", "full_precision", "nucleus", "positions_of",
           "restrict", "shape_logits", "shares_prompt"]
