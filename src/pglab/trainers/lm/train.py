"""REINFORCE for any Hugging Face causal LM: EMA baseline, RLOO, GRPO, Dr. GRPO, a per-token KL penalty.

The recipe of llm-ch6 §6.11-6.12. One step samples ``num_generations`` replies to each of
``prompts_per_step`` prompts from softmax(logits / temperature), cut to the top-p nucleus, with
banned tokens at probability 0 (the same policy is scored and differentiated), rewards them, and
takes ``num_iterations`` ``pg_update`` steps: the baseline on each reply's score, the KL penalty
per token (k1 in the reward with reward-to-go, or k3 in the loss as TRL's GRPO does), one guarded
Adam step each (the clipped ratio after the first). ``Session`` (session.py) holds the state and
the step; this module adds evaluation, logs, checkpoints and resume.

Batch layout (a ``TokenBatch``): a step's prompts are left-padded to its longest, P tokens, so ids
are [B, P + L] with the reply at positions P..P+L-1; a reply that samples end-of-text (when it is
not banned) is padded after it (attention and action mask 0). Rows are group-contiguous: the K
replies to one prompt are rows gK..gK+K-1.

Scale-out: under ``torchrun`` the policy is wrapped in DistributedDataParallel (gloo on CPU,
nccl on CUDA). Every rank samples whole groups (its share of the step's prompts); ``pg_update``
gathers the scores of all ranks, so one step over N ranks equals one single-process step on the
union of their rows. Only rank 0 evaluates, logs and writes checkpoints.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pglab.models.hf import check_model, load_causal_lm
from pglab.runtime.distributed import process_group, world
from pglab.runtime.progress import track
from pglab.trainers.lm.config import RLConfig
from pglab.trainers.lm.data import check_prompts_source, load_prompts
from pglab.trainers.lm.eval import reply_metrics, score_replies, worked_example
from pglab.trainers.lm.logging import check_report_to, tensorboard_logger
from pglab.trainers.lm.model import check_lora
from pglab.trainers.lm.rewards import as_rewards, make_rewards
from pglab.trainers.lm.session import Session, banned_ids
from pglab.trainers.loop import EVAL, RunDir, step_generator

METRICS, EVALS = "metrics.jsonl", "eval.jsonl"
RESUME_KEYS = ("model", "default_size", "reward", "reward_weights", "prompts", "prompt_column", "chat_template",
               "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "prompts_per_step",
               "num_generations", "prompt_length", "max_completion_length", "ban_eos", "banned_tokens", "temperature",
               "top_p", "advantage", "scale_rewards", "std", "ema_decay", "beta", "kl_in", "aggregation",
               "max_grad_norm", "seed", "gradient_accumulation_steps", "num_iterations", "epsilon", "epsilon_high",
               "lora_r", "lora_alpha", "lora_target_modules")
"""Settings a resumed run must share with the checkpoint."""


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


def preflight(cfg: RLConfig) -> None:
    """Every check that needs no model loaded: settings, files, optional packages (one-line ValueErrors)."""
    cfg.validate()
    check_model(cfg.model)
    check_prompts_source(cfg)
    check_lora(cfg)
    check_report_to(cfg.report_to)
    size = world()[1]
    if cfg.prompts_per_step % (size * cfg.gradient_accumulation_steps):
        raise ValueError(f"--prompts-per-step {cfg.prompts_per_step} is not divisible by the {size} processes x "
                         f"--gradient-accumulation-steps {cfg.gradient_accumulation_steps}; pass a multiple of "
                         f"{size * cfg.gradient_accumulation_steps}")


def train_lm(cfg: RLConfig, *, reward: Callable | None = None, log: Callable[[dict], None] | None = None,
             progress: bool = True) -> LMRun:
    """Train cfg.model with REINFORCE and the chosen baseline and KL penalty; evaluate before, during and after.

    ``reward`` overrides cfg.reward with a Reward, Rewards or any callable (TRL's signature or texts
    -> scores); ``log`` receives one dict of metrics per step. Under torchrun joins the process group.
    """
    preflight(cfg)
    with process_group(cfg.device) as device:
        rewards = as_rewards(reward) if reward is not None else make_rewards(cfg.reward_specs, cfg.reward_weights,
                                                                             device)
        return _train(Session(cfg, device, rewards, progress), log, progress)


def _train(session: Session, log: Callable[[dict], None] | None, progress: bool) -> LMRun:
    cfg, device, rank = session.cfg, session.device, session.rank
    run = LMRun(config=dataclasses.asdict(cfg), tokenizer=session.tokenizer)
    settings = {k: run.config[k] for k in RESUME_KEYS}
    out = RunDir(cfg.output_dir, writer=rank == 0)
    first = 0
    if cfg.resume:
        state = out.load_checkpoint(settings, map_location=device)
        session.models.load_state(state["policy"])
        session.optimizer.load_state_dict(state["optimizer"])
        session.scheduler.load_state_dict(state["scheduler"])
        session.ema.value, session.ema.count = state["ema"]
        first, run.history, run.evals = state["step"], state["history"], state["evals"]
    out.write_lines(METRICS, run.history)
    out.write_lines(EVALS, run.evals)
    board = tensorboard_logger(cfg.report_to, out.path) if out.writer else None
    eval_steps = {0, cfg.max_steps, *cfg.sample_steps}
    if cfg.eval_every:
        eval_steps.update(range(cfg.eval_every, cfg.max_steps + 1, cfg.eval_every))

    def evaluate(step: int) -> None:
        prompts = session.eval_prompts
        index = list(range(min(cfg.eval_prompts, len(prompts))))
        ids, mask, prompt_mask = session.sample(prompts, index, cfg.eval_generations,
                                                step_generator(cfg.seed, 0, EVAL, device))
        start = prompt_mask.shape[1]
        rows = [i for i in index for _ in range(cfg.eval_generations)]
        reply_ids = session.decode(ids, mask, start)[1]

        def fresh():   # at beta = 0 without LoRA the reference is loaded only to evaluate (step 0: the policy)
            return session.models.model if step == 0 else load_causal_lm(cfg.model, cfg.default_size,
                                                                         progress=False)[0].to(device).eval()

        scored = score_replies(session.sampler, lambda: session.reference(fresh), session.tokenizer, ids, mask, start,
                               session.rewards, prompt_mask,
                               lambda replies: session.completions(prompts, rows, replies, reply_ids))
        record = {"step": step, **reply_metrics(scored, session.rewards), "samples": scored.texts[:cfg.samples]}
        run.evals.append(record)
        out.append_line(EVALS, record)
        if board is not None:
            board("eval", record)
        if step == cfg.max_steps:
            run.final_replies = scored.replies
            run.worked_example, run.worked_check = worked_example(scored, 0, cfg.beta, session.tokenizer, start)

    if rank == 0 and first == 0:
        evaluate(0)
    steps = range(first, cfg.max_steps)
    for step in track(steps, "train-lm", total=len(steps)) if progress and rank == 0 else steps:
        start = time.perf_counter()
        record = {"step": step + 1, **session.step(step), "seconds": 0.0}
        record["seconds"] = time.perf_counter() - start
        run.history.append(record)
        if rank == 0 and log is not None:
            log(record)
        if board is not None:
            board("train", record)
        out.append_line(METRICS, record)
        if rank == 0 and step + 1 in eval_steps:
            evaluate(step + 1)
        if (cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0) or step + 1 == cfg.max_steps:
            out.save_checkpoint({"settings": settings, "step": step + 1, "policy": session.models.state(),
                                 "optimizer": session.optimizer.state_dict(),
                                 "scheduler": session.scheduler.state_dict(),
                                 "ema": (session.ema.value, session.ema.count),
                                 "history": run.history, "evals": run.evals})
    if out.writer:
        session.models.save(out / "policy", session.tokenizer)
        if run.worked_example:
            out.write_json("worked_example.json", {"rows": run.worked_example, "check": run.worked_check})
    run.policy = session.models.model
    return run


__all__ = ["LMRun", "RESUME_KEYS", "banned_ids", "load_prompts", "preflight", "train_lm"]
