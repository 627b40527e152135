"""Hugging Face causal LMs as pglab policies: loading (offline), the fused activation, reply logits.

Nothing here downloads: ``load_causal_lm`` reads a folder written by ``save_pretrained`` (or the
embedded default, built on first use). transformers is imported inside the functions, so pglab
imports without the ``lm`` extra.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from pglab.models import gpt2
from pglab.models.logits import (
    accepts,
    autocast,
    cache_keyword,
    cache_of,
    full_precision,
    positions_of,
    shares_prompt,
)
from pglab.runtime.distributed import unwrap
from pglab.runtime.options import SettingsError


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
        cache.batch_repeat_interleave(group_size)
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
            raise SettingsError(f"--model {name} has no config.json; pass a folder written by save_pretrained")
        return
    try:
        from transformers.utils import cached_file

        cached_file(name, "config.json", local_files_only=True)
    except Exception:  # noqa: BLE001 - HF raises OSError, ValueError or HFValidationError by the name's form
        raise SettingsError(f"--model {name}: no such folder, and no hub model of that name in the local cache; "
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
        raise SettingsError("Hugging Face models need transformers: pip install 'pglab[lm]'") from err
    hf_logging.disable_progress_bar()   # weight-loading bars would interleave with the trainer's lines
    from pglab.models import shifted_gpt2  # noqa: F401 (registers the tool-use agent's model with AutoModel)
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
        raise SettingsError(f"cannot load --model {name}: {err}".splitlines()[0] +
                            "; pass a folder written by save_pretrained (no network is used)") from None
    return fuse_activations(model), tokenizer


__all__ = ["TWO_SQRT_2_OVER_PI", "TanhGELU", "check_model", "fuse_activations", "gelu_tanh", "load_causal_lm",
           "reply_logits"]
