"""An LM whose replies can all be enumerated: what training with beta converges to (llm-ch6, "What beta means").

A tiny random GPT-2 over a vocabulary of ``vocab`` tokens answers one fixed one-token prompt with
``length`` tokens, so there are vocab ** length replies, each with a reward r(y). The maximiser of
E[r] - beta KL(pi || ref) is pi*(y) = ref(y) exp(r(y) / beta) / Z. The policy is trained with the
LM trainer's own pieces (``sample_replies``, ``pg_update``: leave-one-out, k1 in the reward,
reward-to-go) and measured against pi* by enumerating every reply.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable

import torch

from pglab.models.policy import HFPolicy
from pglab.runtime.progress import track
from pglab.sampling.replies import reply_batch, sample_replies
from pglab.sampling.scoring import sequence_log_probs
from pglab.trainers.update import UpdateSpec, pg_update


def all_replies(vocab: int, length: int, prompt: int = 0) -> torch.Tensor:
    """Every reply after the one-token prompt: [vocab ** length, 1 + length] long."""
    replies = torch.tensor(list(itertools.product(range(vocab), repeat=length)), dtype=torch.long)
    return torch.cat([torch.full((len(replies), 1), prompt), replies], 1)


@torch.no_grad()
def reply_log_probs(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """log pi(reply | prompt) of each row of ids [N, 1 + L] -> [N] (float64)."""
    return sequence_log_probs(HFPolicy(model), ids, start=1).double().sum(-1)


def optimal_log_policy(ref_logp: torch.Tensor, rewards: torch.Tensor, beta: float) -> torch.Tensor:
    """log pi*(y) = log ref(y) + r(y) / beta - log Z over an enumerated reply set; [N], [N] -> [N]."""
    if beta <= 0:
        raise ValueError("pi* needs beta > 0 (at beta = 0 all mass goes to the best reply)")
    unnormalised = ref_logp + rewards / beta
    return unnormalised - torch.logsumexp(unnormalised, 0)


def kl_from_log_probs(logp: torch.Tensor, logq: torch.Tensor) -> float:
    """KL(p || q) of two enumerated distributions given as log-probabilities [N]."""
    return float((logp.exp() * (logp - logq)).sum())


def tiny_gpt2(vocab: int, length: int, width: int, layers: int, seed: int) -> torch.nn.Module:
    """A random GPT2LMHeadModel (no dropout, float64) for the toy."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab, n_positions=length + 1, n_embd=width, n_layer=layers, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).double().eval()


def train_toward_optimum(model: torch.nn.Module, reward: Callable[[torch.Tensor], torch.Tensor], beta: float,
                         steps: int, groups: int, group_size: int, lr: float, seed: int, every: int = 10,
                         progress: bool = True) -> list[tuple[int, float]]:
    """Train ``model`` in place (RLOO, k1 in the reward) with Adam and a linearly decaying step size.

    reward maps reply ids [B, L] to scores [B]. Returns (step, KL(pi || pi*) by enumeration) at
    step 0, every ``every`` steps and at the end.
    """
    ref = copy.deepcopy(model).requires_grad_(False)
    vocab, length = model.config.vocab_size, model.config.n_positions - 1
    replies = all_replies(vocab, length)
    target = optimal_log_policy(reply_log_probs(ref, replies), reward(replies[:, 1:]).double(), beta)
    policy = HFPolicy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / steps)
    gen = torch.Generator().manual_seed(seed)
    prompts = torch.zeros(groups * group_size, 1, dtype=torch.long)
    spec = UpdateSpec("rloo", group_size, beta=beta, mode="seq_mean_token_sum", max_grad_norm=10.0, chunk_tokens=0)
    kls = [(0, kl_from_log_probs(reply_log_probs(model, replies), target))]
    for step in track(range(steps), "training toward pi*", total=steps) if progress else range(steps):
        ids, mask = sample_replies(policy, prompts, length, gen)
        batch = reply_batch(ids, mask, 1, group_size, reward(ids[:, 1:]).double())
        with torch.no_grad():
            batch.ref_logp = sequence_log_probs(HFPolicy(ref), batch, start=1, group_size=group_size,
                                                chunk_tokens=ids.numel()).double()
        pg_update(policy, optimizer, batch, spec)
        schedule.step()
        if (step + 1) % every == 0 or step + 1 == steps:
            kls.append((step + 1, kl_from_log_probs(reply_log_probs(model, replies), target)))
    return kls
