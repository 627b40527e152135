"""bench agent-vs-trl: pglab train-agent against TRL's GRPOTrainer with ``environment_factory``, on one environment.

The environment, :class:`VaultEnv`, is written once for TRL's ``environment_factory`` contract: ``reset(**kwargs)``
poses a task (open the door of one of eight rooms), its public methods ``lookup(room)`` and ``unlock(code)`` are the
tools and ``get_reward()`` the reward (1 when the door opened, 0.5 when only its code was looked up). An episode
takes three turns: a lookup, an unlock, and a reply without a call that ends it. pglab trains it through
train-agent's ``--env trl:`` adapter (:mod:`pglab.envs.adapters.trl`), TRL through
``GRPOTrainer(environment_factory=VaultEnv)``.

The agent is one tiny GPT-2 (2 layers x 64 wide, TinyAgent's shape) built in-process, offline: a byte-level BPE
trained on scripted transcripts, with ``<call>``, ``</call>``, ``<obs>`` and ``</obs>`` as tokens of their own, then
behaviour-cloned on scripted play (the right room or a random one, the code read or a random one) so that it writes
calls and about half its episodes succeed. Its chat template renders a conversation exactly as pglab's chat layout
writes the episode (the user turn lists the tools as the adapter does, a call is ``<call> unlock code=42 </call>``, an
observation ``<obs> ... </obs>``), and its ``response_template`` parses that call syntax for TRL, so both sides see
the same prompt, the same call text and the same observation ids. Both load it from one ``save_pretrained`` folder
through :func:`pglab.models.hf.load_causal_lm`.

Per step both sides play ``episodes`` episodes (groups of ``group`` per task), GRPO advantages, beta 0 (no
reference pass), a token-mean loss, one Adam step. TRL at its best settings on this CPU: all episodes in one
``generate`` batch per turn (its default: one generation batch per optimiser step), gradient checkpointing off (its
default is on, which recomputes the forward in the backward), ``</call>`` added to the generation's end tokens so a
turn stops where pglab's does, the same tanh-GELU module as pglab's, and one torch thread, as pglab's agent trainer
runs (a tiny model gains nothing from threads on shared cores; ``threads`` in the result). The steps alternate:
TRL's trainer runs, and after each of its steps (on_step_begin to on_step_end) a callback times one pglab step.
Throughput is episodes (and sampled policy tokens) per second of step; the claim is the median over rounds of the
paired ratio pglab / TRL of episodes per second, after warm-up rounds.

Where the time goes, from timers around each side's own entry points (wrappers that call the original, so no
number changes): the rollout (pglab: the episode source's ``collect``; TRL: ``_generate``, turns and tool loop),
of which the environment (every call of the environment instances' methods, the tools, reset and the reward);
TRL's rewards and advantages (``_generate_and_score_completions`` past ``_generate``); the scoring forward of the
loss (pglab: ``HFPolicy.logits``; TRL: ``_get_per_token_logps_and_entropies``); and the rest of the step, the
backward and the optimiser.

TRL is installed only for benchmarks (``pip install 'pglab[bench]'``); without it the benchmark records a failed
claim instead of a ratio.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pglab.reporting.result import Result

ROOMS = ("apple", "pear", "plum", "fig", "lime", "kiwi", "date", "peach")
"""The rooms of VaultEnv: one is the task, each has a code."""
ENV = "trl:pglab.bench.agent_vs_trl:VaultEnv"
"""The ``--env`` of the pglab side."""
TAGS = ("<call>", "</call>", "<obs>", "</obs>")
"""Tokens of their own in the agent's vocabulary (``</call>`` ends TRL's generation of a turn)."""
LEARNING_RATE = 2e-4
"""Both sides' Adam step: small enough that the policy stays near the cloned one over the race, so both sides keep
playing three-turn episodes (at 1e-3 it drifted to long rambling turns within a few steps)."""
MAX_COMPLETION_TOKENS = 256
"""TRL's budget of one turn and of one episode's completion (calls and observations): a three-turn episode takes
about 30, and train-agent's caps are 24 tokens a call and 16 calls (TRL's: max_tool_calling_iterations 15)."""

CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}{{ m.content }}"
    "{%- if tools -%}{{ '\\nTools, one call per turn:' }}"
    "{%- for t in tools -%}{{ '\\n<call> ' + t.function.name }}"
    "{%- for p in t.function.parameters.properties %} {{ p }}{% endfor %} </call>: {{ t.function.description }}"
    "{%- endfor -%}{{ '\\nA reply without a call ends the episode.' }}{%- endif -%}{{ '\\n' }}"
    "{%- elif m.role == 'assistant' -%}{{ m.content }}"
    "{%- for c in m.tool_calls or [] -%}{{ '<call> ' + c.function.name }}"
    "{%- for k, v in c.function.arguments.items() %} {{ k }}={{ v }}{% endfor %} </call>{%- endfor -%}"
    "{%- elif m.role == 'tool' -%}{{ '\\n<obs> ' + m.content + ' </obs>\\n' }}"
    "{%- endif -%}{%- endfor -%}")
"""The agent's chat template: the text pglab's chat layout and TRL's tool loop both build (no end-of-turn token)."""

RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"}, "start_anchor_pattern": r"\n",
    "fields": {
        "tool_calls": {"open_pattern": r"<call>\s*(?P<name>\w+)", "close_pattern": r"\s*</call>\s*", "repeats": True,
                       "content": "xml-inline", "content_args": {"tag_pattern": r"(?P<key>\w+)=(?P<value>\S+)",
                                                                 "value_parser": {"name": "text"}},
                       "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
        "content": {"close_pattern": r"<\|endoftext\|>\s*|$", "content": "text"}}}
"""How TRL parses a turn of the agent into tool calls (transformers' ``response_template``)."""


class VaultEnv:
    """Open the door of a room: look its code up, then unlock with it (TRL's environment_factory contract)."""

    def reset(self, seed: int = 0, **kwargs: Any) -> str:
        """Task ``seed``: the room and every room's code (TRL passes the dataset row, whose ``seed`` column)."""
        rng = random.Random(seed)
        self.room, self.codes = rng.choice(ROOMS), {r: rng.randrange(10, 100) for r in ROOMS}
        self.found = self.opened = False
        return f"Open the {self.room} door. Look up its code first."

    def lookup(self, room: str) -> str:
        """Look up the code of a room's door.

        Args:
            room: The room's name.
        """
        self.found = self.found or room == self.room
        return f"the {room} code is {self.codes[room]}" if room in self.codes else f"no room named {room}"

    def unlock(self, code: int) -> str:
        """Unlock the door with a code.

        Args:
            code: The door's code.
        """
        self.opened = self.opened or code == self.codes[self.room]
        return "the door opens" if code == self.codes[self.room] else "wrong code"

    def get_reward(self) -> float:
        """1 when the door opened, 0.5 when only the room's code was looked up, else 0."""
        return 1.0 if self.opened else 0.5 if self.found else 0.0


@dataclass(frozen=True)
class Settings:
    """The race's sizes (the same on both sides)."""

    episodes: int = 32
    """Episodes per step (TRL's per_device_train_batch_size; train-agent's --episodes-per-step)."""
    group: int = 4
    """Episodes per task (TRL's num_generations; train-agent's --group-size)."""
    rounds: int = 40
    """Alternating rounds (one step of each side) timed after the warm-up."""
    warmup: int = 2
    """Rounds run first and dropped from the medians."""
    seed: int = 0
    """Seed of the agent's build and of both trainers."""
    clone_episodes: int = 512
    """Scripted episodes the agent is behaviour-cloned on."""
    clone_steps: int = 400
    """Behaviour-cloning steps (400: a fifth of the episodes open the door, a third look the right room up)."""


QUICK = Settings(episodes=4, group=2, rounds=1, warmup=1, clone_episodes=32, clone_steps=5)
"""A smoke run in seconds (what the test runs)."""


def scripted_play(seed: int, rng: random.Random) -> tuple[str, list[str], list[str]]:
    """One scripted episode of task ``seed`` through the adapter -> (prompt, calls, observations); the room is the
    task's with probability 0.7 (else a random one), the code the one read with probability 0.7."""
    from pglab.envs.adapters.trl import TRLEnv

    env = TRLEnv(VaultEnv(), "bench agent-vs-trl")
    prompt = env.reset(seed)
    room = env.env.room if rng.random() < 0.7 else rng.choice(ROOMS)
    calls = [f"<call> lookup room={room} </call>"]
    seen = env.step(calls[0])[0]
    code = seen.split()[-1] if rng.random() < 0.7 and seen.split()[-1].isdigit() else str(rng.randrange(10, 100))
    calls.append(f"<call> unlock code={code} </call>")
    return prompt, calls, [seen, env.step(calls[1])[0]]


