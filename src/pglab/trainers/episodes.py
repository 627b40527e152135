"""REINFORCE for token agents on collected episodes: TinyAgent's and the HF agents' step in the one loop.

One step samples a batch of episodes of the current policy from random training keys (tasks, or
a user environment's seeds) and takes one ``pg_update`` (agents-ch6 §6.7): the episode's reward
minus a running (EMA) baseline by default, or leave-one-out / GRPO over groups of K episodes per
key, with the chosen aggregation. Every draw of a step comes from its own (seed, step, stream)
generator, so a resumed run reproduces the uninterrupted one bit for bit on CPU. Reward shaping
is the trainer's: :func:`format_costs` charges BugFixEnv's malformed calls, which the environment
only reports.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pglab.batch import TokenBatch
from pglab.envs.tooluse import prompt_tools, tools_with_arguments, well_formed
from pglab.estimators import EMABaseline
from pglab.estimators.advantages import uses_groups
from pglab.models.policy import TokenPolicy
from pglab.runtime.distributed import world
from pglab.runtime.options import SettingsError
from pglab.runtime.threads import single_torch_thread
from pglab.sampling.call_grammar import PUNCTUATION, context_words
from pglab.sampling.episodes import episode_stats
from pglab.sampling.scoring import CHUNK_TOKENS, sequence_log_probs
from pglab.trainers.loop import (
    EVAL,
    TASKS,
    LoopRun,
    RunSettings,
    Schedule,
    Trainer,
    eval_steps,
    run_loop,
    step_generator,
)
from pglab.trainers.records import SampleRecorder, TokenText
from pglab.trainers.staleness import StaleSampler
from pglab.trainers.update import DIAGNOSTICS, UpdateSpec, clipped_ratio, pg_update
from pglab.trainers.warnings import monitored

LOG = "train.jsonl"
"""The JSON-lines file of the steps' rows in the run folder."""
FORMAT_PENALTY = 0.5
"""The default cost of one malformed call in training (agents-ch6 §6.5's format penalty), chosen by the
format-penalty sweep (``docs/results/format_penalty.md``)."""

Collect = Callable[[TokenPolicy, list, torch.Generator, bool], TokenBatch]
"""(policy, one key per episode, generator, training) -> the episodes, in the keys' order (TRL's rollout
function); ``training`` is False for the held-out evaluation (no shaping costs there)."""


@dataclass(frozen=True)
class ReinforceSettings:
    """REINFORCE on episodes: the run's length, the batch, the optimiser, the advantage, the loss, the evaluation."""

    steps: int = 80
    """Training steps."""
    batch_size: int = 64
    """Episodes per step, all processes together."""
    lr: float = 2e-3
    """Adam's learning rate."""
    max_grad_norm: float = 1.0
    """Clip the gradient's global norm to this."""
    advantage: str = "reinforce"
    """reinforce (reward minus the EMA baseline), or rloo, grpo, dr_grpo over groups of episodes of one key."""
    group_size: int = 8
    """Episodes per key in a group (a group advantage only; reinforce draws one episode per key)."""
    baseline_init: float = 0.0
    """The EMA baseline's first value."""
    ema_decay: float = 0.9
    """The EMA baseline's decay per step."""
    mode: str = "token_mean"
    """How per-token losses become one number (see :func:`pglab.estimators.aggregate_loss`)."""
    norm_const: float | None = None
    """mode constant: the divisor."""
    beta: float = 0.0
    """Price of the KL to the reference policy (0: none)."""
    kl_in: str = "reward"
    """Where the KL goes: k1 per token in the reward, or k3 in the loss."""
    loss: str = "reinforce"
    """The surrogate (UpdateSpec.loss): reinforce | ppo | gspo | gspo-token | gmpo | cispo | sapo | dppo."""
    epsilon: float | None = None
    """The loss's lower clip range (None: the loss's default, UpdateSpec.clip_range)."""
    epsilon_high: float | None = None
    """The loss's upper clip range (None: the loss's default, else epsilon)."""
    dual_clip: float | None = None
    """ppo only: the dual clip's cap c > 1 (None: none)."""
    is_correction: str = "none"
    """The mismatch correction (UpdateSpec.is_correction); a no-op unless the sampler is not the policy (staleness
    > 0, or a collector that explores and says so in the batch's rollout_logp)."""
    is_cap: float = 2.0
    """The correction's bound C >= 1: TIS's cap, the masks' [1 / C, C]."""
    num_iterations: int = 1
    """Optimiser steps per collected batch, each against the policy before the first (reinforce: PPO's clip)."""
    staleness: int = 0
    """Collect each step's episodes with the parameters of this many steps earlier (0: the current ones)."""
    eval_every: int = 10
    """Steps between held-out evaluations (one also runs before the first step and after the last)."""
    eval_per_task: int = 8
    """Episodes per held-out key in each evaluation."""
    seed: int = 0
    """RNG seed of every draw."""

    @property
    def group(self) -> int:
        """Rows per group: group_size for a group advantage, 1 for reinforce."""
        return self.group_size if uses_groups(self.advantage) else 1

    def resume_settings(self) -> dict[str, Any]:
        """The settings a resumed run must share with its checkpoint."""
        return {"steps": self.steps, "batch_size": self.batch_size, "lr": self.lr, "advantage": self.advantage,
                "group_size": self.group, "mode": self.mode, "seed": self.seed, "ema_decay": self.ema_decay,
                "baseline_init": self.baseline_init, "beta": self.beta, "kl_in": self.kl_in, "loss": self.loss,
                "epsilon": self.epsilon, "epsilon_high": self.epsilon_high, "dual_clip": self.dual_clip,
                "is_correction": self.is_correction, "is_cap": self.is_cap, "num_iterations": self.num_iterations,
                "staleness": self.staleness}

    def update_spec(self, processes: int) -> UpdateSpec:
        """The update of every step: this advantage, loss and correction over groups of ``group`` episodes."""
        return UpdateSpec(self.advantage, self.group, beta=self.beta, kl_in=self.kl_in, mode=self.mode,
                          norm_const=self.norm_const, loss=self.loss,
                          ratio=clipped_ratio(self.loss, self.num_iterations), epsilon=self.epsilon,
                          epsilon_high=self.epsilon_high, dual_clip=self.dual_clip, is_correction=self.is_correction,
                          is_cap=self.is_cap, max_grad_norm=self.max_grad_norm,
                          chunk_tokens=CHUNK_TOKENS if processes == 1 else 0)


