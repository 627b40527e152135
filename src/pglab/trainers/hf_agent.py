"""Agent RL for any Hugging Face causal LM: its settings, the embedded default agent, the episode source.

The agent writes text calls, token in and token out (:mod:`pglab.sampling.text_episodes`), in
BugFixEnv or any text-turn environment (:mod:`pglab.envs.text`), and trains through the same
``train_episodes`` loop and ``pg_update`` as TinyAgent.

The embedded default (no network): a byte-level BPE trained on BugFixEnv's own texts, a tiny
GPT-2 of TinyAgent's shape (2 layers, 64 wide, 4 heads); its BPE may merge across punctuation
inside a word, so ``fix_init`` and ``</call>`` are single tokens as in TinyAgent's vocabulary. It is
behaviour-cloned on scripted random and blind play through the same cloning code as TinyAgent's
base agent, built once and cached under
``$PGLAB_CACHE`` (or ``~/.cache/pglab``) in a folder named by a hash of its recipe.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pglab.batch import TokenBatch
from pglab.envs.bugfix import CALLS, BugFixEnv, make_tasks, scripted_policy, scripted_rollout
from pglab.envs.text import TextTurnEnv
from pglab.models.default_lm import cache_root, train_tokenizer
from pglab.models.policy import TokenPolicy
from pglab.models.tokenizer import environment_texts
from pglab.progress import track
from pglab.sampling.episodes import collate
from pglab.sampling.text_episodes import TextLayout, collect_text_episodes, encode_text_episode
from pglab.threads import single_torch_thread
from pglab.trainers.cloning import behaviour_cloning


@dataclass
class AgentConfig:
    """Settings of ``pglab train-agent`` (``--field-name VALUE``)."""

    model: str = "default"
    """default (the embedded tiny GPT-2 agent) or a folder written by save_pretrained, with its tokenizer."""
    env: str = "bugfix"
    """bugfix, or module:factory, a function returning a text-turn environment (the current folder is importable)."""
    advantage: str = "reinforce"
    """reinforce (EMA baseline) | rloo | grpo | dr_grpo (groups of --group-size episodes of one task)."""
    beta: float = 0.0
    """Price of one nat of KL to the starting policy, k1 per token in the reward (0: no reference pass)."""
    steps: int = 60
    """Optimiser steps."""
    episodes_per_step: int = 32
    """Episodes per step (the global batch under torchrun)."""
    group_size: int = 4
    """Episodes per drawn task for rloo, grpo and dr_grpo."""
    learning_rate: float = 1e-3
    """Adam step size."""
    max_call_tokens: int = 24
    """Token cap of one call (a call also ends at its closing text)."""
    max_obs_tokens: int = 96
    """Observation tokens kept per tool answer."""
    eval_every: int = 10
    """Held-out evaluation every this-many steps (and after the last)."""
    eval_per_task: int = 4
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
        if self.seed < 0 or self.beta < 0 or self.learning_rate <= 0:
            raise ValueError("pass --seed >= 0, --beta >= 0 and --learning-rate > 0")
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
    "quick": {"vocab": 512, "whole_words": True, "layers": 1, "width": 32, "heads": 2, "positions": 1024,
              "kinds": ["random", "blind"], "episodes_per_task": 2, "steps": 30, "batch_size": 16, "lr": 3e-3,
              "max_obs_tokens": 96, "seed": 0},
}
"""The embedded default agent's recipes (each its own cache key): ``full`` has TinyAgent's shape and
behaviour-cloning schedule; ``quick`` (``--quick`` and the tests) is built in seconds."""


def bugfix_texts() -> list[str]:
    """What the default agent's BPE is trained on: every environment text, the calls, scripted transcripts."""
    tasks = make_tasks("all")
    texts = environment_texts(tasks, episodes_per_task=2) + list(CALLS)
    env = BugFixEnv(tasks)
    for kind in ("oracle", "random", "blind"):
        policy = scripted_policy(kind, seed=0)
        for task in tasks:
            episode = scripted_rollout(policy, env, task)
            texts.append("\n".join(f"{c}\n<obs> {o} </obs>" for c, o in zip(episode.calls, episode.observations)))
    return texts