def build_agent(folder: Path, seed: int, episodes: int, steps: int) -> dict[str, float]:
    """The tokenizer and the behaviour-cloned GPT-2 of the race, saved into ``folder`` -> stats of the build."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    from pglab.models.default_lm import train_tokenizer
    from pglab.runtime.threads import single_torch_thread
    from pglab.sampling.episodes import collate
    from pglab.sampling.text_episodes import TextLayout, encode_text_episode
    from pglab.trainers.cloning import behaviour_cloning

    rng = random.Random(seed)
    played = [scripted_play(10**6 + i, rng) for i in range(episodes)]
    texts = [p + "\n" + "\n".join(c + f"\n<obs> {o} </obs>" for c, o in zip(calls, obs)) for p, calls, obs in played]
    tokenizer = train_tokenizer(texts, 400, whole_words=True)
    tokenizer.add_tokens(list(TAGS))
    tokenizer.chat_template = CHAT_TEMPLATE
    layout = TextLayout(tokenizer, chat=True)
    eos = tokenizer.eos_token
    data = collate([encode_text_episode(layout, p, [*calls, eos], [*obs, ""]) for p, calls, obs in played],
                   [0.0] * episodes, tokenizer.eos_token_id)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=1024, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=tokenizer.eos_token_id,
                        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    with torch.random.fork_rng(devices=[]), single_torch_thread():
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
        losses = behaviour_cloning(model, data, steps, 32, 3e-3, torch.Generator().manual_seed(seed))
    hf_logging.disable_progress_bar()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return {"parameters": model.num_parameters(), "vocabulary": len(tokenizer), "cloning_loss": losses[-1],
            "longest_episode_tokens": int(data.attention_mask.sum(-1).max())}


class Clock:
    """Seconds and counts accumulated by label, from wrappers that call the original function unchanged."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: dict[str, float] = defaultdict(float)

    def wrap(self, function: Callable[..., Any], label: str,
             count: Callable[[Any], dict[str, float]] | None = None) -> Callable[..., Any]:
        """``function`` timed into ``label``; ``count(result)`` adds to the counts."""

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            result = function(*args, **kwargs)
            self.seconds[label] += time.perf_counter() - start
            for key, value in (count(result) if count else {}).items():
                self.counts[key] += value
            return result

        return timed

    def instrument(self, env: Any) -> Any:
        """``env`` with every public method (tools, reset, get_reward) timed into ``environment``."""
        for name in [n for n in dir(type(env)) if not n.startswith("_") and callable(getattr(type(env), n))]:
            setattr(env, name, self.wrap(getattr(env, name), "environment"))
        return env

    def take(self) -> tuple[dict[str, float], dict[str, float]]:
        """(seconds, counts) since the last take, and start again."""
        taken = dict(self.seconds), dict(self.counts)
        self.seconds.clear()
        self.counts.clear()
        return taken


def pglab_counts(batch: Any) -> dict[str, float]:
    """Episodes, sampled policy tokens, turns and summed reward of a collected TokenBatch."""
    return {"episodes": batch.batch_size, "tokens": float(batch.action_mask.sum()),
            "reward": float(batch.rewards.sum()), "turns": float(sum(len(log.calls) for log in batch.info))}


def trl_counts(generated: tuple) -> dict[str, float]:
    """Episodes, sampled tokens (tool_mask 1) and turns (assistant messages) of TRL's ``_generate`` output."""
    _, completion_ids, tool_mask, completions = generated[:4]
    return {"episodes": len(completion_ids), "tokens": float(sum(map(sum, tool_mask))),
            "turns": float(sum(m["role"] == "assistant" for c in completions for m in c))}


