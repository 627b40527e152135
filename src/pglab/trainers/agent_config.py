"""Settings of ``pglab train-agent``: which agent, which environment, which estimator, how long.

A CleanRL-style dataclass (a docstring per field) that validates itself, the ``--quick`` sizes,
and the recipes of the embedded default agent (each recipe is its own cache key).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pglab.trainers.tinyagent import FORMAT_PENALTY


@dataclass
class AgentConfig:
    """Settings of ``pglab train-agent`` (``--field-name VALUE``)."""

    model: str = "default"
    """default (the embedded tiny GPT-2 agent) or a folder written by save_pretrained, with its tokenizer."""
    default_size: str = "full"
    """Size of the embedded default when model is default: full, or quick (seconds to build; --quick uses it)."""
    env: str = "bugfix"
    """bugfix, or module:factory, a function returning a text-turn environment (the current folder is importable)."""
    advantage: str = "reinforce"
    """reinforce (EMA baseline) | rloo | grpo | dr_grpo (groups of --group-size episodes of one task)."""
    beta: float = 0.0
    """Price of one nat of KL to the starting policy, k1 per token in the reward (0: no reference pass)."""
    format_penalty: float = FORMAT_PENALTY
    """Cost of a malformed call in training, on that call's own tokens (BugFixEnv only; 0: none)."""
    steps: int = 80
    """Optimiser steps."""
    episodes_per_step: int = 64
    """Episodes per step (the global batch under torchrun)."""
    group_size: int = 4
    """Episodes per drawn task for rloo, grpo and dr_grpo."""
    learning_rate: float = 2e-3
    """Adam step size."""
    max_call_tokens: int = 24
    """Token cap of one call (a call also ends at its closing text)."""
    max_obs_tokens: int = 96
    """Observation tokens kept per tool answer."""
    eval_every: int = 10
    """Held-out evaluation every this-many steps (and after the last)."""
    eval_per_task: int = 8
    """Held-out episodes per held-out task (or per held-out seed of a user environment)."""
    seed: int = 0
    """Seed of every draw (per step, so a resumed run draws the same numbers)."""
    device: str = "cpu"
    """cpu | cuda."""

    def validate(self) -> None:
        """Raise ValueError naming the fix for any inconsistent setting."""
        for name in ("steps", "episodes_per_step", "group_size", "max_call_tokens", "max_obs_tokens", "eval_every",
                     "eval_per_task"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.seed < 0 or self.beta < 0 or self.format_penalty < 0 or self.learning_rate <= 0:
            raise ValueError("pass --seed >= 0, --beta >= 0, --format-penalty >= 0 and --learning-rate > 0")
        if self.default_size not in DEFAULT_AGENT:
            raise ValueError(f"unknown --default-size {self.default_size!r}; pass one of {', '.join(DEFAULT_AGENT)}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"unknown --device {self.device!r}; pass cpu or cuda")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda but torch sees no CUDA device; pass --device cpu")


QUICK = {"steps": 3, "episodes_per_step": 8, "eval_every": 3, "eval_per_task": 1}
"""``--quick``: a first look in seconds (and what CI runs)."""

DEFAULT_AGENT = {
    "full": {"vocab": 512, "whole_words": True, "layers": 2, "width": 64, "heads": 4, "positions": 1024,
             "kinds": ["random", "blind"], "episodes_per_task": 8, "steps": 200, "batch_size": 32, "lr": 3e-3,
             "max_obs_tokens": 96, "seed": 0},
    "quick": {"vocab": 512, "whole_words": True, "layers": 2, "width": 32, "heads": 2, "positions": 1024,
              "kinds": ["random", "blind"], "episodes_per_task": 2, "steps": 80, "batch_size": 16, "lr": 5e-3,
              "max_obs_tokens": 96, "seed": 0},
}
"""The embedded default agent's recipes (each its own cache key): ``full`` has TinyAgent's shape and
behaviour-cloning schedule; ``quick`` (``--quick`` and the tests) is built in seconds."""


__all__ = ["DEFAULT_AGENT", "QUICK", "AgentConfig"]
