"""The base agent: TinyAgent behaviour-cloned on well-formed but unskilled scripted play.

Demonstrations come from the scripted ``random`` and ``blind`` policies on the training tasks
(agents-ch6 §6.2: 8 episodes per task and kind, 200 Adam steps of 32 episodes at 3e-3), with the
cross-entropy on policy tokens only. The result is deterministic for a seed and cached on disk
under a key made of every setting and the demonstrations' token ids, so a change of the
environment's text or of the tokenizer trains a new one.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from pglab.batch import TokenBatch
from pglab.envs.bugfix import BugFixEnv, Task, make_tasks, scripted_policy, scripted_rollout
from pglab.estimators import masked_mean
from pglab.models.tinyagent import TinyAgent, TinyConfig
from pglab.models.tokenizer import Tokenizer
from pglab.runtime.locks import build_once
from pglab.runtime.threads import single_torch_thread
from pglab.sampling.episodes import MAX_OBS_TOKENS, collate, encode_episode
from pglab.sampling.scoring import sequence_log_probs


def default_cache_dir() -> Path:
    """``$PGLAB_CACHE/base-agents``, by default ``~/.cache/pglab/base-agents``."""
    return Path(os.environ.get("PGLAB_CACHE", Path.home() / ".cache" / "pglab")) / "base-agents"


def demonstrations(tokenizer: Tokenizer, tasks: Sequence[Task], kinds: Sequence[str], episodes_per_task: int,
                   seed: int, max_obs_tokens: int = MAX_OBS_TOKENS) -> TokenBatch:
    """``episodes_per_task`` episodes of each scripted kind (kind k drawing with seed + k) on every task."""
    env = BugFixEnv(list(tasks))
    episodes = []
    for k, kind in enumerate(kinds):
        policy = scripted_policy(kind, seed=seed + k)
        episodes += [scripted_rollout(policy, env, task) for task in tasks for _ in range(episodes_per_task)]
    return collate([encode_episode(tokenizer, e, max_obs_tokens) for e in episodes], [e.reward for e in episodes],
                   tokenizer.pad_id, info=[dict(e.info) for e in episodes])


def behaviour_cloning(model: TinyAgent, data: TokenBatch, steps: int, batch_size: int, lr: float,
                      generator: torch.Generator) -> list[float]:
    """Adam on the mean cross-entropy of policy tokens of random minibatches of ``data`` -> the losses."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        minibatch = data.select(torch.randint(data.batch_size, (batch_size,), generator=generator))
        loss = -masked_mean(sequence_log_probs(model, minibatch), minibatch.action_mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


@dataclass(frozen=True)
class CloningSettings:
    """How the base agent is cloned: the demonstrations, the optimiser and the model's shape."""

    kinds: tuple[str, ...] = ("random", "blind")
    """Scripted policies whose play is imitated (kind k draws with seed + k)."""
    episodes_per_task: int = 8
    """Demonstrations of each kind on every task."""
    steps: int = 200
    """Adam steps of behaviour cloning."""
    batch_size: int = 32
    """Episodes per step, drawn with replacement from the demonstrations."""
    lr: float = 3e-3
    """Adam step size."""
    max_obs_tokens: int = MAX_OBS_TOKENS
    """An observation is cut to this many tokens when encoded."""
    shape: dict | None = None
    """TinyConfig fields that differ from its defaults (None: the default TinyAgent)."""


def make_base_agent(tokenizer: Tokenizer, seed: int = 0, settings: CloningSettings = CloningSettings(), *,
                    tasks: Sequence[Task] | None = None, cache: bool = True,
                    cache_dir: str | Path | None = None) -> TinyAgent:
    """TinyAgent behaviour-cloned on scripted demonstrations (``settings``) on ``tasks`` (default: training split).

    With ``cache``, the weights are read from (or written to) ``cache_dir`` (default
    :func:`default_cache_dir`) under a hash of the settings and demonstrations.
    """
    tasks = list(tasks) if tasks is not None else make_tasks("train")
    data = demonstrations(tokenizer, tasks, settings.kinds, settings.episodes_per_task, seed, settings.max_obs_tokens)
    config = TinyConfig(tokenizer.vocab_size, **(settings.shape or {}))
    key = {"seed": seed, "kinds": list(settings.kinds), "episodes_per_task": settings.episodes_per_task,
           "steps": settings.steps, "batch_size": settings.batch_size, "lr": settings.lr, "config": config.__dict__,
           "vocab": tokenizer.fingerprint(), "torch": torch.__version__}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode())
    digest.update(data.ids.numpy().tobytes())
    digest.update(data.owner.numpy().tobytes())
    folder = Path(cache_dir or default_cache_dir()) / digest.hexdigest()[:20]
    cloned: list[TinyAgent] = []

    def clone(into: Path | None = None) -> TinyAgent:
        with torch.random.fork_rng(devices=[]), single_torch_thread():
            torch.manual_seed(seed)
            model = TinyAgent(config=config)
            behaviour_cloning(model, data, settings.steps, settings.batch_size, settings.lr,
                              torch.Generator().manual_seed(seed))
        if into is not None:
            model.save_pretrained(into)
            (into / "settings.json").write_text(json.dumps(key, indent=1))
        cloned.append(model)
        return model

    if not cache:
        return clone()
    build_once(folder, clone, "config.json")                     # one process clones, the others wait and load
    return cloned[0] if cloned else TinyAgent.from_pretrained(folder)


__all__ = ["CloningSettings", "behaviour_cloning", "default_cache_dir", "demonstrations", "make_base_agent"]
