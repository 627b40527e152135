"""Settings of ``pglab train-agent``: which agent, which environment, which estimator, how long.

A CleanRL-style dataclass (a docstring per field) that validates itself, the ``--quick`` sizes,
and the recipes of the embedded default agent (each recipe is its own cache key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from pglab.estimators.advantages import KINDS, uses_groups
from pglab.runtime.options import SettingsError, flag_of, option
from pglab.sampling.text_episodes import CALLS
from pglab.trainers.tinyagent import FORMAT_PENALTY
from pglab.trainers.update import check_zoo


@dataclass
class AgentConfig:
    """Settings of ``pglab train-agent`` (``--field-name VALUE``; TRL's ``--max-steps`` and ``--num-generations``
    are accepted for ``--steps`` and ``--group-size``)."""

    model: str = "default"
    """default (the embedded tiny GPT-2 agent: BugFixEnv's in bugfix, the tool-use agent elsewhere) or a folder
    written by save_pretrained, with its tokenizer."""
    default_size: str = "full"
    """Size of the embedded default when model is default: full, or quick (seconds to build; --quick uses it)."""
    env: str = "bugfix"
    """bugfix, or module:factory, a function returning a text-turn environment (the current folder is importable)."""
    advantage: str | None = None
    """reinforce (EMA baseline) | rloo | grpo | dr_grpo (groups of --group-size episodes of one task); None:
    reinforce in bugfix, USER_ENV's elsewhere (chosen by the committed defaults sweep)."""
    beta: float = 0.0
    """Price of one nat of KL to the starting policy, k1 per token in the reward (0: no reference pass)."""
    format_penalty: float | None = None
    """Cost of a malformed call in training, on that call's own tokens (in bugfix as BugFixEnv judges it; elsewhere
    a call that is not <call> TOOL ... </call> with TOOL a tool the prompt names); None: the swept value
    FORMAT_PENALTY in bugfix, USER_ENV's elsewhere."""
    steps: int | None = option(None, aliases=("max-steps",))
    """Optimiser steps (None: 80 in bugfix, USER_ENV's elsewhere)."""
    episodes_per_step: int | None = None
    """Episodes per step, the global batch under torchrun (None: 64 in bugfix, USER_ENV's elsewhere)."""
    group_size: int = option(4, aliases=("num-generations",))
    """Episodes per drawn task for rloo, grpo and dr_grpo."""
    learning_rate: float | None = None
    """Adam step size (None: 2e-3 in bugfix, USER_ENV's elsewhere)."""
    loss: str = "reinforce"
    """The surrogate: reinforce (-A log pi) | ppo | gspo | gspo-token | gmpo | cispo | sapo | dppo (docs/losses.md)."""
    epsilon: float | None = None
    """Lower range of the loss's clip (gmpo: in log space; dppo: the divergence bound); None: the loss's default."""
    epsilon_high: float | None = None
    """Upper range of the loss's clip (None: the loss's default, else epsilon)."""
    dual_clip: float | None = None
    """--loss ppo: cap a negative advantage's loss at -dual_clip A (a number > 1; None: none)."""
    is_correction: str = "none"
    """Weigh each token by rho = pi_old / pi_sampler: none | token-tis | sequence-tis | token-mask | sequence-mask |
    geo-mask (a no-op unless --staleness or --explore > 0)."""
    is_cap: float = 2.0
    """The correction's bound C >= 1: TIS's cap min(rho, C); the masks keep rho in [1 / C, C]."""
    num_iterations: int = 1
    """Optimiser steps per collected batch, each against the policy before the first (reinforce: PPO's clip)."""
    staleness: int = 0
    """Collect each step's episodes with the parameters of this many steps earlier (async training; 0: current)."""
    calls: str | None = None
    """constrained: a turn is end-of-text or a well-formed call to a tool the prompt names, with as many arguments
    as its usage shows, each a word copied from the prompt or the observations but not a usage's argument name (the
    sampler and the update both renormalise over the allowed tokens); free: any text. None: free in bugfix,
    reasoning-gym (whose answers are computed, not copied) and trl (whose contract ends a rollout at a final answer
    in free text), constrained in a module:factory environment."""
    explore: float | None = None
    """With constrained calls, the share e of uniform choice where a training call chooses its next word (after
    <call>, the tool, each argument): there the episodes are sampled from mu = (1 - e) pi + e U(allowed ids), so a tool
    or word the agent gives almost no probability is still tried, and the sampler's log-probs go to --is-correction
    (held-out measurements sample pi alone). None: 0 in bugfix, USER_ENV's elsewhere (0: its pilots found no gain)."""
    novelty: float | None = None
    """Exploration bonus b of a call whose answer no other call of the training step got: b (1 - u) for it, -b u
    for every other call whose answer was read, u the share of new answers (count-based, summing to 0 over the
    step), so a call that finds something is raised before the task is ever solved. None: 0 in bugfix, USER_ENV's
    elsewhere (0: its trial was not adopted)."""
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

    def __post_init__(self) -> None:
        if self.calls is None:
            self.calls = "free" if self.env == "bugfix" or self.env.startswith(("reasoning-gym:", "trl:")) \
                else "constrained"
        for name, value in (BUGFIX if self.env == "bugfix" else USER_ENV).items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        self.validate()

    def validate(self) -> None:
        """Raise SettingsError naming the fix for any inconsistent setting (run when the settings are made)."""
        for name in ("steps", "episodes_per_step", "group_size", "max_call_tokens", "max_obs_tokens", "eval_every",
                     "eval_per_task", "num_iterations"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{flag_of(AgentConfig, name)} must be at least 1, got {getattr(self, name)}")
        check_zoo(self.loss, self.epsilon, self.epsilon_high, self.dual_clip, self.is_correction, self.is_cap)
        if self.staleness < 0:
            raise SettingsError(f"--staleness must be at least 0 (0: collect with the current parameters), got "
                                f"{self.staleness}")
        if not 0 <= self.explore < 1 or (self.explore and self.calls != "constrained"):
            raise SettingsError(f"--explore is the share of uniform choice in constrained calls, a number in [0, 1) "
                                f"with --calls constrained; got {self.explore} with --calls {self.calls}")
        if not 0 <= self.novelty < float("inf"):
            raise SettingsError(f"--novelty is the bonus of a call with a new answer, a finite number >= 0; got "
                                f"{self.novelty}")
        if self.seed < 0 or self.beta < 0 or not 0 <= self.format_penalty < float("inf") or self.learning_rate <= 0:
            raise SettingsError("pass --seed >= 0, --beta >= 0, --format-penalty >= 0 and --learning-rate > 0")
        for name, value, known in (("advantage", self.advantage, KINDS), ("default-size", self.default_size,
                                   tuple(DEFAULT_AGENT)), ("device", self.device, ("cpu", "cuda")),
                                  ("calls", self.calls, CALLS)):
            if value not in known:
                raise SettingsError(f"unknown --{name} {value!r}; pass one of {', '.join(known)}")
        if uses_groups(self.advantage) and self.episodes_per_step % self.group_size:
            raise SettingsError(f"--advantage {self.advantage} draws whole groups: pass an --episodes-per-step that is "
                                f"a multiple of --group-size {self.group_size}, not {self.episodes_per_step}")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise SettingsError("--device cuda but torch sees no CUDA device; pass --device cpu")
        if self.model != "default":
            check_model_folder(self.model)


def check_model_folder(model: str) -> None:
    """Refuse a --model folder without a model (config.json) or without a tokenizer beside it."""
    path = Path(model)
    if not (path / "config.json").is_file():
        raise SettingsError(f"--model {model} holds no model (no config.json); pass default or a folder written by "
                            "save_pretrained")
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise SettingsError(f"--model {model} has no tokenizer; save it beside the model with "
                            "tokenizer.save_pretrained(folder)")


BUGFIX = {"advantage": "reinforce", "format_penalty": FORMAT_PENALTY, "steps": 80, "episodes_per_step": 64,
          "learning_rate": 2e-3, "explore": 0.0, "novelty": 0.0}
"""The defaults in BugFixEnv (the demo's schedule and the format-penalty sweep of docs/results/format_penalty.md)."""
USER_ENV = {"advantage": "reinforce", "format_penalty": 0.1, "steps": 60, "episodes_per_step": 64,
            "learning_rate": 1e-3, "explore": 0.0, "novelty": 0.0}
"""The defaults in any other environment, from the committed sweep ``scripts/agent_sweep.py`` (the learning rate x
the advantage x the format cost, 30 steps of 32 episodes, on the calculator, word, lookup and parity environments
of tests/support/tool_envs.py): REINFORCE with the EMA baseline, learning rate 1e-3, a format cost of 0.1. The
sweep with free calls chose them (docs/results/agent-sweep/defaults/report.md, defaults-v7/). Run again with
constrained calls (defaults-constrained/) its best mean held-out gain, 0.40 at 3e-3, beat 1e-3's 0.35 by less than
two standard errors of the difference (about 0.06: each gain is a difference of two rewards over 64 held-out
episodes, sd at most 0.5 each, averaged over 4 environments), so the incumbent stays; the format cost is moot
under constrained calls (0 and 0.1 gave the same runs). On the version-9 agent (defaults-v9/) the same: 0.35 at 3e-3
against 0.32 at 1e-3. The schedule, 60 steps, is twice the sweep's; 64 episodes per step (twice the sweep's 32) won a
trial on all 38 environments at seeds 0 and 1 (docs/results/agent-sweep/trial-budget/: mean trained held-out reward
0.64 against 0.55, 3.4 standard errors of the paired difference, every run under 2 minutes on 2 shared cores).
explore stays 0: its pilots (docs/results/agent-sweep/pilot/) found no gain. novelty stays 0 and the batch 64: their
trials on all 44 environments (docs/results/agent-sweep/trial-novelty/: 0.1; trial-batch/: 128 episodes per step)
gained 1.2 and 0.9 standard errors, not the two their rules asked, and both together (trial-both/) 1.2."""

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

TOOL_PIECES = r" ?</?[A-Za-z]+>| ?[A-Za-z]+| ?\d|\s+|[^\sA-Za-z\d]+"
"""The tool-use agent's BPE merges inside these pieces: a tag (``<call>``), a run of letters, one digit (each with
the space before it), spaces, punctuation; so a number is copied digit by digit."""
TOOL_AGENT = {
    "full": {"corpus": 12000, "vocab": 768, "pieces": TOOL_PIECES, "layers": 2, "width": 64, "heads": 4,
             "positions": 1024, "steps": 3500, "batch_size": 32, "lr": 5e-3, "max_obs_tokens": 96, "seed": 0,
             "previous_tokens": 2},
    "quick": {"corpus": 800, "vocab": 384, "pieces": TOOL_PIECES, "layers": 2, "width": 32, "heads": 2,
              "positions": 1024, "steps": 400, "batch_size": 16, "lr": 1e-2, "max_obs_tokens": 96, "seed": 0,
              "previous_tokens": 2},
}
"""The tool-use agent's recipes (``--model default`` in every environment but bugfix): a BPE and a GPT-2
behaviour-cloned on procedural tool-use transcripts (:mod:`pglab.envs.tooluse`); ``previous_tokens``: the GPT-2
also embeds each position's last two tokens (:mod:`pglab.models.shifted_gpt2`), which makes copying an argument
from the prompt learnable in a few thousand cloning steps, and tells apart the places where a piece occurs twice."""


__all__ = ["BUGFIX", "DEFAULT_AGENT", "QUICK", "TOOL_AGENT", "TOOL_PIECES", "USER_ENV", "AgentConfig",
           "check_model_folder"]