def pglab_trainer(folder: Path, settings: Settings, clock: Clock):
    """train-agent's step on ``--env trl:...VaultEnv`` with the race's sizes, its rollout and scoring timed."""
    from pglab.envs.adapters.trl import trl_factory
    from pglab.envs.text import load_callable
    from pglab.models.policy import HFPolicy
    from pglab.sampling.text_episodes import TextLayout
    from pglab.trainers.agent_config import AgentConfig
    from pglab.trainers.episodes import EpisodeReinforce
    from pglab.trainers.hf_agent import episode_source, load_agent, reinforce_settings

    steps = settings.rounds + settings.warmup
    cfg = AgentConfig(model=str(folder), env=ENV, advantage="grpo", group_size=settings.group,
                      episodes_per_step=settings.episodes, learning_rate=LEARNING_RATE, steps=steps, eval_every=steps,
                      seed=settings.seed, calls="free")   # TRL samples any text: the race compares the same sampling
    def load(spec: str, where: str) -> Callable[[], Any]:
        factory = load_callable(spec, where)
        return lambda: clock.instrument(factory())

    make_env = trl_factory(ENV.partition(":")[2], load)
    model, tokenizer = load_agent(cfg, progress=False)
    layout = TextLayout(tokenizer, max_obs_tokens=cfg.max_obs_tokens, max_call_tokens=cfg.max_call_tokens)
    source = episode_source(cfg, layout, make_env)
    source = dataclasses.replace(source, collect=clock.wrap(source.collect, "rollout", pglab_counts))
    policy = HFPolicy(model, pad_id=layout.pad_id)
    policy.logits = clock.wrap(policy.logits, "scoring forward")
    return EpisodeReinforce(policy, source, reinforce_settings(cfg))


