"""GPT-2's forward as plain tensor ops over a ``GPT2LMHeadModel``'s own modules: scoring and decoding.

On a CPU, Hugging Face's GPT-2 forward spends more time in its cache, mask and output machinery
than a small model spends in arithmetic. ``run_block`` is one transformer block written out (the
same kernels in the same order as HF's block, so the same numbers up to float rounding), with the
attention left to the caller:

- ``reply_logits`` scores replies, running each group's shared prompt once and attending the
  replies to its keys and values repeated over the group (differentiable);
- ``pglab.models.hf_decode.gpt2_decoder`` decodes in lockstep over preallocated keys and values.

``plain_gpt2(model)`` says where this applies: a GPT2LMHeadModel with sdpa attention, no
cross-attention, no dropout at work, and HF's own Conv1D layers (a LoRA-wrapped or DDP-wrapped
model, or any other architecture, goes through the model's own forward).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from pglab.models.logits import shares_prompt

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]
"""(q, k, v [B, H, T, D] of one layer, the layer's scale) -> attention output [B, H, T, D]."""


def plain_gpt2(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a GPT2LMHeadModel whose forward ``run_block`` reproduces (see the module docstring)."""
    try:
        from transformers import GPT2LMHeadModel
        from transformers.pytorch_utils import Conv1D
    except ImportError:
        return False
    if type(model) is not GPT2LMHeadModel:
        return False
    config = model.config
    if config.add_cross_attention or config.reorder_and_upcast_attn or config._attn_implementation != "sdpa":
        return False
    if model.training and max(config.attn_pdrop, config.resid_pdrop, config.embd_pdrop) > 0:
        return False
    return all(type(layer) is Conv1D for block in model.transformer.h
               for layer in (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj))


def linear(layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """HF's Conv1D (weight [in, out]): x [..., in] -> [..., out]."""
    return torch.addmm(layer.bias, x.reshape(-1, x.shape[-1]), layer.weight).view(*x.shape[:-1], -1)


def run_block(block: torch.nn.Module, hidden: torch.Tensor, attend: Attend) -> torch.Tensor:
    """One GPT2Block: hidden [B, T, C] -> [B, T, C], the attention itself done by ``attend``."""
    attn, mlp = block.attn, block.mlp
    batch, length, width = hidden.shape
    qkv = linear(attn.c_attn, block.ln_1(hidden)).view(batch, length, 3, attn.num_heads, attn.head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    out = attend(q, k, v, attn.scaling).transpose(1, 2).reshape(batch, length, width)
    hidden = hidden + linear(attn.c_proj, out)
    return hidden + linear(mlp.c_proj, mlp.act(linear(mlp.c_fc, block.ln_2(hidden))))


def causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal self-attention of a sequence that starts at position 0."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)


def embed(model: torch.nn.Module, ids: torch.Tensor, first: int) -> torch.Tensor:
    """Token plus position embeddings of ids [B, T] at positions first..first+T-1 -> [B, T, C]."""
    body = model.transformer
    return body.wte(ids) + body.wpe(torch.arange(first, first + ids.shape[1], device=ids.device))


def reply_logits(model: torch.nn.Module, ids: torch.Tensor, start: int, group_size: int = 1) -> torch.Tensor:
    """Logits that predict ids[:, start:] under a ``plain_gpt2`` model; ids [B, T] -> [B, T - start, V].

    When the ``group_size`` rows of each group share their first ``start`` tokens, the prompt runs
    once per group and the rows' reply tokens attend to its keys and values, repeated over the
    group, and then to their own (causally): (K - 1) / K less prompt work, forward and backward.
    """
    body = model.transformer
    if not shares_prompt(ids, start, group_size):
        hidden = embed(model, ids, 0)
        for block in body.h:
            hidden = run_block(block, hidden, causal)
        return model.lm_head(body.ln_f(hidden[:, start - 1:-1]))
    prefix: list[tuple[torch.Tensor, torch.Tensor]] = []

    def keep(q, k, v, scale):
        prefix.append((k.repeat_interleave(group_size, 0), v.repeat_interleave(group_size, 0)))
        return causal(q, k, v, scale)

    head = embed(model, ids[::group_size, :start], 0)
    for block in body.h:
        head = run_block(block, head, keep)
    replies = ids.shape[1] - 1 - start
    mask = torch.ones(replies, start + replies, dtype=torch.bool, device=ids.device).tril(start)
    hidden = embed(model, ids[:, start:-1], start)
    for block, (keys, values) in zip(body.h, prefix):
        def after_prompt(q, k, v, scale, keys=keys, values=values):
            return F.scaled_dot_product_attention(q, torch.cat([keys, k], 2), torch.cat([values, v], 2),
                                                  attn_mask=mask, scale=scale)

        hidden = run_block(block, hidden, after_prompt)
    hidden = torch.cat([head[:, -1:].repeat_interleave(group_size, 0), hidden], 1)   # width C, not vocabulary V
    return model.lm_head(body.ln_f(hidden))


__all__ = ["Attend", "causal", "embed", "linear", "plain_gpt2", "reply_logits", "run_block"]
