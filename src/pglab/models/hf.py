"""Hugging Face causal LMs as pglab policies: loading, the fused activation, reply logits, banned tokens.

Nothing here downloads: ``load_causal_lm`` reads a folder written by ``save_pretrained`` (or the
embedded default, built on first use). transformers is imported inside the functions, so pglab
imports without the ``lm`` extra.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch

from pglab.distributed import unwrap


def accepts(model: torch.nn.Module, name: str) -> bool:
    """Whether the (unwrapped) model's forward takes the keyword ``name``."""
    return name in inspect.signature(unwrap(model).forward).parameters


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """x in float32 when it is half precision, else x itself."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def autocast(device: torch.device):
    """bf16 autocast on CUDA, a no-op context on CPU."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def restrict(logits: torch.Tensor, banned: torch.Tensor | None) -> torch.Tensor:
    """logits [..., V] with the banned ids at -inf (probability 0); banned: long ids or None."""
    return logits if banned is None or banned.numel() == 0 else logits.index_fill(-1, banned, -math.inf)


def cache_of(output: Any) -> Any:
    """The KV cache a forward returned (``cache`` or ``past_key_values``, by the model's naming)."""
    return output["cache"] if "cache" in output.keys() else output["past_key_values"]


def cache_keyword(model: torch.nn.Module) -> str:
    return "cache" if accepts(model, "cache") else "past_key_values"


def reply_logits(model: torch.nn.Module, ids: torch.Tensor, start: int, group_size: int = 1) -> torch.Tensor:
    """Logits that predict ids[:, start:]; ids [B, T] -> [B, T - start, V] (float32 under autocast).

    When every ``group_size`` consecutive rows share their first ``start`` tokens (the replies to
    one prompt), the prompt runs once per group and its KV cache is repeated for the group's rows:
    the same logits up to float rounding, for (K - 1) / K less prompt work in forward and backward.
    """
    keep = ids.shape[1] - start + 1
    if not accepts(model, "logits_to_keep"):
        with autocast(ids.device):
            return full_precision(model(input_ids=ids).logits[:, -keep:-1])
    prompts = ids[::group_size, :start]
    shared = group_size > 1 and keep >= 3 and ids.shape[0] % group_size == 0 and bool(
        (ids[:, :start].reshape(-1, group_size, start) == prompts[:, None]).all())
    if not shared:
        with autocast(ids.device):
            return full_precision(model(input_ids=ids, logits_to_keep=keep).logits[:, :-1])
    with autocast(ids.device):
        head = unwrap(model)(input_ids=prompts, use_cache=True, logits_to_keep=1)
        cache = cache_of(head)
        for layer in cache.layers:
            layer.batch_repeat_interleave(group_size)
        rest = model(input_ids=ids[:, start:-1], **{cache_keyword(model): cache}).logits
    return full_precision(torch.cat([head.logits.repeat_interleave(group_size, 0), rest], 1))


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


def load_causal_lm(name: str, default_size: str = "full", progress: bool = True) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) from a save_pretrained folder (or hub id in the local cache); "default": the embedded one."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as err:
        raise ValueError("Hugging Face models need transformers: pip install 'pglab[lm]'") from err
    hf_logging.disable_progress_bar()   # weight-loading bars would interleave with the trainer's lines
    from pglab.models.default_lm import ensure_default_model

    path = ensure_default_model(default_size, progress=progress) if name == "default" else name
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)
    except OSError as err:
        raise ValueError(f"cannot load --model {name}: {err}".splitlines()[0] +
                         "; pass a folder written by save_pretrained (no network is used)") from err
    return fuse_activations(model), tokenizer


__all__ = ["accepts", "autocast", "cache_of", "full_precision", "fuse_activations", "load_causal_lm", "reply_logits",
           "restrict"]
