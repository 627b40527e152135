"""REINFORCE for any Hugging Face causal LM: EMA baseline, RLOO, GRPO, Dr. GRPO, a per-token KL penalty.

The recipe of llm-ch6 §6.11-6.12. One step samples ``num_generations`` replies to each of
``prompts_per_step`` prompts from softmax(logits / temperature), cut to the top-p nucleus, with
banned tokens at probability 0 (the same policy is scored and differentiated), rewards them, and
takes ``num_iterations`` ``pg_update`` steps: the baseline on each reply's score, the KL penalty
per token (k1 in the reward with reward-to-go, or k3 in the loss as TRL's GRPO does), one guarded
Adam step each (the clipped ratio after the first). ``Session`` (session.py) holds the state and
the step; this module adds the evaluation and runs both in the one loop (:func:`pglab.trainers.loop.run_loop`:
logs, checkpoints and resume).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pglab.models.hf import check_model, load_causal_lm
from pglab.runtime.distributed import process_group, world
from pglab.runtime.options import SettingsError
from pglab.trainers.lm.config import RLConfig
from pglab.trainers.lm.data import check_prompts_source, load_prompts
from pglab.trainers.lm.eval import reply_metrics, score_replies, worked_example
from pglab.trainers.lm.logging import check_report_to, tensorboard_logger
from pglab.trainers.lm.model import check_lora
from pglab.trainers.lm.rewards import as_rewards, make_rewards
from pglab.trainers.lm.session import Session, banned_ids
from pglab.trainers.loop import EVAL, RunDir, RunSettings, Schedule, Trainer, eval_steps, run_loop, step_generator

METRICS, EVALS = "metrics.jsonl", "eval.jsonl"
RESUME_KEYS = ("model", "default_size", "reward", "reward_weights", "prompts", "prompt_column", "chat_template",
               "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "prompts_per_step",
               "num_generations", "prompt_length", "max_completion_length", "ban_eos", "banned_tokens", "temperature",
               "top_p", "advantage", "scale_rewards", "std", "ema_decay", "beta", "kl_in", "aggregation",
               "max_grad_norm", "seed", "gradient_accumulation_steps", "num_iterations", "epsilon", "epsilon_high",
               "lora_r", "lora_alpha", "lora_target_modules", "loss", "dual_clip", "is_correction", "is_cap",
               "staleness")
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
        raise SettingsError(f"--prompts-per-step {cfg.prompts_per_step} is not divisible by the {size} processes x "
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


def evaluate(session: Session, step: int, run: LMRun) -> dict[str, Any]:
    """The held-out evaluation after ``step`` steps: replies sampled, scored under the policy and the reference.

    After the last step it also keeps the final replies and the worked example in ``run``.
    """
    cfg, device = session.cfg, session.device
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
    if step == cfg.max_steps:
        run.final_replies = scored.replies
        run.worked_example, run.worked_check = worked_example(scored, 0, cfg.beta, session.tokenizer, start)
    return {"step": step, **reply_metrics(scored, session.rewards, cfg.eval_generations, cfg.num_generations),
            "samples": scored.texts[:cfg.samples]}


def lm_trainer(session: Session, run: LMRun, log: Callable[[dict], None] | None,
               board: Callable[[str, dict], None] | None) -> Trainer:
    """train-lm's step, evaluation (rank 0) and checkpointed state for the one loop; ``log`` and ``board`` see
    every row on rank 0."""
    rank = session.rank

    def evaluate_here(step: int) -> dict[str, Any] | None:
        record = evaluate(session, step, run) if rank == 0 else None
        if record is not None and board is not None:
            board("eval", record)
        return record

    def on_row(record: dict) -> None:
        if rank == 0 and log is not None:
            log(record)
        if board is not None:
            board("train", record)

    def restore(state: Mapping[str, Any]) -> None:
        session.models.load_state(state["policy"])
        session.optimizer.load_state_dict(state["optimizer"])
        session.scheduler.load_state_dict(state["scheduler"])
        session.ema.value, session.ema.count = state["ema"]
        if session.stale:
            session.stale.restore(state["stale"])

    return Trainer(step=lambda step, loop: {"step": step + 1, **session.step(step)}, evaluate=evaluate_here,
                   state=lambda: {"policy": session.models.state(), "optimizer": session.optimizer.state_dict(),
                                  "scheduler": session.scheduler.state_dict(),
                                  "ema": (session.ema.value, session.ema.count),
                                  **({"stale": session.stale.state()} if session.stale else {})},
                   restore=restore, on_row=on_row)


def _train(session: Session, log: Callable[[dict], None] | None, progress: bool) -> LMRun:
    cfg, rank = session.cfg, session.rank
    run = LMRun(config=dataclasses.asdict(cfg), tokenizer=session.tokenizer)
    writer = rank == 0 and cfg.output_dir is not None
    board = tensorboard_logger(cfg.report_to, Path(cfg.output_dir)) if writer else None
    schedule = Schedule(cfg.max_steps, eval_steps(cfg.max_steps, cfg.eval_every, *cfg.sample_steps), METRICS, EVALS,
                        label="train-lm", settings={k: run.config[k] for k in RESUME_KEYS}, map_location=session.device)
    done = run_loop(lm_trainer(session, run, log, board), schedule,
                    RunSettings(cfg.output_dir, cfg.resume, checkpoint_every=cfg.checkpoint_every, progress=progress),
                    rank=rank)
    run.history, run.evals = done.history, done.evals
    folder = RunDir(cfg.output_dir, writer=rank == 0)
    if folder.writer:
        session.models.save(folder / "policy", session.tokenizer)
        if run.worked_example:
            folder.write_json("worked_example.json", {"rows": run.worked_example, "check": run.worked_check})
    run.policy = session.models.model
    return run


__all__ = ["LMRun", "RESUME_KEYS", "banned_ids", "evaluate", "lm_trainer", "load_prompts", "preflight", "train_lm"]
