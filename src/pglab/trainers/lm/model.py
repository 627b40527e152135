"""The trained model of ``train_lm``: LoRA (peft), the reference, fused Adam, the learning-rate schedule.

With ``lora_r > 0`` the model gets peft's LoRA adapters; only they are trained, checkpointed and
saved (``save_pretrained`` of the adapter), and the reference is the same base model with the
adapter disabled, so no second copy is held. Without LoRA the reference is a frozen copy, made
only when beta > 0.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from pglab.runtime.options import SettingsError
from pglab.trainers.lm.config import RLConfig


def check_lora(cfg: RLConfig) -> None:
    """Refuse --lora-r without peft, before any work."""
    if cfg.lora_r:
        try:
            import peft  # noqa: F401
        except ImportError:
            raise SettingsError("--lora-r needs the peft package: pip install 'pglab[lora]' "
                                "(or pass --lora-r 0)") from None


class Models:
    """The module every forward pass runs, its reference, and what is trained, checkpointed and saved."""

    def __init__(self, cfg: RLConfig, model: torch.nn.Module):
        self.peft = None
        if cfg.lora_r:
            from peft import LoraConfig, get_peft_model

            targets = list(cfg.lora_target_modules) or None
            try:
                self.peft = get_peft_model(model, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                                                             target_modules=targets, bias="none"))
            except ValueError as err:
                raise SettingsError(f"--lora-target-modules: {str(err).splitlines()[0]}; pass module names of "
                                    "the model's linear layers") from None
            model = self.peft.get_base_model()      # the adapters are injected in place: forwards run on it
        self.model = model.eval()
        self.copy = copy.deepcopy(model).requires_grad_(False) if cfg.beta > 0 and self.peft is None else None

    @contextlib.contextmanager
    def reference(self, fresh: Any = None) -> Iterator[torch.nn.Module]:
        """The reference model: the frozen copy, or the base with the adapter disabled (LoRA); ``fresh()`` builds
        one when neither exists (beta = 0 without LoRA)."""
        if self.peft is not None:
            with self.peft.disable_adapter():
                yield self.model
        else:
            yield self.copy if self.copy is not None else fresh()

    def trainable(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint holds: every weight, or with LoRA the adapter's alone."""
        if self.peft is None:
            return self.model.state_dict()
        return {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state, strict=self.peft is None)

    def save(self, folder: Path, tokenizer: Any) -> None:
        """save_pretrained of the model, or of the adapter alone with LoRA; and the tokenizer."""
        (self.peft or self.model).save_pretrained(folder)
        tokenizer.save_pretrained(folder)


def adam(cfg: RLConfig, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """Adam at cfg.learning_rate, fused (one kernel for all parameters) where torch has it for the device."""
    try:
        return torch.optim.Adam(params, lr=cfg.learning_rate, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, lr=cfg.learning_rate)


def schedule(cfg: RLConfig, optimizer: torch.optim.Optimizer) -> Any:
    """transformers' get_scheduler: cfg.lr_scheduler_type after cfg.warmup linear warm-up steps."""
    from transformers import get_scheduler

    name = "constant_with_warmup" if cfg.lr_scheduler_type == "constant" and cfg.warmup else cfg.lr_scheduler_type
    return get_scheduler(name, optimizer, num_warmup_steps=cfg.warmup, num_training_steps=cfg.optimizer_steps)


__all__ = ["Models", "adam", "check_lora", "schedule"]
