"""REINFORCE for any Hugging Face causal LM: EMA baseline, RLOO, GRPO, Dr. GRPO, a per-token KL penalty.

The recipe of llm-ch6 §6.11-6.12. One step samples ``num_generations`` replies to each of
``prompts_per_step`` prompts at temperature 1 with a KV cache (banned tokens get probability 0
when sampling and when scoring, so the policy sampled from is the policy differentiated), scores
prompt + reply with the reward, and takes one ``pg_update``: the baseline on each reply's score,
the KL penalty per token (k1 in the reward with reward-to-go, or k3 in the loss as TRL's GRPO
does), one guarded Adam step.

Batch layout (a ``TokenBatch``): every prompt is cut to ``prompt_length`` tokens, so ids are
[B, P + L] with the reply at positions P..P+L-1; a reply that samples end-of-text (when it is not
banned) is padded after it (attention and action mask 0). Rows are group-contiguous: the K
replies to one prompt are rows gK..gK+K-1.

Scale-out: under ``torchrun`` the policy is wrapped in DistributedDataParallel (gloo on CPU,
nccl on CUDA). Every rank samples whole groups (its share of the step's prompts); ``pg_update``
gathers the scores of all ranks, so one step over N ranks equals one single-process step on the
union of their rows. Only rank 0 evaluates, logs and writes checkpoints.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pglab.distributed import process_group, world, wrap
from pglab.estimators import EMABaseline
from pglab.models.hf import load_causal_lm
from pglab.models.policy import HFPolicy
from pglab.progress import track
from pglab.sampling.replies import decode_replies, reply_batch, sample_replies
from pglab.sampling.scoring import sequence_log_probs
from pglab.trainers.lm.config import RLConfig
from pglab.trainers.lm.eval import reply_metrics, score_replies, worked_example
from pglab.trainers.run_dir import EVAL, TASKS, RunDir, step_generator
from pglab.trainers.token_pg import pg_update

METRICS, EVALS = "metrics.jsonl", "eval.jsonl"
RESUME_KEYS = ("model", "default_size", "reward", "prompts", "learning_rate", "prompts_per_step", "num_generations",
               "prompt_length", "max_completion_length", "ban_eos", "banned_tokens", "advantage", "scale_rewards",
               "std", "ema_decay", "beta", "kl_in", "aggregation", "max_grad_norm", "seed")
"""Settings a resumed run must share with the checkpoint."""


def prompt_tensors(cfg: RLConfig, tokenizer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, eval) prompt ids [N, prompt_length]: each prompt's first prompt_length tokens."""
    if cfg.prompts:
        lines = [s.strip() for s in Path(cfg.prompts).read_text().splitlines() if s.strip()]
        cut = len(lines) * 7 // 8
        texts = {"train": lines[:cut], "eval": lines[cut:]}
    else:
        from pglab.models.default_lm import review_openings

        texts = {"train": review_openings("train", 4000), "eval": review_openings("eval", max(256, cfg.eval_prompts))}
    out = []
    for split in ("train", "eval"):
        ids = [x[:cfg.prompt_length] for x in tokenizer(texts[split])["input_ids"] if len(x) >= cfg.prompt_length]
        if not ids:
            raise ValueError(f"no {split} prompt has {cfg.prompt_length} tokens; pass a smaller --prompt-length "
                             "or longer prompts")
        out.append(torch.tensor(ids, dtype=torch.long))
    return out[0], out[1]


def banned_ids(cfg: RLConfig, tokenizer: Any) -> torch.Tensor:
    """The banned token ids (end-of-text when ban_eos, then banned_tokens) as a long tensor."""
    ids = list(cfg.banned_tokens)
    if cfg.ban_eos and tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    return torch.tensor(sorted(set(ids)), dtype=torch.long)


@dataclass
class LMRun:
    """What train_lm returns: per-step metrics, evaluations (with samples) and the worked example."""

    config: dict
    history: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    worked_example: list[dict] = field(default_factory=list)
    worked_check: dict = field(default_factory=dict)
    final_replies: list[str] = field(default_factory=list)
    policy: Any = None
    tokenizer: Any = None


def train_lm(cfg: RLConfig, *, reward: Callable | None = None, log: Callable[[dict], None] | None = None,
             progress: bool = True) -> LMRun:
    """Train cfg.model with REINFORCE and the chosen baseline and KL penalty; evaluate before, during and after.

    ``reward`` overrides cfg.reward with a Reward (or any callable texts -> scores); ``log`` receives
    one dict of metrics per step. Under torchrun (WORLD_SIZE > 1) joins the process group.
    """
    from pglab.trainers.lm.rewards import make_reward

    cfg.validate()
    with process_group(cfg.device) as device:
        size = world()[1]
        if cfg.prompts_per_step % size:
            raise ValueError(f"--prompts-per-step {cfg.prompts_per_step} must be divisible by the {size} processes")
        return _train(cfg, device, reward or make_reward(cfg.reward, device), log, progress)