def demonstrations(layout: TextLayout, kinds: Sequence[str], episodes_per_task: int, seed: int) -> TokenBatch:
    """Scripted episodes of ``kinds`` on the training tasks in the text layout (kind k draws with seed + k)."""
    tasks, env = make_tasks("train"), BugFixEnv("train")
    episodes = []
    for k, kind in enumerate(kinds):
        policy = scripted_policy(kind, seed=seed + k)
        episodes += [scripted_rollout(policy, env, task) for task in tasks for _ in range(episodes_per_task)]
    pad = layout.tokenizer.pad_token_id
    return collate([encode_text_episode(layout, e.prompt, e.calls, e.observations) for e in episodes],
                   [e.reward for e in episodes], pad, info=[dict(e.info) for e in episodes])


def default_agent_dir(size: str = "full") -> Path:
    """Where the default agent of ``size`` (full | quick) lives, built or not."""
    if size not in DEFAULT_AGENT:
        raise ValueError(f"unknown default agent size {size!r}; pass one of {', '.join(DEFAULT_AGENT)}")
    recipe = {**DEFAULT_AGENT[size], "torch": torch.__version__}
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    return cache_root() / f"agent-default-{size}-{digest}"


def build_default_agent(folder: Path, size: str = "full", progress: bool = True) -> dict[str, Any]:
    """Train the BPE, build the GPT-2, behaviour-clone it, and save both into ``folder``; returns stats."""
    from transformers import GPT2Config, GPT2LMHeadModel

    spec = DEFAULT_AGENT[size]
    steps = iter(track(range(3), "building the default agent (tokenizer, demonstrations, cloning)", total=3)
                 if progress else range(3))
    next(steps)
    tokenizer = train_tokenizer(bugfix_texts(), spec["vocab"], whole_words=spec["whole_words"])
    eos = tokenizer.eos_token_id
    next(steps)
    data = demonstrations(TextLayout(tokenizer, chat=False, max_obs_tokens=spec["max_obs_tokens"]), spec["kinds"],
                          spec["episodes_per_task"], spec["seed"])
    next(steps)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=spec["positions"], n_embd=spec["width"],
                        n_layer=spec["layers"], n_head=spec["heads"], resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    with torch.random.fork_rng(devices=[]), single_torch_thread():
        torch.manual_seed(spec["seed"])
        model = GPT2LMHeadModel(config).eval()
        losses = behaviour_cloning(model, data, spec["steps"], spec["batch_size"], spec["lr"],
                                   torch.Generator().manual_seed(spec["seed"]))
    list(steps)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    stats = {"recipe": spec, "demonstrations": data.batch_size, "longest": int(data.attention_mask.sum(-1).max()),
             "final_loss": sum(losses[-20:]) / len(losses[-20:]), "parameters": model.num_parameters()}
    (folder / "agent.json").write_text(json.dumps(stats, indent=1))
    return stats


def ensure_default_agent(size: str = "full", progress: bool = True) -> Path:
    """The default agent's folder, built on first use (in a temporary folder, renamed into place)."""
    folder = default_agent_dir(size)
    if (folder / "agent.json").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
    try:
        build_default_agent(tmp, size, progress)
        try:
            os.replace(tmp, folder)
        except OSError:
            if not (folder / "agent.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def text_collector(layout: TextLayout, make_env: Callable[[str], TextTurnEnv], *,
                   max_call_tokens: int) -> Callable[[TokenPolicy, list, torch.Generator], TokenBatch]:
    """The ``collect`` of ``train_episodes`` for keys (split, seed): one fresh environment per episode."""

    def collect(policy: TokenPolicy, keys: list, generator: torch.Generator) -> TokenBatch:
        envs = [make_env(split) for split, _ in keys]
        return collect_text_episodes(policy, layout, envs, [seed for _, seed in keys], generator,
                                     max_call_tokens=max_call_tokens)

    return collect


__all__ = ["DEFAULT_AGENT", "QUICK", "AgentConfig", "build_default_agent", "bugfix_texts", "default_agent_dir",
           "demonstrations", "ensure_default_agent", "text_collector"]