@dataclass(frozen=True)
class EpisodeSource:
    """Where a trainer's episodes come from, and what it logs of them."""

    collect: Collect
    """Plays the episodes of a list of keys (see :data:`Collect`)."""
    train_keys: Sequence[Any]
    """The keys a training step draws from (uniformly, with replacement)."""
    heldout_keys: Sequence[Any]
    """The keys of every held-out evaluation."""
    stats: Callable[[TokenBatch], dict[str, float]] = episode_stats
    """A batch -> the numbers logged of it."""
    headline: str = "pass_rate"
    """The number of ``stats`` the progress bar and each row show for the held-out episodes."""
    token_text: TokenText | None = None
    """Token ids -> each token's text, for the recorded samples (None: they keep the ids only)."""


def draw_keys(keys: Sequence[Any], batch_size: int, group_size: int, generator: torch.Generator) -> list[Any]:
    """batch_size // group_size keys drawn uniformly with replacement, each repeated group_size times."""
    index = torch.randint(len(keys), (batch_size // group_size,), generator=generator).tolist()
    return [keys[i] for i in index for _ in range(group_size)]


def malformed_calls(log: Any) -> list[bool]:
    """Which calls of a collected episode (its EpisodeLog) are malformed: as BugFixEnv's record says, or in another
    environment each call that is not ``<call> TOOL ... </call>`` with TOOL a tool the prompt names in that syntax,
    with an argument where the prompt shows one (:func:`~pglab.envs.tooluse.well_formed`); a final reply ended by
    end-of-text without ``<call>`` is no call, and a prompt that names no tool judges none."""
    if log.record is not None:
        return list(log.record.invalid)
    tools, with_arguments = prompt_tools(log.prompt), tools_with_arguments(log.prompt)
    return [bool(tools) and not well_formed(call, tools, with_arguments)
            and not (stop == "eos" and "<call>" not in call) for call, stop in zip(log.calls, log.stops)]


def format_costs(batch: TokenBatch, cost: float) -> TokenBatch:
    """``batch`` with -``cost`` on the last token of every malformed call (:func:`malformed_calls`), in
    ``token_rewards`` [B, T] (reward-to-go past the baseline, not the episode's score); unchanged when no
    call costs anything. The trainer's reward shaping (agents-ch6 §6.5): the environment only reports
    which calls were malformed, or the prompt names the tools."""
    if not cost:
        return batch
    placed = torch.zeros_like(batch.action_mask)
    for b, log in enumerate(batch.info):
        for end, malformed in zip(log.call_ends, malformed_calls(log)):
            if malformed:
                placed[b, end] -= cost
    return dataclasses.replace(batch, token_rewards=placed) if bool(placed.any()) else batch


def answer_shape(call: str, observation: str) -> str:
    """``observation`` with the words of ``call`` (its tool and arguments) blanked: what the answer says beyond
    echoing the call, so that "unknown town: york" and "unknown town: leeds" are the same answer."""
    echoed = context_words(call)
    return " ".join("_" if word.strip(PUNCTUATION) in echoed else word for word in observation.split())


def novelty_bonus(batch: TokenBatch, bonus: float) -> TokenBatch:
    """``batch`` with a count-based exploration bonus in ``token_rewards`` [B, T], on the last token of every call
    whose answer the agent read (each call but an episode's last): ``bonus * (1 - u)`` when no other such call of the
    batch got the same answer, the call's own words aside (:func:`answer_shape`), and ``-bonus * u`` when another
    did, u the share of read answers that are unique.

    An answer no other episode got (a found town's forecast among many "no such town") is new information: the
    bonus raises the call that got it before any episode is rewarded for what follows. It sums to 0 over the batch's
    reads, so reading more cannot earn more: a read pays only for being rarer than the batch's reads are on
    average, and the bonus fades as every read becomes new (u -> 1), where a bonus for new answers alone would keep
    paying an agent that reads a different task's facts every turn and never answers. An episode that reads nothing
    gets 0, so at a large ``bonus`` dull reads cost more than ending at once. Added to the batch's token_rewards (the
    format cost's); unchanged at ``bonus`` 0 or with nothing read."""
    if not bonus:
        return batch
    read = [(b, end, answer_shape(call, obs)) for b, log in enumerate(batch.info)
            for end, call, obs in list(zip(log.call_ends, log.calls, log.observations))[:len(log.calls) - 1]]
    if not read:
        return batch
    counts: dict[str, int] = {}
    for _, _, shape in read:
        counts[shape] = counts.get(shape, 0) + 1
    unique = sum(counts[shape] == 1 for _, _, shape in read) / len(read)
    placed = torch.zeros_like(batch.action_mask) if batch.token_rewards is None else batch.token_rewards.clone()
    for b, end, shape in read:
        placed[b, end] += bonus * ((counts[shape] == 1) - unique)
    return dataclasses.replace(batch, token_rewards=placed)


def check_format_penalty(cost: float) -> None:
    """Raise ValueError unless ``cost`` (of one malformed call) is a finite number >= 0."""
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not 0 <= cost < math.inf:
        raise ValueError(f"format_penalty is the cost of one malformed call, a finite number >= 0; got {cost!r}")


def sampled(batch: TokenBatch, stale: bool) -> TokenBatch:
    """The collected ``batch`` with the collector's log-probs as the sampler's (rollout_logp) when the sampler is
    stale, else with the collector's own rollout_logp (set by one that explores; None on-policy); logp_old is
    dropped: the loss's pi_old is the trained policy's own log-probs before the update."""
    return dataclasses.replace(batch, logp_old=None, rollout_logp=batch.logp_old if stale else batch.rollout_logp)


class EpisodeReinforce:
    """One agent's training state (policy, Adam, EMA baseline) with the step and evaluation it gives the loop."""

    def __init__(self, policy: TokenPolicy, source: EpisodeSource, settings: ReinforceSettings,
                 reference: TokenPolicy | None = None, recorder: SampleRecorder | None = None):
        rank, size = world()
        group = settings.group
        if group < 1 or settings.batch_size % (group * size):
            raise SettingsError(f"--episodes-per-step (batch_size) {settings.batch_size} must be a multiple of "
                                f"--group-size (group_size) {group} x {size} processes; pass a multiple of "
                                f"{max(group, 1) * size}")
        if settings.beta > 0 and reference is None:
            raise ValueError("beta > 0 needs the reference policy; pass reference=")
        if settings.num_iterations < 1 or settings.staleness < 0 or (settings.staleness and size > 1):
            raise ValueError(f"pass num_iterations >= 1 and staleness >= 0 (0 under torchrun: the stale sampler runs "
                             f"in one process), got {settings.num_iterations} and {settings.staleness}")
        self.policy, self.source, self.settings, self.reference = policy, source, settings, reference
        self.rank, self.local = rank, settings.batch_size // size
        self.spec = settings.update_spec(size)
        self.stale = StaleSampler(policy, settings.staleness) if settings.staleness else None
        self.optimizer = torch.optim.Adam(policy.module.parameters(), lr=settings.lr)
        self.baseline = EMABaseline(settings.baseline_init, settings.ema_decay)
        self.device = next(policy.module.parameters()).device
        self.recorder = recorder or SampleRecorder(None, settings.steps)

    def step(self, step: int, run: LoopRun) -> dict[str, Any]:
        """Collect this process's share of the step's episodes (from the stale sampler with staleness), take
        num_iterations pg_updates -> the step's row (the last update's loss and diagnostics)."""
        s, source = self.settings, self.source
        keys = draw_keys(source.train_keys, s.batch_size, self.spec.group_size, step_generator(s.seed, step, TASKS))
        mine = keys[self.rank * self.local:(self.rank + 1) * self.local]
        sampler = self.stale.advance(self.policy.module) if self.stale else self.policy
        collected = source.collect(sampler, mine, step_generator(s.seed, step, 1 + self.rank), True)
        batch = sampled(collected, self.stale is not None).to(self.device)
        if s.beta > 0:
            with torch.no_grad():
                batch.ref_logp = sequence_log_probs(self.reference, batch) * batch.action_mask
        for _ in range(s.num_iterations - 1):
            pg_update(self.policy, self.optimizer, batch, self.spec, baseline=self.baseline.value)
        self.recorder.record(step, self.policy, batch, self.spec, baseline=self.baseline.value,
                             sampler_logp=collected.logp_old)
        update = pg_update(self.policy, self.optimizer, batch, self.spec, baseline=self.baseline.value)
        held = run.evals[-1][source.headline] if run.evals and run.evals[-1]["step"] == step else None
        row = {"step": step, **source.stats(batch), "baseline": self.baseline.value, "loss": update["loss"],
               "score_loss": update["score_loss"], "grad_norm": update["grad_norm"], "skipped": update["skipped"],
               f"heldout_{source.headline}": held, **monitored(update, batch, s.beta),
               **{k: update[k] for k in DIAGNOSTICS if k in update}}
        self.baseline.update(update["reward"])
        return row

    def evaluate(self, step: int) -> dict[str, Any]:
        """``eval_per_task`` episodes of every held-out key -> their stats at ``step``."""
        keys = [k for k in self.source.heldout_keys for _ in range(self.settings.eval_per_task)]
        batch = self.source.collect(self.policy, keys, step_generator(self.settings.seed, step, EVAL), False)
        return {"step": step, **self.source.stats(batch)}

    def state(self) -> dict[str, Any]:
        return {"model": self.policy.module.state_dict(), "optimizer": self.optimizer.state_dict(),
                "baseline": {"value": self.baseline.value, "count": self.baseline.count},
                **({"stale": self.stale.state()} if self.stale else {})}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.policy.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.baseline.value, self.baseline.count = state["baseline"]["value"], state["baseline"]["count"]
        if self.stale:
            self.stale.restore(state["stale"])

    def status(self, row: dict[str, Any], run: LoopRun) -> str:
        """The progress bar's line: the batch reward, the last held-out headline, the gradient norm."""
        headline = self.source.headline
        shown = f"{run.evals[-1][headline]:.2f}" if run.evals else "-"
        return f"reward {row['reward']:.2f} | held-out {headline} {shown} | grad norm {row['grad_norm']:.3f}"


def train_episodes(policy: TokenPolicy, source: EpisodeSource, settings: ReinforceSettings,
                   run: RunSettings | None = None, *, reference: TokenPolicy | None = None,
                   resume_check: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train ``policy`` in place on episodes from ``source`` in the one loop -> dict(history, evals, seconds,
    resumed_from).

    Each step draws ``batch_size // group`` training keys (each repeated ``group`` times), collects
    their episodes and takes one ``pg_update``; ``reference`` and ``beta`` add the KL penalty. The
    held-out episodes are measured before every ``eval_every``-th step and after the last. Under
    torchrun each rank collects whole groups of its share of the keys. ``run`` (default: no files)
    says where the run is kept; with ``run.out`` each step appends one JSON line to ``train.jsonl`` and the
    recorded steps a few episodes to ``samples.jsonl`` (:class:`pglab.trainers.records.SampleRecorder`).
    ``resume_check`` holds more values a resumed run must share (the model, the environment).
    """
    run = run or RunSettings()
    recorder = SampleRecorder(run.out if world()[0] == 0 else None, settings.steps, source.token_text)
    trainer = EpisodeReinforce(policy, source, settings, reference, recorder)
    schedule = Schedule(settings.steps, eval_steps(settings.steps, settings.eval_every), LOG, label="REINFORCE",
                        settings={**settings.resume_settings(), **(resume_check or {})})
    with single_torch_thread():
        done = run_loop(Trainer(trainer.step, trainer.evaluate, trainer.state, trainer.restore, trainer.status),
                        schedule, run, rank=trainer.rank)
    return {"history": done.history, "evals": done.evals, "seconds": done.seconds, "resumed_from": done.resumed_from}


__all__ = ["FORMAT_PENALTY", "LOG", "Collect", "EpisodeReinforce", "EpisodeSource", "ReinforceSettings",
           "check_format_penalty", "draw_keys", "format_costs", "malformed_calls", "novelty_bonus", "train_episodes",
           "answer_shape"]
