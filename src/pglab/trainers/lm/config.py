"""The settings of ``train_lm`` (``pglab train-lm --field-name VALUE``), with TRL's names where TRL has one."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

import torch

from pglab.estimators.advantages import KINDS, SCALES, uses_groups
from pglab.estimators.losses import MODES
from pglab.trainers.token_pg import KL_IN

STDS = {"population": {"unbiased": False, "eps": 1e-8}, "sample": {"unbiased": True, "eps": 1e-4}}
"""GRPO's divisor: the book's population std, or TRL's sample std (TRL's GRPO, ``scale_rewards="group"``)."""


@dataclass
class RLConfig:
    """Settings of ``train_lm`` (CLI: ``pglab train-lm --field-name VALUE``); TRL's names where TRL has one."""

    model: str = "default"
    """A causal-LM folder (or hub id) for AutoModelForCausalLM.from_pretrained; "default": the embedded tiny GPT-2."""
    default_size: str = "full"
    """Size of the embedded default when model is "default": full (pretrained in <= 3 min) or quick (seconds)."""
    reward: str = "vader"
    """vader | hf-classifier:PATH (positive minus negative logit) | module:function (texts -> floats)."""
    prompts: str | None = None
    """A text file with one prompt per line (split 7:1 into train and eval); None: held-out synthetic reviews."""
    max_steps: int = 200
    """Optimiser steps."""
    learning_rate: float = 1e-3
    """Adam step size."""
    prompts_per_step: int = 16
    """Prompts per step (the global batch under torchrun; divisible by the number of processes)."""
    num_generations: int = 4
    """Replies sampled per prompt (K, the group of RLOO and GRPO)."""
    prompt_length: int = 8
    """Every prompt is cut to its first this-many tokens (shorter prompts are dropped)."""
    max_completion_length: int = 24
    """Reply tokens sampled per prompt."""
    ban_eos: bool = True
    """Give end-of-text probability 0 when sampling and scoring: every reply has max_completion_length tokens."""
    banned_tokens: tuple[int, ...] = ()
    """More token ids to ban, in sampling and in scoring alike."""
    advantage: str = "rloo"
    """reinforce (EMA baseline) | rloo (leave-one-out) | grpo (group-normalised) | dr_grpo (centred only)."""
    scale_rewards: str = "group"
    """grpo only: divide by the group's std (group), the batch's (batch) or nothing (none)."""
    std: str = "population"
    """grpo only: population (the book's std, eps 1e-8) | sample (TRL's GRPO: sample std, eps 1e-4)."""
    ema_decay: float = 0.9
    """reinforce only: decay of the running baseline."""
    beta: float = 0.05
    """Price of one nat of KL to the reference model (0: no penalty and no reference pass in training)."""
    kl_in: str = "reward"
    """reward: k1 per token in the reward, with reward-to-go (llm-ch6 §6.12); loss: k3 added to the loss (TRL GRPO)."""
    aggregation: str | None = None
    """token_mean | seq_mean_token_sum | seq_mean_token_mean | constant; None: constant for dr_grpo, else token_mean."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this."""
    seed: int = 0
    """Seed of the prompt draws and of sampling (per step, so a resumed run draws the same numbers)."""
    device: str = "cpu"
    """cpu | cuda (bf16 autocast; cuda is untested here)."""
    eval_every: int = 0
    """Evaluate on the held-out prompts every this-many steps (0: only before and after training)."""
    eval_prompts: int = 64
    """Held-out prompts per evaluation."""
    eval_generations: int = 4
    """Replies per held-out prompt."""
    sample_steps: tuple[int, ...] = ()
    """Also evaluate (and keep samples) after these steps."""
    samples: int = 4
    """Samples kept per evaluation."""
    output_dir: str | None = None
    """Folder for metrics.jsonl, eval.jsonl, checkpoint.pt and the final policy (None: nothing is written)."""
    checkpoint_every: int = 50
    """Write checkpoint.pt (atomically) every this-many steps, and at the end (0: only at the end)."""
    resume: bool = False
    """Continue from output_dir/checkpoint.pt (exact on CPU: the same numbers as an uninterrupted run)."""

    def validate(self) -> None:
        """Raise ValueError naming the fix for any inconsistent setting."""
        positive = ("max_steps", "prompts_per_step", "prompt_length", "max_completion_length", "eval_prompts",
                    "eval_generations")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        for name, value, known in (("advantage", self.advantage, KINDS), ("kl-in", self.kl_in, KL_IN),
                                   ("scale-rewards", self.scale_rewards, SCALES),
                                   ("std", self.std, STDS),
                                   ("aggregation", self.aggregation or "token_mean", MODES),
                                   ("device", self.device, ("cpu", "cuda"))):
            if value not in known:
                raise ValueError(f"unknown --{name} {value!r}; pass one of {', '.join(known)}")
        if uses_groups(self.advantage) and self.num_generations < 2:
            raise ValueError(f"--advantage {self.advantage} compares replies to one prompt: "
                             "pass --num-generations >= 2")
        if self.beta < 0 or self.learning_rate <= 0:
            raise ValueError("pass --beta >= 0 and --learning-rate > 0")
        if self.resume and not self.output_dir:
            raise ValueError("--resume needs --output-dir (the folder holding checkpoint.pt)")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda but torch sees no CUDA device; pass --device cpu")

    @property
    def std_options(self) -> dict:
        """The keyword arguments of the std convention for ``advantages``."""
        return STDS[self.std]

    @property
    def loss_mode(self) -> str:
        return self.aggregation or ("constant" if self.advantage == "dr_grpo" else "token_mean")


def config_help() -> dict[str, str]:
    """Field name -> its docstring, read from RLConfig's source (for the CLI's --help)."""
    tree = ast.parse(inspect.getsource(RLConfig))
    body = tree.body[0].body
    docs = {}
    for stmt, nxt in zip(body, body[1:]):
        if isinstance(stmt, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[stmt.target.id] = str(nxt.value.value)
    return docs


__all__ = ["STDS", "RLConfig", "config_help"]
