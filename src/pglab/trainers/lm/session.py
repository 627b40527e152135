"""One ``train_lm`` run's state and its step: sample, reward, reference pass, ``num_iterations`` updates.

``Session(cfg, device, rewards)`` loads the model (LoRA, reference), the prompts, the optimiser
and the schedule; ``session.step(i)`` takes training step i and returns its metrics. Every random
draw of step i comes from ``step_generator(seed, i, ...)``, so a resumed session repeats an
uninterrupted one. The benchmark drives ``step`` directly, one step at a time.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from pglab.batch import TokenBatch
from pglab.estimators import EMABaseline
from pglab.models.hf import load_causal_lm
from pglab.models.policy import HFPolicy
from pglab.runtime.distributed import world, wrap
from pglab.runtime.options import SettingsError
from pglab.sampling.replies import reply_batch, sample_replies
from pglab.sampling.scoring import sequence_log_probs
from pglab.trainers.lm.config import RLConfig
from pglab.trainers.lm.data import PromptSet, load_prompts
from pglab.trainers.lm.model import Models, adam, schedule
from pglab.trainers.lm.rewards import Completions, Rewards
from pglab.trainers.loop import TASKS, step_generator
from pglab.trainers.records import SampleRecorder, text_of
from pglab.trainers.staleness import StaleSampler
from pglab.trainers.update import UpdateSpec, clipped_ratio, pg_update
from pglab.trainers.warnings import repeat_share


def banned_ids(cfg: RLConfig, tokenizer) -> torch.Tensor:
    """The banned token ids (end-of-text when ban_eos, then banned_tokens) as a long tensor."""
    ids = list(cfg.banned_tokens)
    if cfg.ban_eos and tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    return torch.tensor(sorted(set(ids)), dtype=torch.long)


def update_spec(cfg: RLConfig) -> UpdateSpec:
    """The update train-lm takes every step: rows of num_generations replies per prompt, constant over
    prompts_per_step x num_generations x max_completion_length, the loss and correction of cfg (reinforce: the
    clipped ratio when num_iterations > 1)."""
    return UpdateSpec(cfg.advantage, cfg.num_generations, scale=cfg.scale_rewards, **cfg.std_options, beta=cfg.beta,
                      kl_in=cfg.kl_in, mode=cfg.loss_mode,
                      norm_const=cfg.prompts_per_step * cfg.num_generations * cfg.max_completion_length,
                      loss=cfg.loss, ratio=clipped_ratio(cfg.loss, cfg.num_iterations), epsilon=cfg.epsilon,
                      epsilon_high=cfg.epsilon_high, dual_clip=cfg.dual_clip, is_correction=cfg.is_correction,
                      is_cap=cfg.is_cap,
                      max_grad_norm=cfg.max_grad_norm, micro_batches=cfg.gradient_accumulation_steps, chunk_tokens=0)


class Session:
    """The model, reference, prompts, optimiser, schedule and baseline of one run; ``step`` trains one step."""

    def __init__(self, cfg: RLConfig, device: torch.device, rewards: Rewards, progress: bool = True):
        self.cfg, self.device, self.rewards = cfg, device, rewards
        self.rank, self.size = world()
        model, self.tokenizer = load_causal_lm(cfg.model, cfg.default_size, progress=progress and self.rank == 0)
        self.models = Models(cfg, model.to(device))
        self.train_prompts, self.eval_prompts = load_prompts(cfg, self.tokenizer)
        self.banned = banned_ids(cfg, self.tokenizer).to(device)
        vocab = self.models.model.get_output_embeddings().weight.shape[0]
        if len(self.banned) and int(self.banned.max()) >= vocab:
            raise SettingsError(f"--banned-tokens has an id >= the vocabulary size {vocab}; pass ids below it")
        self.eos = self.tokenizer.eos_token_id
        self.pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (self.eos or 0)
        shape = {"banned": self.banned, "pad_id": self.pad, "temperature": cfg.temperature}
        self.sampler = HFPolicy(self.models.model, **shape, top_p=cfg.top_p)
        self.policy = HFPolicy(wrap(self.models.model, device), **shape, top_p=cfg.top_p)
        self.shape = shape
        longest = max(self.train_prompts.longest, self.eval_prompts.longest) + cfg.max_completion_length
        if self.sampler.max_length is not None and longest > self.sampler.max_length:
            raise SettingsError(f"the longest prompt plus --max-completion-length is {longest} tokens and the model "
                                f"takes {self.sampler.max_length}; pass a smaller --prompt-length or "
                                "--max-completion-length")
        self.optimizer = adam(cfg, self.models.trainable())
        self.scheduler = schedule(cfg, self.optimizer)
        self.ema = EMABaseline(0.0, cfg.ema_decay)
        self.stale = StaleSampler(self.sampler, cfg.staleness) if cfg.staleness else None
        self.recorder = SampleRecorder(cfg.output_dir if self.rank == 0 else None, cfg.max_steps,
                                       text_of(self.tokenizer.decode), first_step=1)      # as metrics.jsonl

    def reference(self, fresh: Callable[[], torch.nn.Module] | None = None):
        """A context giving the reference as an HFPolicy (same temperature and banned ids; no nucleus)."""
        import contextlib

        @contextlib.contextmanager
        def context():
            with self.models.reference(fresh) as ref:
                yield HFPolicy(ref, **self.shape)

        return context()

    def completions(self, prompts: PromptSet, rows: list[int], replies: list[str],
                    completion_ids: list[list[int]]) -> Completions:
        """What the rewards see of replies to prompts[rows] (one row index per reply)."""
        return Completions([prompts.raw[i] for i in rows], [prompts.texts[i] + r for i, r in zip(rows, replies)],
                           replies, completion_ids, {k: [v[i] for i in rows] for k, v in prompts.columns.items()},
                           prompts.conversational)

    def sample(self, prompts: PromptSet, index: list[int], generations: int, generator: torch.Generator,
               sampler: HFPolicy | None = None):
        """(ids, action mask, prompt mask) of ``generations`` replies to each of prompts[index], rows by group,
        drawn from ``sampler`` (None: the current policy)."""
        prompt_ids, prompt_mask = prompts.padded(index, self.pad, self.device)
        prompt_ids, prompt_mask = (x.repeat_interleave(generations, 0) for x in (prompt_ids, prompt_mask))
        ids, mask = sample_replies(sampler or self.sampler, prompt_ids, self.cfg.max_completion_length, generator,
                                   self.eos, group_size=generations, prompt_mask=prompt_mask)
        return ids, mask, prompt_mask

    def decode(self, ids: torch.Tensor, mask: torch.Tensor, start: int) -> tuple[list[str], list[list[int]]]:
        """(reply texts, reply ids) of each row: one decode, stopping at the row's last action."""
        ends = (mask * torch.arange(mask.shape[1], device=mask.device)).amax(-1) + 1
        rows = [row[start:end].tolist() for row, end in zip(ids, ends.tolist())]
        return self.tokenizer.batch_decode(rows, skip_special_tokens=True), rows

    def step(self, step: int) -> dict:
        """Training step ``step`` (0-based): sample, reward, reference, num_iterations updates -> metrics."""
        cfg, k = self.cfg, self.cfg.num_generations
        local = cfg.prompts_per_step // self.size
        pick = torch.randint(len(self.train_prompts), (cfg.prompts_per_step,),
                             generator=step_generator(cfg.seed, step, TASKS, self.device), device=self.device)
        index = pick[self.rank * local:(self.rank + 1) * local].tolist()
        sampler = self.stale.advance(self.models.model) if self.stale else self.sampler
        ids, mask, prompt_mask = self.sample(self.train_prompts, index, k,
                                             step_generator(cfg.seed, step, 1 + self.rank, self.device), sampler)
        start = prompt_mask.shape[1]
        replies, reply_ids = self.decode(ids, mask, start)
        scores = self.rewards.score(self.completions(self.train_prompts, [i for i in index for _ in range(k)],
                                                     replies, reply_ids))
        batch = reply_batch(ids, mask, start, k, scores, prompt_mask=prompt_mask)
        if self.stale and cfg.is_correction != "none":
            batch.rollout_logp = self.score(sampler, batch, start)
        history = self.update(batch, step)
        self.ema.update(history[-1]["reward"])
        per_function = {f"reward/{name}": v for name, v in self.rewards.last.items()} if len(
            self.rewards.functions) > 1 else {}
        capped = [len(ids) == cfg.max_completion_length for ids in reply_ids]
        return {**history[-1], **per_function, "repeat_capped": repeat_share(reply_ids, capped)}

    def score(self, policy: HFPolicy, batch: TokenBatch, start: int) -> torch.Tensor:
        """log ``policy`` of the batch's tokens [B, T] from position ``start``, 0 off the policy's (no gradient)."""
        with torch.no_grad():
            logp = sequence_log_probs(policy, batch, start=start, group_size=self.cfg.num_generations,
                                      chunk_tokens=batch.ids.numel() // self.cfg.gradient_accumulation_steps)
        return torch.where(batch.action_mask.bool(), logp, 0.0)

    def update(self, batch: TokenBatch, step: int | None = None) -> list[dict]:
        """The reference pass and the num_iterations optimiser steps on one batch -> each step's metrics (with lr);
        training step ``step`` (None: not a step of the run) records its sample rows before the last one."""
        cfg = self.cfg
        start = int((batch.action_mask.cumsum(-1) == 0).sum(-1).min())     # the first reply position, P
        if cfg.beta > 0:
            with self.reference() as ref:
                batch.ref_logp = self.score(ref, batch, start)
        history, spec = [], update_spec(cfg)
        for iteration in range(cfg.num_iterations):
            if step is not None and iteration == cfg.num_iterations - 1:
                self.recorder.record(step, self.policy, batch, spec, baseline=self.ema.value, start=start)
            lr = self.scheduler.get_last_lr()[0]
            metrics = pg_update(self.policy, self.optimizer, batch, spec, baseline=self.ema.value, start=start)
            with warnings.catch_warnings():      # a skipped (zero-gradient) step still advances the schedule
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler")
                self.scheduler.step()
            history.append({**metrics, "lr": lr})
        return history


__all__ = ["Session", "banned_ids", "update_spec"]