def _train(cfg: RLConfig, device: torch.device, reward: Callable, log: Callable[[dict], None] | None,
           progress: bool) -> LMRun:
    rank, size = world()
    model, tokenizer = load_causal_lm(cfg.model, cfg.default_size, progress=progress and rank == 0)
    model.to(device).eval()                      # eval mode: no dropout, so sampling and scoring share one policy
    ref = copy.deepcopy(model).requires_grad_(False) if cfg.beta > 0 else None   # no copy at beta = 0
    train_prompts, eval_prompts = (p.to(device) for p in prompt_tensors(cfg, tokenizer))
    banned = banned_ids(cfg, tokenizer).to(device)
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos or 0)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
    ema = EMABaseline(0.0, cfg.ema_decay)
    run = LMRun(config=dataclasses.asdict(cfg), tokenizer=tokenizer)
    settings = {k: run.config[k] for k in RESUME_KEYS}
    out = RunDir(cfg.output_dir, writer=rank == 0)
    first = 0
    if cfg.resume:
        state = out.load_checkpoint(settings, map_location=device)
        model.load_state_dict(state["policy"])
        optimizer.load_state_dict(state["optimizer"])
        ema.value, ema.count = state["ema"]
        first, run.history, run.evals = state["step"], state["history"], state["evals"]
    out.write_lines(METRICS, run.history)
    out.write_lines(EVALS, run.evals)
    sampler = HFPolicy(model, banned=banned, pad_id=pad)
    policy = HFPolicy(wrap(model, device), banned=banned, pad_id=pad)
    eval_steps = {0, cfg.max_steps, *cfg.sample_steps}
    if cfg.eval_every:
        eval_steps.update(range(cfg.eval_every, cfg.max_steps + 1, cfg.eval_every))
    local_prompts = cfg.prompts_per_step // size

    def evaluate(step: int) -> None:
        prompts = eval_prompts[:cfg.eval_prompts].repeat_interleave(cfg.eval_generations, 0)
        ids, mask = sample_replies(sampler, prompts, cfg.max_completion_length,
                                   step_generator(cfg.seed, 0, EVAL, device), eos)
        # at beta = 0 the reference is loaded only while evaluating (before training it is the policy itself)
        reference = ref if ref is not None else model if step == 0 else load_causal_lm(
            cfg.model, cfg.default_size, progress=False)[0].to(device).eval()
        scored = score_replies(model, reference, tokenizer, ids, mask, cfg.prompt_length, reward, banned)
        record = {"step": step, **reply_metrics(scored, reward), "samples": scored.texts[:cfg.samples]}
        run.evals.append(record)
        out.append_line(EVALS, record)
        if step == cfg.max_steps:
            run.final_replies = scored.replies
            run.worked_example, run.worked_check = worked_example(scored, 0, cfg.beta, tokenizer, cfg.prompt_length)

    if rank == 0 and first == 0:
        evaluate(0)
    steps = range(first, cfg.max_steps)
    for step in track(steps, "train-lm", total=len(steps)) if progress and rank == 0 else steps:
        start = time.perf_counter()
        pick = torch.randint(len(train_prompts), (cfg.prompts_per_step,),
                             generator=step_generator(cfg.seed, step, TASKS, device), device=device)
        prompts = train_prompts[pick[rank * local_prompts:(rank + 1) * local_prompts]]
        ids, mask = sample_replies(sampler, prompts.repeat_interleave(cfg.num_generations, 0),
                                   cfg.max_completion_length, step_generator(cfg.seed, step, 1 + rank, device), eos)
        texts, _ = decode_replies(tokenizer, ids, mask, cfg.prompt_length)
        batch = reply_batch(ids, mask, cfg.prompt_length, cfg.num_generations, reward(texts))
        if ref is not None:
            with torch.no_grad():
                ref_logp = sequence_log_probs(HFPolicy(ref, banned=banned), batch, start=cfg.prompt_length,
                                              group_size=cfg.num_generations, chunk_tokens=batch.ids.numel())
            batch.ref_logp = torch.where(mask.bool(), ref_logp, 0.0)
        metrics = pg_update(policy, optimizer, batch, advantage=cfg.advantage, group_size=cfg.num_generations,
                            baseline=ema.value, beta=cfg.beta, kl_in=cfg.kl_in, mode=cfg.loss_mode,
                            norm_const=cfg.prompts_per_step * cfg.num_generations * cfg.max_completion_length,
                            start=cfg.prompt_length, scale=cfg.scale_rewards, **cfg.std_options,
                            max_grad_norm=cfg.max_grad_norm, chunk_tokens=0)
        ema.update(metrics["reward"])
        record = {"step": step + 1, **metrics, "seconds": time.perf_counter() - start}
        run.history.append(record)
        if rank == 0 and log is not None:
            log(record)
        out.append_line(METRICS, record)
        if rank == 0 and step + 1 in eval_steps:
            evaluate(step + 1)
        if (cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0) or step + 1 == cfg.max_steps:
            out.save_checkpoint({"settings": settings, "step": step + 1, "policy": model.state_dict(),
                                 "optimizer": optimizer.state_dict(), "ema": (ema.value, ema.count),
                                 "history": run.history, "evals": run.evals})
    if out.writer:
        model.save_pretrained(out / "policy")
        tokenizer.save_pretrained(out / "policy")
        if run.worked_example:
            out.write_json("worked_example.json", {"rows": run.worked_example, "check": run.worked_check})
    run.policy = model
    return run


__all__ = ["LMRun", "RESUME_KEYS", "banned_ids", "prompt_tensors", "train_lm"]
