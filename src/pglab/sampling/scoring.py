"""Scoring: the log-probabilities a policy gives to the tokens of a batch, the one function every trainer uses.

Log-probs are aligned with ids: ``logp[:, t] = log pi(ids[:, t] | ids[:, :t])``, 0 before the
first scored position; a batch sampled under constraints (``TokenBatch.allowed``) is scored renormalised over
each position's allowed ids. Rows of different lengths are scored in chunks of similar length, cut to
their longest row, so a few long episodes do not multiply the work of all; the chunks are made
of whole groups, so a policy can run a group's shared prompt once.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from pglab.batch import TokenBatch
from pglab.models.logits import full_precision
from pglab.models.policy import TokenPolicy, as_policy

CHUNK_TOKENS = 1024
"""Rows of similar length are run together in chunks of at most this many (padded) positions."""


def token_log_probs(logits: torch.Tensor, ids: torch.Tensor, start: int = 1,
                    allowed: torch.Tensor | None = None) -> torch.Tensor:
    """logits [B, T - start, V] predicting ids[:, start:] -> log pi(ids[:, t] | ids[:, :t]) [B, T], 0 before start.

    ``allowed`` [B, T - start, V] bool: the policy is renormalised over the allowed ids of each position."""
    logits = full_precision(logits)
    if allowed is not None:
        logits = logits.masked_fill(~allowed, -math.inf)
    picked = F.log_softmax(logits, dim=-1).gather(-1, ids[:, start:, None])[..., 0]
    return F.pad(picked, (start, 0))


def length_chunks(lengths: torch.Tensor, chunk_tokens: int = CHUNK_TOKENS, group_size: int = 1) -> list[torch.Tensor]:
    """Row indices in whole groups, by decreasing group length, cut so that rows x longest <= chunk_tokens.

    lengths [B] (B a multiple of ``group_size``; a group's length is its longest row's) -> chunks of indices.
    """
    group_lengths = lengths.reshape(-1, group_size).amax(-1)
    order = torch.argsort(group_lengths, descending=True, stable=True)
    chunks, start = [], 0
    while start < len(order):
        groups = max(1, chunk_tokens // max(1, group_size * int(group_lengths[order[start]])))
        picked = order[start:start + groups]
        chunks.append((picked[:, None] * group_size + torch.arange(group_size)).flatten())
        start += groups
    return chunks


def sequence_log_probs(policy: TokenPolicy | torch.nn.Module, batch: TokenBatch | torch.Tensor, *, start: int = 1,
                       group_size: int = 1, chunk_tokens: int = CHUNK_TOKENS) -> torch.Tensor:
    """log pi(ids[:, t] | ids[:, :t]) of a TokenBatch (or ids [B, T]) -> [B, T], 0 before ``start`` (differentiable).

    A TokenBatch is run in chunks of whole groups of ``group_size`` rows (see :func:`length_chunks`);
    a TinyAgent or HF model is taken as its :func:`~pglab.models.policy.as_policy`.
    """
    policy = as_policy(policy)
    ids = batch.ids if isinstance(batch, TokenBatch) else batch
    if not isinstance(batch, TokenBatch):
        return token_log_probs(policy.logits(ids, start, group_size), ids, start)
    padded = not bool(batch.attention_mask[:, :start].all())      # left-padded prompts need their mask

    def logits(rows: torch.Tensor | slice, longest: int) -> torch.Tensor:
        part = ids[rows, :longest]
        extra = {"attention_mask": batch.attention_mask[rows, :longest]} if padded else {}
        allowed = batch.allowed.mask(rows, start, longest) if batch.allowed is not None else None
        return token_log_probs(policy.logits(part, start, group_size, **extra), part, start, allowed)

    if ids.shape[0] == group_size:
        return logits(slice(None), ids.shape[1])
    positions = torch.arange(ids.shape[1], device=ids.device)
    lengths = ((batch.attention_mask > 0) * (positions + 1)).amax(-1).clamp(min=start + 1)   # last real token + 1
    chunks = length_chunks(lengths, chunk_tokens, group_size)
    width = ids.shape[1]
    parts = []
    for rows in chunks:
        longest = int(lengths[rows].max())
        parts.append(F.pad(logits(rows, longest), (0, width - longest)))
    inverse = torch.argsort(torch.cat(chunks))
    return torch.cat(parts)[inverse]


__all__ = ["CHUNK_TOKENS", "length_chunks", "sequence_log_probs", "token_log_probs"]
