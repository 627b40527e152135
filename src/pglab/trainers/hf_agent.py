"""Agent RL for any Hugging Face causal LM: its settings, the embedded default agent, the episode source.

The agent writes text calls, token in and token out (:mod:`pglab.sampling.text_episodes`), in
BugFixEnv or any text-turn environment (:mod:`pglab.envs.text`), and trains through the same
``train_episodes`` step in the one loop and ``pg_update`` as TinyAgent.

The embedded default (no network): a byte-level BPE trained on BugFixEnv's own texts, a tiny
GPT-2 of TinyAgent's shape (2 layers, 64 wide, 4 heads); its BPE may merge across punctuation
inside a word, so ``fix_init`` and ``</call>`` are single tokens as in TinyAgent's vocabulary. It is
behaviour-cloned on scripted random and blind play through the same cloning code as TinyAgent's
base agent, built once and cached under
``$PGLAB_CACHE`` (or ``~/.cache/pglab``) in a folder named by a hash of its recipe.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import random
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

from pglab.batch import TokenBatch
from pglab.envs.bugfix import CALLS, BugFixEnv, make_tasks, scripted_policy, scripted_rollout
from pglab.envs.text import TextTurnEnv, check_reset, check_step, env_factory
from pglab.envs.tooluse import VERSION, Transcript, corpus
from pglab.models.default_lm import cache_root, train_tokenizer
from pglab.models.hf import load_causal_lm
from pglab.models.policy import HFPolicy, TokenPolicy
from pglab.models.tokenizer import environment_texts
from pglab.runtime.distributed import process_group, world, wrap
from pglab.runtime.locks import build_once
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import track
from pglab.runtime.threads import single_torch_thread
from pglab.sampling.episodes import collate, collect_episodes, episode_stats
from pglab.sampling.text_episodes import TextLayout, encode_text_episode
from pglab.trainers.agent_config import DEFAULT_AGENT, QUICK, TOOL_AGENT, AgentConfig
from pglab.trainers.cloning import behaviour_cloning
from pglab.trainers.episodes import EpisodeSource, ReinforceSettings, format_costs, novelty_bonus, train_episodes
from pglab.trainers.loop import RunSettings
from pglab.trainers.records import text_of


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


def agent_gpt2(tokenizer: Any, spec: dict) -> torch.nn.Module:
    """An untrained GPT-2 of ``spec``'s shape for ``tokenizer`` (weights from torch's current RNG); with
    ``spec["previous_tokens"]`` 1 or 2 a :class:`~pglab.models.shifted_gpt2.ShiftedGPT2LMHeadModel` that embeds
    that many previous tokens at each position (it copies)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from pglab.models.shifted_gpt2 import ShiftedGPT2Config, ShiftedGPT2LMHeadModel

    previous = spec.get("previous_tokens", 0)
    eos = tokenizer.eos_token_id
    shape = dict(vocab_size=len(tokenizer), n_positions=spec["positions"], n_embd=spec["width"],
                 n_layer=spec["layers"], n_head=spec["heads"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                 bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    if previous:
        return ShiftedGPT2LMHeadModel(ShiftedGPT2Config(previous_tokens=previous, **shape))
    return GPT2LMHeadModel(GPT2Config(**shape))


def clone_gpt2(tokenizer: Any, data: TokenBatch, spec: dict) -> tuple[torch.nn.Module, list[float]]:
    """A GPT-2 of ``spec``'s shape (:func:`agent_gpt2`) behaviour-cloned on ``data``'s policy tokens -> (model,
    losses)."""
    with torch.random.fork_rng(devices=[]), single_torch_thread():
        torch.manual_seed(spec["seed"])
        model = agent_gpt2(tokenizer, spec).eval()
        losses = behaviour_cloning(model, data, spec["steps"], spec["batch_size"], spec["lr"],
                                   torch.Generator().manual_seed(spec["seed"]))
    return model, losses


def save_agent(folder: Path, model: torch.nn.Module, tokenizer: Any, data: TokenBatch, losses: list[float],
               spec: dict) -> dict[str, Any]:
    """Save the model and tokenizer into ``folder`` with ``agent.json`` (the recipe and the cloning's stats)."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    stats = {"recipe": spec, "demonstrations": data.batch_size, "longest": int(data.attention_mask.sum(-1).max()),
             "final_loss": sum(losses[-20:]) / len(losses[-20:]), "parameters": model.num_parameters()}
    (folder / "agent.json").write_text(json.dumps(stats, indent=1))
    return stats


def build_default_agent(folder: Path, size: str = "full", progress: bool = True) -> dict[str, Any]:
    """Train the BPE, build the GPT-2, behaviour-clone it, and save both into ``folder``; returns stats."""
    spec = DEFAULT_AGENT[size]
    steps = iter(track(range(3), "building the default agent (tokenizer, demonstrations, cloning)", total=3)
                 if progress else range(3))
    next(steps)
    tokenizer = train_tokenizer(bugfix_texts(), spec["vocab"], whole_words=spec["whole_words"])
    next(steps)
    data = demonstrations(TextLayout(tokenizer, chat=False, max_obs_tokens=spec["max_obs_tokens"]), spec["kinds"],
                          spec["episodes_per_task"], spec["seed"])
    next(steps)
    model, losses = clone_gpt2(tokenizer, data, spec)
    list(steps)
    return save_agent(folder, model, tokenizer, data, losses, spec)


def transcripts_batch(layout: TextLayout, transcripts: Sequence[Transcript]) -> TokenBatch:
    """Scripted transcripts encoded as the collector lays episodes out (the calls are the policy tokens)."""
    return collate([encode_text_episode(layout, t.prompt, t.calls, t.observations) for t in transcripts],
                   [0.0] * len(transcripts), layout.pad_id)


def build_tool_agent(folder: Path, size: str = "full", progress: bool = True) -> dict[str, Any]:
    """The tool-use agent: a BPE and a GPT-2 cloned on procedural tool-use transcripts (:mod:`pglab.envs.tooluse`),
    saved into ``folder``; returns stats."""
    spec = TOOL_AGENT[size]
    steps = iter(track(range(3), "building the tool-use agent (corpus and tokenizer, encoding, cloning)", total=3)
                 if progress else range(3))
    next(steps)
    transcripts = corpus(spec["corpus"], spec["seed"])
    texts = ["\n".join([t.prompt, *(f"{c}\n<obs> {o} </obs>" for c, o in zip(t.calls, t.observations))])
             for t in transcripts]
    tokenizer = train_tokenizer(texts, spec["vocab"], pieces=spec["pieces"])
    next(steps)
    data = transcripts_batch(TextLayout(tokenizer, chat=False, max_obs_tokens=spec["max_obs_tokens"]), transcripts)
    next(steps)
    model, losses = clone_gpt2(tokenizer, data, spec)
    list(steps)
    return save_agent(folder, model, tokenizer, data, losses, spec)


SHIPPED = Path(__file__).resolve().parents[1] / "data" / "agents"
"""Agents built once from their recipes and shipped with pglab (``scripts/ship_agent.py``), one folder per kind and
size: every machine then starts from the same weights, where a build's floats, so its priors, differ between CPUs."""


def agent_recipe(kind: str, size: str = "full") -> dict[str, Any]:
    """The recipe of the embedded agent ``kind`` (default | tool) of ``size`` (full | quick): its settings, and the
    tool-use corpus's version."""
    recipes = {"default": DEFAULT_AGENT, "tool": TOOL_AGENT}[kind]
    if size not in recipes:
        raise ValueError(f"unknown default agent size {size!r}; pass one of {', '.join(recipes)}")
    return {**recipes[size], **({"corpus_version": VERSION} if kind == "tool" else {})}


def agent_dir(kind: str, size: str = "full") -> Path:
    """Where a build of the embedded agent ``kind`` of ``size`` on this machine lives, built or not."""
    recipe = {**agent_recipe(kind, size), "torch": torch.__version__}
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    return cache_root() / f"agent-{kind}-{size}-{digest}"


def shipped_agent(kind: str, size: str = "full") -> Path | None:
    """The shipped folder of the agent ``kind`` of ``size`` when it holds the current recipe, else None."""
    folder = SHIPPED / f"{kind}-{size}"
    if not (folder / "agent.json").is_file():
        return None
    return folder if json.loads((folder / "agent.json").read_text())["recipe"] == agent_recipe(kind, size) else None


def ensure_agent(kind: str, size: str = "full", progress: bool = True) -> Path:
    """The embedded agent's folder: the shipped one (:data:`SHIPPED`) where its recipe is the current one, else a
    build on this machine, made on first use (in a temporary folder, renamed into place). Under an initialised
    process group (torchrun) rank 0 builds it and the other ranks wait: transformers writes a model's weights on
    rank 0 only, so a folder built on another rank would lack them."""
    shipped = shipped_agent(kind, size)
    if shipped is not None:
        return shipped
    folder = agent_dir(kind, size)
    if (folder / "agent.json").exists():
        return folder
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if not distributed or torch.distributed.get_rank() == 0:
        _build_into(folder, kind, size, progress)
    if distributed:
        torch.distributed.barrier()
    return folder


def _build_into(folder: Path, kind: str, size: str, progress: bool) -> None:
    """Build the agent ``kind`` of ``size`` into ``folder`` unless a process before (or beside) this one did."""
    def build(tmp: Path) -> None:
        {"default": build_default_agent, "tool": build_tool_agent}[kind](tmp, size, progress)
        if not (tmp / "config.json").exists():
            raise RuntimeError(f"building the {kind} agent wrote no config.json into {tmp}")

    build_once(folder, build, "agent.json")


def default_agent_dir(size: str = "full") -> Path:
    """Where the BugFixEnv default agent of ``size`` (full | quick) lives, built or not."""
    return agent_dir("default", size)


def ensure_default_agent(size: str = "full", progress: bool = True) -> Path:
    """The BugFixEnv default agent's folder, built on first use."""
    return ensure_agent("default", size, progress)


def text_collector(layout: TextLayout, make_env: Callable[[str], TextTurnEnv], format_penalty: float = 0.0,
                   explore: float = 0.0,
                   novelty: float = 0.0) -> Callable[[TokenPolicy, list, torch.Generator, bool], TokenBatch]:
    """The ``collect`` of ``train_episodes`` for keys (split, seed): one fresh environment per episode.

    ``format_penalty`` costs each malformed call of a training episode
    (:func:`~pglab.trainers.episodes.format_costs`); ``explore`` mixes that share of uniform choice into the
    training episodes' constrained calls (:func:`~pglab.sampling.episodes.sample_tokens`), never into a measurement;
    ``novelty`` is the exploration bonus of a training call whose answer is new (:func:`~pglab.trainers.episodes.
    novelty_bonus`).
    """

    def collect(policy: TokenPolicy, keys: list, generator: torch.Generator, training: bool = False) -> TokenBatch:
        batch = collect_episodes(policy, layout, [make_env(split) for split, _ in keys], [seed for _, seed in keys],
                                 generator, explore=explore if training else 0.0)
        return novelty_bonus(format_costs(batch, format_penalty), novelty) if training else batch

    return collect


USER_TRAIN_SEEDS, USER_HELDOUT_SEEDS = range(100_000), range(10**6, 10**6 + 8)
"""Task seeds of a user's environment: training draws, and the fixed held-out set."""


WARM_START = {"tasks": 64, "episodes_per_task": 2, "max_turns": 16, "steps": 100, "batch_size": 16, "lr": 3e-3}
"""The warm start on an environment's scripted play: episodes on the first training seeds, then behaviour cloning."""


def has_hooks(env: Any) -> bool:
    """Whether ``env`` offers scripted play: ``demonstrations(seed)`` or ``sample_call(rng)``."""
    return any(callable(getattr(env, name, None)) for name in ("demonstrations", "sample_call"))


def scripted_transcript(env: Any, seed: int, rng: random.Random, max_turns: int) -> Transcript:
    """One episode of ``env``'s scripted play on task ``seed``: the calls of ``demonstrations(seed)`` when it has
    them, else ``sample_call(rng)`` until the environment says done (at most ``max_turns`` calls)."""
    prompt = check_reset(env.reset(seed), "--env: reset")
    demonstrated = callable(getattr(env, "demonstrations", None))
    planned = iter(env.demonstrations(seed)) if demonstrated else iter(lambda: env.sample_call(rng), None)
    calls, observations = [], []
    for call in itertools.islice(planned, max_turns):
        if not isinstance(call, str):
            raise SettingsError(f"--env: {'demonstrations' if demonstrated else 'sample_call'} must give call texts "
                                f"(str), got {type(call).__name__}")
        observation, _, done, _ = check_step(env.step(call), "--env: step")
        calls.append(call)
        observations.append(observation)
        if done:
            break
    return Transcript(prompt, tuple(calls), tuple(observations))


def warm_start(model: torch.nn.Module, layout: TextLayout, make_env: Callable[[str], TextTurnEnv],
               seed: int) -> dict[str, Any] | None:
    """Behaviour-clone ``model`` on the environment's scripted play (:func:`has_hooks`) on training seeds, laid out
    as the collector lays episodes out (agents-ch6 §6.2) -> stats; None (and nothing done) without hooks."""
    if not has_hooks(make_env("train")):
        return None
    spec, rng = WARM_START, random.Random(seed)
    transcripts = [scripted_transcript(make_env("train"), task, rng, spec["max_turns"])
                   for task in USER_TRAIN_SEEDS[:spec["tasks"]] for _ in range(spec["episodes_per_task"])]
    transcripts = [t for t in transcripts if t.calls]
    if not transcripts:
        raise SettingsError("--env: the scripted play (demonstrations or sample_call) gave no call; return call texts")
    data = transcripts_batch(layout, transcripts)
    with torch.random.fork_rng(devices=[]), single_torch_thread():
        torch.manual_seed(seed)
        losses = behaviour_cloning(model.train(), data, spec["steps"], spec["batch_size"], spec["lr"],
                                   torch.Generator().manual_seed(seed))
    model.eval()
    return {"episodes": len(transcripts), "final_loss": sum(losses[-10:]) / len(losses[-10:])}


def load_agent(cfg: AgentConfig, progress: bool) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) of --model: the embedded default (shipped, or built on first use) or a save_pretrained
    folder (which AgentConfig checked when it was made)."""
    kind = "default" if cfg.env == "bugfix" else "tool"
    folder = str(ensure_agent(kind, cfg.default_size, progress)) if cfg.model == "default" else cfg.model
    model, tokenizer = load_causal_lm(folder)
    return model.eval(), tokenizer


def task_keys(cfg: AgentConfig) -> tuple[list, list]:
    """(train keys, held-out keys): (split, seed) pairs, one per task for BugFixEnv."""
    if cfg.env == "bugfix":
        return ([("train", i) for i in range(len(make_tasks("train")))],
                [("heldout", i) for i in range(len(make_tasks("heldout")))])
    return [("train", s) for s in USER_TRAIN_SEEDS], [("heldout", s) for s in USER_HELDOUT_SEEDS]


def reinforce_settings(cfg: AgentConfig) -> ReinforceSettings:
    """The REINFORCE settings of ``cfg`` (the rest at ReinforceSettings' defaults)."""
    return ReinforceSettings(steps=cfg.steps, batch_size=cfg.episodes_per_step, lr=cfg.learning_rate,
                             advantage=cfg.advantage, group_size=cfg.group_size, beta=cfg.beta,
                             eval_every=cfg.eval_every, eval_per_task=cfg.eval_per_task, seed=cfg.seed, loss=cfg.loss,
                             epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high, dual_clip=cfg.dual_clip,
                             is_correction=cfg.is_correction, is_cap=cfg.is_cap, num_iterations=cfg.num_iterations,
                             staleness=cfg.staleness)


def episode_source(cfg: AgentConfig, layout: TextLayout, make_env: Callable[[str], TextTurnEnv]) -> EpisodeSource:
    """The episodes of ``cfg``'s environment in ``layout``, their stats and the held-out headline."""
    collect = text_collector(layout, make_env, cfg.format_penalty, cfg.explore, cfg.novelty)
    return EpisodeSource(collect, *task_keys(cfg), stats=partial(episode_stats, call_stops=True),
                         headline="pass_rate" if cfg.env == "bugfix" else "reward",
                         token_text=text_of(layout.tokenizer.decode))


def train_agent(cfg: AgentConfig, out: str | Path, *, quick: bool = False, resume: bool = False,
                stop_at: int | None = None, progress: bool = True,
                echo: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Measure, train and measure again the agent of ``cfg``; the trained policy goes to ``out/policy``.

    Returns dict(config (after ``quick``), before and after ({split: TokenBatch}, the same draws),
    run (``train_episodes``' dict), seconds). ``resume`` continues the stopped run in ``out``;
    ``stop_at`` stops after that step (checkpointed).
    """
    if quick:
        smaller = {k: min(v, getattr(cfg, k)) for k, v in QUICK.items()}
        cfg = dataclasses.replace(cfg, default_size="quick", **smaller)
    cfg.validate()
    make_env = env_factory(cfg.env)
    with process_group(cfg.device) as device:
        started = time.perf_counter()
        model, tokenizer = load_agent(cfg, progress and world()[0] == 0)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id or 0
        layout = TextLayout(tokenizer, max_obs_tokens=cfg.max_obs_tokens, max_call_tokens=cfg.max_call_tokens,
                            calls=cfg.calls)
        warmed = warm_start(model, layout, make_env, cfg.seed)
        if warmed is not None:
            echo(f"warm start: behaviour-cloned on {warmed['episodes']} episodes of the environment's scripted play "
                 f"(final loss {warmed['final_loss']:.3f})")
        model.to(device)
        source = episode_source(cfg, layout, make_env)
        measured = {"train": source.train_keys[:len(source.heldout_keys)] if cfg.env != "bugfix" else
                    source.train_keys, "heldout": source.heldout_keys}
        sampler = HFPolicy(model, pad_id=pad)

        def measure() -> dict[str, Any]:
            gen = torch.Generator().manual_seed(7)
            return {split: source.collect(sampler, [k for k in keys for _ in range(cfg.eval_per_task)], gen, False)
                    for split, keys in measured.items()}

        before = measure()
        echo(f"agent: {model.num_parameters():,} parameters, {len(tokenizer)} tokens, chat template "
             f"{'yes' if layout.chat else 'no'} ({time.perf_counter() - started:.1f} s)")
        reference = HFPolicy(copy.deepcopy(model).requires_grad_(False), pad_id=pad) if cfg.beta > 0 else None
        # explore and novelty came after checkpoints that ran without them: recorded only when on, so such a
        # checkpoint resumes with both off and refuses either on
        exploring = {name: value for name, value in (("explore", cfg.explore), ("novelty", cfg.novelty)) if value}
        run = train_episodes(HFPolicy(wrap(model, device), pad_id=pad), source, reinforce_settings(cfg),
                             RunSettings(out=out, resume=resume, stop_at=stop_at, progress=progress),
                             reference=reference, resume_check={
                                 "model": cfg.model, "default_size": cfg.default_size, "env": cfg.env,
                                 "format_penalty": cfg.format_penalty, "calls": cfg.calls, **exploring,
                                 "max_call_tokens": cfg.max_call_tokens, "max_obs_tokens": cfg.max_obs_tokens})
        after = measure()
        if world()[0] == 0:
            model.save_pretrained(Path(out) / "policy")
            tokenizer.save_pretrained(Path(out) / "policy")
    return {"config": cfg, "before": before, "after": after, "run": run, "seconds": time.perf_counter() - started}


__all__ = ["DEFAULT_AGENT", "QUICK", "SHIPPED", "USER_HELDOUT_SEEDS", "USER_TRAIN_SEEDS", "WARM_START", "AgentConfig",
           "agent_dir", "agent_recipe", "build_default_agent", "build_tool_agent", "bugfix_texts", "clone_gpt2",
           "default_agent_dir", "demonstrations", "ensure_agent", "ensure_default_agent", "episode_source", "has_hooks",
           "load_agent", "reinforce_settings", "save_agent", "scripted_transcript", "shipped_agent", "task_keys",
           "text_collector", "train_agent", "transcripts_batch", "warm_start"]