def trl_trainer(folder: Path, settings: Settings, clock: Clock, callback: Any):
    """GRPOTrainer with environment_factory=VaultEnv at the race's sizes and its best CPU settings, timed."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from pglab.models.hf import load_causal_lm

    model, tokenizer = load_causal_lm(str(folder))
    tokenizer.response_template = RESPONSE_TEMPLATE
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("</call>")]
    steps = settings.rounds + settings.warmup
    tasks = settings.episodes // settings.group * steps
    args = GRPOConfig(output_dir=str(folder.parent / "trl"), per_device_train_batch_size=settings.episodes,
                      num_generations=settings.group, max_completion_length=MAX_COMPLETION_TOKENS,
                      max_tool_calling_iterations=15, beta=0.0, learning_rate=LEARNING_RATE, loss_type="bnpo",
                      scale_rewards="group", temperature=1.0, top_k=0, top_p=1.0, max_steps=steps, use_cpu=True,
                      bf16=False, report_to="none", save_strategy="no", logging_steps=10**6, disable_dropout=True,
                      seed=settings.seed, dataloader_num_workers=0, gradient_checkpointing=False)
    rows = {"prompt": [[{"role": "user", "content": ""}]] * tasks, "seed": list(range(tasks))}
    trainer = GRPOTrainer(model=model, args=args, train_dataset=Dataset.from_dict(rows), processing_class=tokenizer,
                          environment_factory=lambda: clock.instrument(VaultEnv()), callbacks=[callback])
    trainer._generate = clock.wrap(trainer._generate, "rollout", trl_counts)
    trainer._generate_and_score_completions = clock.wrap(trainer._generate_and_score_completions, "rollout+scores")
    trainer._calculate_rewards = clock.wrap(trainer._calculate_rewards, "rewards",
                                            lambda rewards: {"reward": float(rewards.nansum())})
    trainer._get_per_token_logps_and_entropies = clock.wrap(trainer._get_per_token_logps_and_entropies,
                                                            "scoring forward")
    return trainer


def paired_rounds(folder: Path, settings: Settings) -> list[dict[str, dict]]:
    """Alternating steps, TRL's then pglab's -> per round and side: step seconds, the clock's seconds and counts."""
    from transformers import TrainerCallback

    from pglab.runtime.progress import Counter
    from pglab.runtime.threads import single_torch_thread
    from pglab.trainers.loop import LoopRun

    clocks = {"pglab": Clock(), "TRL": Clock()}
    ours = pglab_trainer(folder, settings, clocks["pglab"])
    rounds: list[dict[str, dict]] = []
    bar = Counter("agent-vs-trl rounds", total=settings.rounds + settings.warmup)

    class Alternate(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clocks["TRL"].take()
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            theirs = time.perf_counter() - self.start
            done = {"TRL": (theirs, *clocks["TRL"].take())}
            clocks["pglab"].take()
            start = time.perf_counter()
            ours.step(len(rounds), LoopRun())
            done["pglab"] = (time.perf_counter() - start, *clocks["pglab"].take())
            rounds.append({side: {"step": s, "seconds": sec, "counts": n} for side, (s, sec, n) in done.items()})
            bar.advance()

    trainer = trl_trainer(folder, settings, clocks["TRL"], Alternate())
    with bar, single_torch_thread():
        trainer.train()
    return rounds


PHASES = ("generation", "environment", "rewards and advantages", "scoring forward", "backward, optimiser, rest")
"""Where a step's time goes (the module docstring says how each is measured)."""


def phases(side: dict) -> dict[str, float]:
    """One side's round -> seconds of each of PHASES (they add up to the step)."""
    sec = side["seconds"]
    rollout, env = sec.get("rollout", 0.0), sec.get("environment", 0.0)
    scored = max(sec.get("rollout+scores", 0.0), rollout)
    forward = sec.get("scoring forward", 0.0)
    return dict(zip(PHASES, (rollout - env, env, scored - rollout, forward, side["step"] - scored - forward)))


def side_rows(rounds: list[dict[str, dict]]) -> tuple[list[dict], list[dict]]:
    """(throughput rows, breakdown rows), one per side and per side and phase: medians over the rounds."""
    throughput, breakdown = [], []
    for name in ("pglab", "TRL"):
        sides = [r[name] for r in rounds]
        step = statistics.median(s["step"] for s in sides)
        throughput.append({
            "side": name, "median_step_s": step,
            "episodes_per_s": statistics.median(s["counts"]["episodes"] / s["step"] for s in sides),
            "tokens_per_s": statistics.median(s["counts"]["tokens"] / s["step"] for s in sides),
            "episodes": sum(s["counts"]["episodes"] for s in sides),
            "turns_per_episode": sum(s["counts"]["turns"] for s in sides) / sum(s["counts"]["episodes"] for s in sides),
            "tokens_per_episode": sum(s["counts"]["tokens"] for s in sides) / sum(s["counts"]["episodes"] for s in
                                                                                  sides)})
        split = [phases(s) for s in sides]
        breakdown += [{"side": name, "phase": p, "median_s": statistics.median(x[p] for x in split),
                       "share_of_step": statistics.median(x[p] / s["step"] for x, s in zip(split, sides))}
                      for p in PHASES]
    return throughput, breakdown


def run(quick: bool = False) -> Result:
    """The paired race at the full or quick sizes -> throughput, the ratio pglab / TRL, where the time goes."""
    from pglab.bench.lm_vs_trl import quartiles, trl_missing

    settings = QUICK if quick else Settings()
    result = Result("bench-agent-vs-trl", {**dataclasses.asdict(settings), "env": ENV, "threads": 1,
                                           "learning_rate": LEARNING_RATE}, quick=quick,
                    summary=("pglab train-agent (through --env trl:) against TRL's GRPOTrainer with "
                             "environment_factory on one three-turn tool-use environment, the same tiny agent, "
                             "alternating step by step on the CPU; episodes and sampled tokens per second."))
    if trl_missing(result):
        return result
    import trl
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "agent"
        result.tables["agent"] = [build_agent(folder, settings.seed, settings.clone_episodes, settings.clone_steps)]
        measured = paired_rounds(folder, settings)
    timed = measured[settings.warmup:]
    ratios = [(r["pglab"]["counts"]["episodes"] / r["pglab"]["step"]) / (r["TRL"]["counts"]["episodes"] /
                                                                         r["TRL"]["step"]) for r in timed]
    token_ratios = [(r["pglab"]["counts"]["tokens"] / r["pglab"]["step"]) / (r["TRL"]["counts"]["tokens"] /
                                                                           r["TRL"]["step"]) for r in timed]
    result.tables["throughput"], result.tables["breakdown"] = side_rows(timed)
    result.tables["rounds"] = [{"round": i, **{f"{side} {key}": value for side in ("pglab", "TRL")
                                               for key, value in (("step_s", r[side]["step"]),
                                                                  *r[side]["counts"].items())}}
                               for i, r in enumerate(measured)]
    for row in result.tables["throughput"]:
        for key in ("episodes_per_s", "tokens_per_s", "turns_per_episode", "tokens_per_episode"):
            result.metrics[f"{row['side']} {key}"] = row[key]
    q1, ratio, q3 = quartiles(ratios)
    result.metrics.update({"ratio q1": q1, "ratio q3": q3, "ratio = pglab/TRL tokens/s": statistics.median(
        token_ratios), "ratio = pglab/TRL episodes/s": ratio})
    result.summary += f" TRL {trl.__version__}."
    result.check_range("ratio = pglab / TRL episodes per second (median of paired rounds)", ratio, low=1.5,
                       tolerance=f"IQR {q1:.3f}-{q3:.3f} over {len(ratios)} alternating rounds", full_size=True)
    return result
