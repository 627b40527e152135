"""TokenPolicy: the seam between a language model and pglab's samplers and trainers.

A token policy gives two things: the logits of whole sequences (scoring, differentiable) and
incremental decoding of many rows at once, each row at its own length, with a KV cache
(sampling multi-turn episodes, where tool answers of different lengths are appended between
calls). ``TinyAgentPolicy`` and ``HFPolicy`` adapt TinyAgent and any Hugging Face causal LM; the
episode collector, the reply sampler and ``pg_update`` see only this protocol.

Banned token ids (``HFPolicy(banned=...)``) get probability 0 in scoring and in decoding alike,
so the policy that is differentiated is the policy that was sampled.
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

import torch

from pglab.models.gpt2 import plain_gpt2
from pglab.models.hf import reply_logits
from pglab.models.hf_decode import GPT2Prefixes, turn_rows
from pglab.models.logits import autocast, cache_keyword, cache_of, full_precision, shape_logits
from pglab.models.tinyagent import KVCache, TinyAgent
from pglab.runtime.distributed import unwrap


class Prefixes(Protocol):
    """Incremental decoding of B rows: feed each row its new tokens, read the logits after its last one."""

    def extend(self, rows: list[int], chunks: list[list[int]]) -> torch.Tensor:
        """Append ``chunks[j]`` to row ``rows[j]`` -> the next-token logits after each chunk [len(rows), V]."""
        ...

    def keep(self, rows: list[int]) -> None:
        """Only ``rows`` continue; the others are dropped from the cache."""
        ...


class TokenPolicy(Protocol):
    """A causal language model as pglab's samplers and trainers use it."""

    module: torch.nn.Module
    """The trainable model (parameters, train/eval, state_dict); may be a DDP wrapper."""
    max_length: int | None
    """Longest sequence the model takes (positions with an embedding), None when unbounded."""

    def logits(self, ids: torch.Tensor, start: int = 1, group_size: int = 1,
               attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """ids [B, T] -> logits [B, T - start, V] predicting ids[:, start:] (differentiable).

        ``attention_mask`` [B, T] is passed only when some prompt is left-padded (0 on the padding)."""
        ...

    def prefixes(self, sequences: list[list[int]]) -> Prefixes:
        """A decoding state for rows that start as ``sequences`` (fed with the first ``extend``)."""
        ...


class TinyAgentPrefixes:
    """TinyAgent's incremental decoding through its KVCache: rows advance at their own positions."""

    def __init__(self, model: TinyAgent, rows: int, pad_id: int = 0):
        self.model, self.pad_id = model, pad_id
        self.cache = KVCache(model.config, rows)
        self.rows = list(range(rows))                        # the row of the caller held by each cache row

    def extend(self, rows: list[int], chunks: list[list[int]]) -> torch.Tensor:
        """Feed chunks in groups of similar length (a group starts when the length falls below half of its
        longest), so one long tool answer does not pad every row."""
        order = sorted(range(len(chunks)), key=lambda j: -len(chunks[j]))
        groups = [[order[0]]]
        for j in order[1:]:
            if 2 * len(chunks[j]) < len(chunks[groups[-1][0]]):
                groups.append([])
            groups[-1].append(j)
        if len(groups) == 1:
            groups = [list(range(len(chunks)))]                     # keep the order: rows=None needs no gather
        last = None
        for group in groups:
            ids, lengths = right_padded([chunks[j] for j in group], self.pad_id)
            members = [rows[j] for j in group]
            index = None if members == self.rows else torch.tensor([self.rows.index(e) for e in members])
            logits = self.model(ids, self.cache, rows=index, lengths=lengths)[torch.arange(len(group)), lengths - 1]
            if last is None:
                last = logits.new_empty(len(rows), logits.shape[-1])
            last[torch.tensor(group)] = logits
        return last

    def keep(self, rows: list[int]) -> None:
        if rows != self.rows:
            self.cache.keep(torch.tensor([self.rows.index(e) for e in rows], dtype=torch.long))
        self.rows = list(rows)


class RecomputedPrefixes:
    """Decoding without a cache: every call runs each row's whole sequence (the reference caches are tested against)."""

    def __init__(self, policy: TokenPolicy, rows: int, pad_id: int = 0):
        self.policy, self.pad_id = policy, pad_id
        self.sequences: dict[int, list[int]] = {r: [] for r in range(rows)}

    def extend(self, rows: list[int], chunks: list[list[int]]) -> torch.Tensor:
        for r, chunk in zip(rows, chunks):
            self.sequences[r] = self.sequences[r] + list(chunk)
        ids, lengths = right_padded([self.sequences[r] for r in rows], self.pad_id)
        ids = torch.cat([ids, ids.new_full((len(rows), 1), self.pad_id)], 1)   # logits after the last real token
        logits = self.policy.logits(ids, start=1)
        return logits[torch.arange(len(rows)), lengths - 1]

    def keep(self, rows: list[int]) -> None:
        self.sequences = {r: self.sequences[r] for r in rows}


class HFPrefixes:
    """Any HF causal LM's incremental decoding through its own KV cache, rows at their own positions.

    Each ``extend`` feeds every live row, right-padded to the longest chunk (rows with nothing new
    get padding only); the attention mask marks the padding, which stays in the cache as holes
    that no later token attends to, and ``position_ids`` count each row's real tokens only.
    """

    def __init__(self, policy: HFPolicy, rows: int):
        self.policy = policy
        self.rows = list(range(rows))
        self.cache = None
        self.attention = torch.zeros(rows, 0, dtype=torch.long)
        self.length = torch.zeros(rows, dtype=torch.long)

    def extend(self, rows: list[int], chunks: list[list[int]]) -> torch.Tensor:
        model = unwrap(self.policy.module)
        device = next(model.parameters()).device
        ids, real, place = turn_rows(self.rows, rows, chunks, self.policy.pad_id)
        new = real.long()
        positions = self.length[:, None] + new.cumsum(1) - 1
        self.attention = torch.cat([self.attention, new], 1)
        with autocast(device):
            out = model(input_ids=ids.to(device), attention_mask=self.attention.to(device),
                        position_ids=positions.clamp(min=0).to(device), use_cache=True,
                        **({cache_keyword(model): self.cache} if self.cache is not None else {}))
        self.cache = cache_of(out)
        self.length += new.sum(1)
        last = torch.tensor([len(c) - 1 for c in chunks])
        return shape_logits(full_precision(out.logits[torch.tensor(place), last]), self.policy.banned,
                            self.policy.temperature, self.policy.top_p)

    def keep(self, rows: list[int]) -> None:
        if rows == self.rows:
            return
        index = torch.tensor([self.rows.index(r) for r in rows], dtype=torch.long)
        self.cache.batch_select_indices(index.to(next(unwrap(self.policy.module).parameters()).device))
        self.attention, self.length, self.rows = self.attention[index], self.length[index], list(rows)


def right_padded(chunks: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids [n, longest] right-padded with ``pad_id``, lengths [n])."""
    lengths = torch.tensor([len(c) for c in chunks])
    ids = torch.full((len(chunks), int(lengths.max())), pad_id, dtype=torch.long)
    for b, c in enumerate(chunks):
        ids[b, : len(c)] = torch.tensor(c, dtype=torch.long)
    return ids, lengths


class TinyAgentPolicy:
    """TinyAgent as a TokenPolicy; ``use_cache=False`` decodes by recomputing every prefix."""

    def __init__(self, model: torch.nn.Module, use_cache: bool = True, pad_id: int = 0):
        self.module, self.use_cache, self.pad_id = model, use_cache, pad_id
        self.max_length = unwrap(model).config.block_size

    def logits(self, ids: torch.Tensor, start: int = 1, group_size: int = 1,
               attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is not None:
            raise ValueError("TinyAgent takes no left-padded prompts: pass rows that start with their first token")
        return self.module(ids)[:, start - 1:-1]

    def prefixes(self, sequences: list[list[int]]) -> Prefixes:
        if self.use_cache:
            return TinyAgentPrefixes(unwrap(self.module), len(sequences), self.pad_id)
        return RecomputedPrefixes(self, len(sequences), self.pad_id)


class HFPolicy:
    """A Hugging Face causal LM (or its DDP wrapper) as a TokenPolicy: softmax(logits / temperature) with
    ``banned`` ids at probability 0, cut to the ``top_p`` nucleus and renormalised, in scoring and sampling alike."""

    def __init__(self, model: torch.nn.Module, *, banned: torch.Tensor | None = None, pad_id: int = 0,
                 use_cache: bool = True, temperature: float = 1.0, top_p: float = 1.0):
        if not temperature > 0 or not 0 < top_p <= 1:
            raise ValueError(f"pass temperature > 0 and 0 < top_p <= 1, got {temperature} and {top_p}")
        self.module, self.banned, self.pad_id, self.use_cache = model, banned, pad_id, use_cache
        self.temperature, self.top_p = temperature, top_p
        config = unwrap(model).config
        self.max_length = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)

    def logits(self, ids: torch.Tensor, start: int = 1, group_size: int = 1,
               attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """ids [B, T] -> shaped logits [B, T - start, V]; ``attention_mask`` [B, T] only for left-padded prompts.

        With top_p < 1 the token each position predicts (ids[:, start:]) stays in the nucleus, so a
        sampled token at the nucleus edge never scores -inf under float rounding.
        """
        raw = reply_logits(self.module, ids, start, group_size, attention_mask)
        keep = ids[:, start:] if self.top_p < 1 else None
        return shape_logits(raw, self.banned, self.temperature, self.top_p, keep, in_place=True)

    def prefixes(self, sequences: list[list[int]]) -> Prefixes:
        """Decoding through the model's own KV cache, or, for a ``plain_gpt2`` model on the CPU, through
        ``GPT2Prefixes`` (its blocks over plain buffers: the same logits up to float rounding, without HF's
        per-call overhead); ``use_cache=False``: by recomputing every prefix."""
        if not self.use_cache:
            return RecomputedPrefixes(self, len(sequences), self.pad_id)
        model = unwrap(self.module)
        if plain_gpt2(model) and model.lm_head.weight.device.type == "cpu":
            return GPT2Prefixes(model, len(sequences), self.pad_id, partial(
                shape_logits, banned=self.banned, temperature=self.temperature, top_p=self.top_p))
        return HFPrefixes(self, len(sequences))


def as_policy(model: torch.nn.Module | TokenPolicy) -> TokenPolicy:
    """A TokenPolicy for ``model``: itself if it is one, TinyAgentPolicy for a TinyAgent, else HFPolicy."""
    if hasattr(model, "prefixes") and hasattr(model, "logits"):
        return model
    if isinstance(unwrap(model), TinyAgent):
        return TinyAgentPolicy(model)
    if hasattr(unwrap(model), "config") and hasattr(unwrap(model), "get_output_embeddings"):
        return HFPolicy(model)
    raise ValueError(f"{type(model).__name__} is not a token policy: pass a TinyAgent, a Hugging Face causal LM "
                     "or an object with logits() and prefixes()")


__all__ = ["HFPolicy", "HFPrefixes", "Prefixes", "RecomputedPrefixes", "TinyAgentPolicy", "TinyAgentPrefixes",
           "TokenPolicy", "as_policy", "right_padded"]
