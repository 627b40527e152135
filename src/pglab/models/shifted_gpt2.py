"""GPT-2 whose every input position also carries the previous token: the tool-use agent's model.

An agent copies its arguments from the prompt and the observations, often a token at a time (a
number digit by digit). Copying needs an induction head: at the current token, attend to the
position just after an earlier occurrence of that token and repeat what stands there. A plain
GPT-2 must first grow, in a lower layer, a head that moves each token's identity one position on;
on the tool-use corpus a 2-layer, 64-wide GPT-2 had barely begun after 2,000 cloning steps (an
argument digit given probability above one half 11% of the time). Here the input embedding at
position t is ``wte(x_t) + prev_wte(x_{t-1})``, a second embedding table of the previous token, so
the first attention layer can match "the token before j" against "my token" at once (the
smeared-key idea of the induction-head literature, at the input): 78% after 2,000 steps
(``scripts/copy_probe.py``, docs/results/tool-agent/copy-probe.txt).

The previous token is the previous *real* token of the row (``attention_mask`` 1): left padding
and the holes of incremental decoding are skipped, and the first real token has none (a zero
vector). Incremental decoding keeps each row's last real token in the cache object the model
returns (:class:`ShiftedCache`), which follows the cache's row selection and repetition.

With ``previous_tokens = K`` > 1, tables ``prev2_wte`` ... ``prevK_wte`` add the tokens 2 ... K real positions
back, so a head can match K tokens of context at once. One-token matching copies the wrong continuation wherever a
piece occurs twice (a word and its reverse share pieces: after ``dd`` in ``elddas`` it continues with ``le``, from
``saddle``); matching the last two tokens tells the occurrences apart, and the last three tell where a run of one
digit ends (``3000``: after ``0 0`` comes ``0`` or the end; after ``3 0 0`` and ``0 0 0`` it is clear).
"""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, GPT2Config, GPT2LMHeadModel

MODEL_TYPE = "pglab_shifted_gpt2"


class ShiftedGPT2Config(GPT2Config):
    """GPT2Config of :class:`ShiftedGPT2LMHeadModel`: GPT-2's fields and ``previous_tokens``, how many previous real
    tokens each position embeds (1 to MAX_PREVIOUS)."""

    model_type = MODEL_TYPE
    MAX_PREVIOUS = 4

    def __init__(self, previous_tokens: int = 1, **kwargs):
        if previous_tokens not in range(1, self.MAX_PREVIOUS + 1):
            raise ValueError(f"previous_tokens must be 1 to {self.MAX_PREVIOUS}, got {previous_tokens!r}")
        self.previous_tokens = previous_tokens
        super().__init__(**kwargs)


class ShiftedCache(DynamicCache):
    """A DynamicCache that also holds each row's last real token ids (``last_ids`` [B, K], the latest first; -1:
    none yet)."""

    last_ids: torch.Tensor | None = None

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        if self.last_ids is not None:
            self.last_ids = self.last_ids[indices.to(self.last_ids.device)]

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        if self.last_ids is not None:
            self.last_ids = self.last_ids.repeat_interleave(repeats, 0)


