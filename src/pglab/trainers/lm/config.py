"""The settings of ``train_lm`` (``pglab train-lm --field-name VALUE``), with TRL's names where TRL has one."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pglab.estimators.advantages import KINDS, SCALES, uses_groups
from pglab.estimators.losses import MODES
from pglab.models.default_lm import SIZES
from pglab.runtime.options import SettingsError, check_folder, flag_of, option
from pglab.trainers.update import KL_IN, check_zoo

SCHEDULES = ("constant", "linear", "cosine")
CHAT_TEMPLATES = ("auto", "always", "never")
REPORT_TO = ("none", "tensorboard")
STDS = {"population": {"unbiased": False, "eps": 1e-8}, "sample": {"unbiased": True, "eps": 1e-4}}
"""GRPO's divisor: the book's population std, or TRL's sample std (TRL's GRPO, ``scale_rewards="group"``)."""


@dataclass
class RLConfig:
    """Settings of ``train_lm`` (CLI: ``pglab train-lm --field-name VALUE``); TRL's names where TRL has one.

    The CLI spells three fields as every pglab command does and accepts TRL's spelling too: ``--steps``
    (``--max-steps``), ``--group-size`` (``--num-generations``) and ``--out`` (``--output-dir``).
    """

    model: str = "default"
    """A causal-LM folder (or hub id) for AutoModelForCausalLM.from_pretrained; "default": the embedded tiny GPT-2."""
    default_size: str = "full"
    """Size of the embedded default when model is "default": full (built once, minutes on a CPU) or quick (seconds)."""
    reward: str = "vader"
    """Comma-separated: vader | vader-logit | hf-classifier:PATH | module:function (TRL's or texts -> floats)."""
    reward_weights: tuple[float, ...] = ()
    """One weight per reward function (empty: all 1); the score is the weighted sum, as TRL's reward_weights."""
    prompts: str | None = None
    """A .txt file (one prompt a line), .jsonl/.json/.parquet file or save_to_disk folder; None: synthetic reviews."""
    prompt_column: str = "prompt"
    """The dataset column of the prompts (text, or chat messages); the other columns are passed to the rewards."""
    chat_template: str = "auto"
    """auto: chat-message prompts go through the tokenizer's template (as TRL) | always: text prompts too | never."""
    max_steps: int = option(200, flag="steps", aliases=("max-steps",))
    """Optimiser steps."""
    learning_rate: float = 1e-3
    """Adam step size (fused Adam where torch has it), at the peak of the schedule."""
    lr_scheduler_type: str = "constant"
    """constant | linear | cosine (transformers' get_scheduler), after the warm-up."""
    warmup_steps: int = 0
    """Optimiser steps of linear warm-up from 0 (overrides warmup_ratio when > 0)."""
    warmup_ratio: float = 0.0
    """Share of all optimiser steps spent warming up."""
    gradient_accumulation_steps: int = 1
    """Score and back-propagate each step's replies in this many parts (whole groups); the update is unchanged."""
    num_iterations: int = 1
    """Optimiser steps per sampled batch, each against pi_old, the policy before the first (TRL's num_iterations);
    with --loss reinforce, PPO's clipped ratio pi / pi_old."""
    loss: str = "reinforce"
    """The surrogate: reinforce (-A log pi) | ppo | gspo | gspo-token | gmpo | cispo | sapo | dppo (docs/losses.md)."""
    epsilon: float | None = None
    """Lower range of the loss's clip: [1 - epsilon, 1 + epsilon_high] (gmpo: in log space; dppo: the divergence
    bound); None: the loss's default (0.2; gspo 3e-4; gmpo 0.4; cispo none)."""
    epsilon_high: float | None = None
    """Upper range (None: the loss's default, gspo 4e-4 and cispo 0.28, else epsilon)."""
    dual_clip: float | None = None
    """--loss ppo: cap a negative advantage's loss at -dual_clip A (a number > 1; None: none)."""
    is_correction: str = "none"
    """Weigh each token by rho = pi_old / pi_sampler: none | token-tis | sequence-tis | token-mask | sequence-mask |
    geo-mask (a no-op unless --staleness > 0: on-policy the sampler is pi_old exactly)."""
    is_cap: float = 2.0
    """The correction's bound C >= 1: TIS's cap min(rho, C); the masks keep rho in [1 / C, C]."""
    staleness: int = 0
    """Sample each step's replies with the parameters of this many steps earlier (async training; 0: the current)."""
    lora_r: int = 0
    """LoRA rank (peft; 0: train every weight). With LoRA only the adapter is trained and saved, and the
    reference is the base model with the adapter disabled."""
    lora_alpha: float = 16.0
    """LoRA scaling numerator (the update is alpha / r x B A)."""
    lora_target_modules: tuple[str, ...] = ()
    """Module names LoRA adapts (empty: peft's default for the architecture)."""
    prompts_per_step: int = 16
    """Prompts per step (the global batch under torchrun; divisible by the number of processes)."""
    num_generations: int = option(4, flag="group-size", aliases=("num-generations",))
    """Replies sampled per prompt (K, the group of RLOO and GRPO)."""
    prompt_length: int | None = None
    """Cut every prompt to its first this-many tokens, dropping shorter ones (None: whole; synthetic reviews: 8)."""
    max_completion_length: int = 24
    """Reply tokens sampled per prompt."""
    ban_eos: bool = True
    """Give end-of-text probability 0 when sampling and scoring: every reply has max_completion_length tokens."""
    banned_tokens: tuple[int, ...] = ()
    """More token ids to ban, in sampling and in scoring alike."""
    temperature: float = 1.0
    """Sample from softmax(logits / temperature); the policy scored and differentiated is the same one."""
    top_p: float = 1.0
    """Sample from the top-p nucleus, renormalised (1: the whole vocabulary); applied in scoring too."""
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
    output_dir: str | None = option(None, flag="out", aliases=("output-dir",))
    """Folder for metrics.jsonl, eval.jsonl, checkpoint.pt and the final policy (CLI: runs/train-lm; None: none)."""
    report_to: str = "none"
    """none | tensorboard (scalars under output_dir/tensorboard; needs the tensorboard package)."""
    log_every: int = 1
    """Print a row of the step table every this-many steps."""
    checkpoint_every: int = 50
    """Write checkpoint.pt (atomically) every this-many steps, and at the end (0: only at the end)."""
    resume: bool = False
    """Continue from output_dir/checkpoint.pt (exact on CPU: the same numbers as an uninterrupted run); CLI:
    --resume continues the run in --out, --resume DIR the run in DIR."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise SettingsError naming the fix for any inconsistent setting (run when the settings are made)."""
        positive = ("max_steps", "prompts_per_step", "max_completion_length", "eval_prompts", "eval_generations",
                    "gradient_accumulation_steps", "num_iterations", "log_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise SettingsError(f"{flag_of(RLConfig, name)} must be at least 1, got {getattr(self, name)}")
        if self.staleness < 0:
            raise SettingsError(f"--staleness must be at least 0 (0: sample with the current parameters), got "
                                f"{self.staleness}")
        if self.prompt_length is not None and self.prompt_length < 1:
            raise SettingsError(f"--prompt-length must be at least 1 (or None: whole prompts), got "
                                f"{self.prompt_length}")
        for name, value, known in (("advantage", self.advantage, KINDS), ("kl-in", self.kl_in, KL_IN),
                                   ("scale-rewards", self.scale_rewards, SCALES),
                                   ("std", self.std, STDS),
                                   ("aggregation", self.aggregation or "token_mean", MODES),
                                   ("device", self.device, ("cpu", "cuda")),
                                   ("default-size", self.default_size, tuple(SIZES)),
                                   ("lr-scheduler-type", self.lr_scheduler_type, SCHEDULES),
                                   ("chat-template", self.chat_template, CHAT_TEMPLATES),
                                   ("report-to", self.report_to, REPORT_TO)):
            if value not in known:
                raise SettingsError(f"unknown --{name} {value!r}; pass one of {', '.join(known)}")
        if uses_groups(self.advantage) and self.num_generations < 2:
            raise SettingsError(f"--advantage {self.advantage} compares replies to one prompt: "
                                "pass --group-size >= 2")
        if self.beta < 0 or self.learning_rate <= 0:
            raise SettingsError("pass --beta >= 0 and --learning-rate > 0")
        if not self.temperature > 0 or not 0 < self.top_p <= 1:
            raise SettingsError(f"pass --temperature > 0 and 0 < --top-p <= 1, got {self.temperature} and {self.top_p}")
        if self.warmup_steps < 0 or not 0 <= self.warmup_ratio < 1:
            raise SettingsError("pass --warmup-steps >= 0 and 0 <= --warmup-ratio < 1")
        check_zoo(self.loss, self.epsilon, self.epsilon_high, self.dual_clip, self.is_correction, self.is_cap)
        if self.lora_r < 0 or not self.lora_alpha > 0:
            raise SettingsError("pass --lora-r >= 0 (0: no LoRA) and --lora-alpha > 0")
        specs = self.reward_specs
        if self.reward_weights and len(self.reward_weights) != len(specs):
            raise SettingsError(f"--reward-weights has {len(self.reward_weights)} weights for {len(specs)} reward "
                                "functions; pass one weight per function in --reward (or none)")
        if self.resume and not self.output_dir:
            raise SettingsError("--resume needs --out (the folder holding checkpoint.pt)")
        if self.output_dir:
            check_folder(self.output_dir)
        if self.device == "cuda" and not torch.cuda.is_available():
            raise SettingsError("--device cuda but torch sees no CUDA device; pass --device cpu")

    @property
    def reward_specs(self) -> list[str]:
        """The reward functions named in ``reward`` (comma-separated)."""
        specs = [s.strip() for s in self.reward.split(",") if s.strip()]
        if not specs:
            raise SettingsError("--reward is empty; pass vader, vader-logit, hf-classifier:PATH or module:function")
        return specs

    @property
    def optimizer_steps(self) -> int:
        return self.max_steps * self.num_iterations

    @property
    def warmup(self) -> int:
        """Warm-up length in optimiser steps."""
        return self.warmup_steps or int(self.warmup_ratio * self.optimizer_steps)

    @property
    def std_options(self) -> dict:
        """The keyword arguments of the std convention for ``advantages``."""
        return STDS[self.std]

    @property
    def loss_mode(self) -> str:
        return self.aggregation or ("constant" if self.advantage == "dr_grpo" else "token_mean")


__all__ = ["CHAT_TEMPLATES", "REPORT_TO", "SCHEDULES", "STDS", "RLConfig"]
