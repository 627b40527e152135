"""tinyagent-masking: which positions the REINFORCE loss reaches, directly and through attention (agents-ch6 §6.3).

On a batch of base-agent episodes, the loss -(1/B) sum_n R_n sum_t m_t log pi(y_t) is backpropagated
to the logits and to the input embeddings. The positions with a logit gradient are counted
against the policy tokens of the successful episodes; the embedding gradient is averaged over
prompt, policy and tool positions: tool tokens get no direct gradient but an indirect one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.batch import OWNER_NAMES, POLICY, PROMPT, TOOL
from pglab.envs.bugfix import make_tasks
from pglab.estimators import reinforce_loss
from pglab.models import build_tokenizer
from pglab.result import Result
from pglab.sampling.scoring import token_log_probs
from pglab.threads import single_torch_thread
from pglab.trainers.cloning import make_base_agent
from pglab.trainers.reinforce import sample_episodes

BOOK = {"prompt": 1.87e-4, "policy": 1.49e-4, "tool": 3.18e-5, "positions": 70}
"""agents-ch6 §6.3: mean embedding-gradient norms and the count of positions with a logit gradient."""


@dataclass
class Config:
    per_task: int = 4
    """Episodes of the base agent per training task (20 tasks: a batch of 80)."""
    seed: int = 0
    """Seed of the base agent (its behaviour cloning)."""
    sample_seed: int = 2
    """Seed of the generator that samples the episodes."""

    QUICK: ClassVar[dict] = {"per_task": 2}


def run(config: Config, result: Result) -> None:
    with single_torch_thread():
        tokenizer = build_tokenizer(make_tasks("all"))
        model = make_base_agent(tokenizer, seed=config.seed)
        batch = sample_episodes(model, tokenizer, make_tasks("train"), config.per_task, config.sample_seed)
        kept = {}

        def keep(module, inputs, output):
            output.retain_grad()
            kept["embedded"] = output                                             # [B, T, D]

        hook = model.tok_emb.register_forward_hook(keep)
        try:
            logits = model(batch.ids)                                             # [B, T, V]
        finally:
            hook.remove()
        logits.retain_grad()
        loss = reinforce_loss(token_log_probs(logits, batch.ids), batch.rewards, batch.action_mask,
                              mode="seq_mean_token_sum")
        loss.backward()
        model.zero_grad()
    # logits at t predict token t + 1: shift the mask of "has a logit gradient" onto the predicted token
    direct = torch.nn.functional.pad(logits.grad[:, :-1].abs().sum(-1) > 0, (1, 0))     # [B, T]
    success_policy = (batch.action_mask > 0) & (batch.rewards[:, None] > 0)
    n_direct, n_success = int(direct.sum()), int(success_policy.sum())
    outside = int((direct & (batch.action_mask == 0)).sum())
    norms = kept["embedded"].grad.norm(dim=-1)                                    # [B, T]
    rows = []
    for code in (PROMPT, POLICY, TOOL):
        name = OWNER_NAMES[code]
        where = batch.owner == code
        rows.append({"positions": name, "count": int(where.sum()), "mean_embedding_grad": float(norms[where].mean()),
                     "book": BOOK[name]})
    result.summary = (
        f"{batch.batch_size} base-agent episodes ({config.per_task} per training task), {int(batch.rewards.sum())} "
        "successful. The loss -(1/B) sum_n R_n sum_t m_t log pi is backpropagated to the logits and to the input "
        "embeddings (a forward hook on tok_emb).")
    result.tables["logit_gradient"] = [{"positions with a logit gradient": n_direct,
                                        "policy tokens of successful episodes": n_success,
                                        "outside the action mask": outside, "book": "70 = 70, 0 outside"}]
    result.tables["embedding_gradient"] = rows
    result.metrics.update({"logit_gradient_positions": n_direct, "success_policy_tokens": n_success,
                           "outside_mask": outside, **{f"embedding_grad_{r['positions']}": r["mean_embedding_grad"]
                                                       for r in rows}})
    result.check("positions with a logit gradient = policy tokens of successful episodes", n_direct,
                 bool(torch.equal(direct, success_policy)), f"= {n_success}, position by position",
                 "exact: integer counts, the same positions")
    result.check("positions with a logit gradient outside the action mask", outside, outside == 0, "0", "exact")
    by = {r["positions"]: r["mean_embedding_grad"] for r in rows}
    result.check("tool positions get a non-zero embedding gradient (through attention)", by["tool"], by["tool"] > 0,
                 "> 0", "exact zero would mean no path through attention")
    result.check("tool positions get less embedding gradient than policy positions", by["tool"] / by["policy"],
                 by["tool"] < by["policy"], "< 1 (book: 0.21)", "ratio of means over hundreds of positions")