def previous_real(ids: torch.Tensor, real: torch.Tensor, carried: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each position, the ids of the last K real tokens before it, the latest first; ``carried`` [B, K] holds
    each row's last K real ids before ``ids`` (the same order). ids, real [B, L] -> (previous ids [B, L, K], each
    row's last K real ids [B, K]); -1 means none."""
    rows, length = ids.shape
    k = carried.shape[1]
    ext_ids = torch.cat([carried.flip(1), ids, ids.new_full((rows, 1), -1)], 1)      # carried, ids, one slot after
    ext_real = torch.cat([carried.flip(1) >= 0, real, real.new_zeros((rows, 1))], 1)
    positions = torch.arange(ext_ids.shape[1], device=ids.device).expand(rows, -1)
    last_at = torch.where(ext_real, positions, -1).cummax(1).values      # last real index at or before t
    found, before = [], torch.cat([last_at.new_full((rows, 1), -1), last_at[:, :-1]], 1)
    for _ in range(k):
        found.append(torch.where(before >= 0, ext_ids.gather(1, before.clamp(min=0)), -1))
        before = torch.where(before > 0, last_at.gather(1, (before - 1).clamp(min=0)), -1)
    previous = torch.stack(found, -1)
    return previous[:, k:k + length], previous[:, -1]


class ShiftedGPT2LMHeadModel(GPT2LMHeadModel):
    """GPT2LMHeadModel with ``prev_wte``, an embedding of the previous real token added to every input (and
    ``prev2_wte`` ... ``prevK_wte``, the ones before it, when ``config.previous_tokens`` is K > 1)."""

    config_class = ShiftedGPT2Config

    def __init__(self, config: GPT2Config):
        super().__init__(config)
        for name in self.previous_tables():
            setattr(self, name, torch.nn.Embedding(config.vocab_size, config.n_embd))
            getattr(self, name).weight.data.normal_(0.0, config.initializer_range)

    def previous_tables(self) -> list[str]:
        """The names of the previous-token tables, the latest token's first: prev_wte, prev2_wte, ..."""
        return ["prev_wte", *(f"prev{j}_wte" for j in range(2, self.config.previous_tokens + 1))]

    def _previous_embeds(self, previous: torch.Tensor) -> torch.Tensor:
        """previous [B, L, K] (-1: none) -> the sum of their embeddings [B, L, n_embd]."""
        return sum(getattr(self, name)(previous[..., j].clamp(min=0)) * (previous[..., j] >= 0)[..., None]
                   for j, name in enumerate(self.previous_tables()))

    def forward(self, input_ids: torch.Tensor | None = None, cache: DynamicCache | None = None,
                attention_mask: torch.Tensor | None = None, use_cache: bool | None = None,
                logits_to_keep: int | torch.Tensor = 0, **kwargs):
        if input_ids is None or kwargs.get("inputs_embeds") is not None:
            raise ValueError("ShiftedGPT2LMHeadModel needs input_ids (the previous token is part of its input); "
                             "pass input_ids, not inputs_embeds")
        rows, length = input_ids.shape
        if cache is not None and not isinstance(cache, ShiftedCache) \
                and cache.get_seq_length() > 0:
            raise ValueError("pass back the ShiftedCache this model returned: another cache does not know each "
                             "row's last token")
        if cache is None and (use_cache if use_cache is not None else self.config.use_cache):
            cache = ShiftedCache()
        carried = getattr(cache, "last_ids", None)
        if carried is None:
            carried = input_ids.new_full((rows, self.config.previous_tokens), -1)
        real = (attention_mask[:, -length:] > 0) if attention_mask is not None else torch.ones_like(input_ids,
                                                                                                     dtype=torch.bool)
        previous, last = previous_real(input_ids, real, carried)
        if isinstance(cache, ShiftedCache):
            cache.last_ids = last
        embeds = self.transformer.wte(input_ids) + self._previous_embeds(previous)
        return super().forward(inputs_embeds=embeds, cache=cache, attention_mask=attention_mask,
                               use_cache=use_cache, logits_to_keep=logits_to_keep, **kwargs)


def register() -> None:
    """Let AutoConfig and AutoModelForCausalLM load a saved ShiftedGPT2LMHeadModel (idempotent)."""
    try:
        AutoConfig.register(MODEL_TYPE, ShiftedGPT2Config)
        AutoModelForCausalLM.register(ShiftedGPT2Config, ShiftedGPT2LMHeadModel)
    except ValueError:      # registered already
        pass


register()

__all__ = ["ShiftedCache", "ShiftedGPT2Config", "ShiftedGPT2LMHeadModel", "previous_real", "register"]
