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
"""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, GPT2Config, GPT2LMHeadModel

MODEL_TYPE = "pglab_shifted_gpt2"


class ShiftedGPT2Config(GPT2Config):
    """GPT2Config of :class:`ShiftedGPT2LMHeadModel` (the same fields)."""

    model_type = MODEL_TYPE


class ShiftedCache(DynamicCache):
    """A DynamicCache that also holds each row's last real token id (``last_ids`` [B], -1: none yet)."""

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
    """For each position, the id of the last real token before it (``carried`` [B] where the row has none in
    ``ids``); ids, real [B, L] -> (previous ids [B, L], each row's last real id [B]); -1 means none."""
    rows, length = ids.shape
    positions = torch.arange(length, device=ids.device).expand(rows, length)
    last_at = torch.where(real, positions, -1).cummax(1).values          # last real index at or before t
    before = torch.cat([last_at.new_full((rows, 1), -1), last_at[:, :-1]], 1)
    previous = torch.where(before >= 0, ids.gather(1, before.clamp(min=0)), carried[:, None])
    final = last_at[:, -1:]
    last = torch.where(final[:, 0] >= 0, ids.gather(1, final.clamp(min=0))[:, 0], carried)
    return previous, last


class ShiftedGPT2LMHeadModel(GPT2LMHeadModel):
    """GPT2LMHeadModel with ``prev_wte``, an embedding of the previous real token added to every input."""

    config_class = ShiftedGPT2Config

    def __init__(self, config: GPT2Config):
        super().__init__(config)
        self.prev_wte = torch.nn.Embedding(config.vocab_size, config.n_embd)
        self.prev_wte.weight.data.normal_(0.0, config.initializer_range)

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
            carried = input_ids.new_full((rows,), -1)
        real = (attention_mask[:, -length:] > 0) if attention_mask is not None else torch.ones_like(input_ids,
                                                                                                     dtype=torch.bool)
        previous, last = previous_real(input_ids, real, carried)
        if isinstance(cache, ShiftedCache):
            cache.last_ids = last
        embeds = self.transformer.wte(input_ids) + self.prev_wte(previous.clamp(min=0)) * (previous >= 0)[..., None]
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
