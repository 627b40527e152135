"""Hugging Face causal LMs as pglab policies: loading, the fused activation, reply logits, banned tokens.

Nothing here downloads: ``load_causal_lm`` reads a folder written by ``save_pretrained`` (or the
embedded default, built on first use). transformers is imported inside the functions, so pglab
imports without the ``lm`` extra.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from pathlib import Path
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


def reply_logits(model: torch.nn.Module, ids: torch.Tensor, start: int, group_size: int = 1,
                 attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Logits that predict ids[:, start:]; ids [B, T] -> [B, T - start, V] (float32 under autocast).

    When every ``group_size`` consecutive rows share their first ``start`` tokens (the replies to
    one prompt), the prompt runs once per group and its KV cache is repeated for the group's rows:
    the same logits up to float rounding, for (K - 1) / K less prompt work in forward and backward.
    ``attention_mask`` [B, T] is needed only for left-padded prompts (0 on the padding); the
    positions then count real tokens only, as in sampling. A ``plain_gpt2`` model's unpadded rows
    go through :func:`pglab.models.gpt2.reply_logits` (the same logits without HF's forward machinery).
    """
    from pglab.models import gpt2

    keep = ids.shape[1] - start + 1
    padded = attention_mask is not None and not bool(attention_mask[:, :start].all())
    if not padded and gpt2.plain_gpt2(model):
        with autocast(ids.device):
            return full_precision(gpt2.reply_logits(model, ids, start, group_size))
    extra = {"attention_mask": attention_mask, "position_ids": positions_of(attention_mask)} if padded else {}
    if not accepts(model, "logits_to_keep"):
        with autocast(ids.device):
            return full_precision(model(input_ids=ids, **extra).logits[:, -keep:-1])
    if not shares_prompt(ids, start, group_size):
        with autocast(ids.device):
            return full_precision(model(input_ids=ids, logits_to_keep=keep, **extra).logits[:, :-1])
    prompts = ids[::group_size, :start]
    head_extra = {k: v[::group_size, :start] for k, v in extra.items()}
    rest_extra = {"attention_mask": extra["attention_mask"][:, :-1],
                  "position_ids": extra["position_ids"][:, start:-1]} if padded else {}
    with autocast(ids.device):
        head = unwrap(model)(input_ids=prompts, use_cache=True, logits_to_keep=1, **head_extra)
        cache = cache_of(head)
        for layer in cache.layers:
            layer.batch_repeat_interleave(group_size)
        rest = model(input_ids=ids[:, start:-1], **{cache_keyword(model): cache}, **rest_extra).logits
    return full_precision(torch.cat([head.logits.repeat_interleave(group_size, 0), rest], 1))


TWO_SQRT_2_OVER_PI = 2 * math.sqrt(2 / math.pi)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's tanh GELU, 0.5 x (1 + tanh(u)) with u = sqrt(2 / pi) (x + 0.044715 x^3), as x sigmoid(2u).

    The same function (1 + tanh(u) = 2 sigmoid(2u)) in five passes over one new tensor; on the CPU
    faster than torch's fused tanh kernel, whose tanh costs more than the five passes.
    """
    z = x * x
    z.mul_(0.044715 * TWO_SQRT_2_OVER_PI).add_(TWO_SQRT_2_OVER_PI).mul_(x)
    return z.sigmoid_().mul_(x)


class _GeluTanh(torch.autograd.Function):
    """gelu_tanh forward; torch's own tanh-GELU derivative backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return gelu_tanh(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.ops.aten.gelu_backward(grad, x, approximate="tanh")


class TanhGELU(torch.nn.Module):
    """GPT-2's ``gelu_new``: :func:`gelu_tanh` on the CPU in float32/float64, torch's fused kernel elsewhere."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
            return torch.nn.functional.gelu(x, approximate="tanh")
        return _GeluTanh.apply(x) if x.requires_grad and torch.is_grad_enabled() else gelu_tanh(x)


def fuse_activations(model: torch.nn.Module) -> torch.nn.Module:
    """Swap each tanh-GELU module (``gelu_new``: six elementwise kernels; or HF's ``GELUTanh``) for ``TanhGELU``.

    The same function up to float rounding, in fewer elementwise passes than ``gelu_new`` and faster
    than torch's own tanh kernel on the CPU. The saved config still names gelu_new, so a reloaded
    model computes the same function.
    """
    from transformers.activations import GELUTanh, NewGELUActivation

    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, (NewGELUActivation, GELUTanh)):
                setattr(module, name, TanhGELU())
    return model


def check_model(name: str) -> None:
    """Refuse, in one line naming the fix, a model name that is neither a model folder nor a cached hub id."""
    if name == "default":
        return
    folder = Path(name)
    if folder.is_dir():
        if not (folder / "config.json").exists():
            raise ValueError(f"--model {name} has no config.json; pass a folder written by save_pretrained")
        return
    try:
        from transformers.utils import cached_file

        cached_file(name, "config.json", local_files_only=True)
    except Exception:  # noqa: BLE001 - HF raises OSError, ValueError or HFValidationError by the name's form
        raise ValueError(f"--model {name}: no such folder, and no hub model of that name in the local cache; "
                         "pass a folder written by save_pretrained (no network is used)") from None


def load_causal_lm(name: str, default_size: str = "full", progress: bool = True,
                   echo: Callable[[str], None] | None = None) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) from a save_pretrained folder (or hub id in the local cache); "default": the embedded one.

    ``echo`` receives a line before the embedded default is built on first use (stderr by default).
    """
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as err:
        raise ValueError("Hugging Face models need transformers: pip install 'pglab[lm]'") from err
    hf_logging.disable_progress_bar()   # weight-loading bars would interleave with the trainer's lines
    from pglab.models.default_lm import default_model_dir, ensure_default_model

    check_model(name)
    if name == "default":
        folder = default_model_dir(default_size)
        if not (folder / "pretrain.json").exists():
            (echo or (lambda line: print(line, file=sys.stderr, flush=True)))(
                f"building the embedded default model ({default_size}) in {folder}: first use only, "
                "a few minutes on an idle 2-core CPU")
        path = ensure_default_model(default_size, progress=progress)
    else:
        path = name
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot load --model {name}: {err}".splitlines()[0] +
                         "; pass a folder written by save_pretrained (no network is used)") from None
    return fuse_activations(model), tokenizer


__all__ = ["TanhGELU", "accepts", "autocast", "cache_of", "check_model", "full_precision", "fuse_activations",
           "gelu_tanh", "load_causal_lm",
           "nucleus", "positions_of", "reply_logits", "restrict", "shape_logits", "shares_prompt"]
