"""TinyAgent: a small decoder-only transformer (nanoGPT style) with a key-value cache for sampling episodes.

The whole model is this file: pre-norm blocks of causal self-attention and an MLP, learned
position embeddings, and a linear output ``head``. The head is not tied to the token embedding
``tok_emb``: with a tied head, REINFORCE's pushes on the output rows of the call words also moved
their input embeddings, and the call format collapsed within 15 steps on one seed of two (valid
calls 0.97 -> 0.44, measured with Adam 2e-3); untied, the same seed trained to 0.75. ``forward``
runs either on whole sequences (training, ``cache=None``) or incrementally: each row of a batch
appends its new tokens at its own position in a :class:`KVCache`, so rows of different lengths
advance in lockstep without recomputing their prefixes.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"


@dataclass
class TinyConfig:
    """Shape of a TinyAgent."""

    vocab_size: int
    """Number of token ids (the tokenizer's vocab_size)."""
    block_size: int = 512
    """Longest sequence (positions with an embedding)."""
    n_layer: int = 2
    """Transformer blocks."""
    n_head: int = 4
    """Attention heads per block."""
    n_embd: int = 64
    """Width of the residual stream (a multiple of n_head)."""


class KVCache:
    """Keys and values of every layer for B rows: k[layer], v[layer] [B, H, S, hd]; ``length`` [B] tokens held.

    The position axis S grows on demand (by doubling); positions past a row's length hold zeros or
    stale padding, never read because attention is causal in position.
    """

    def __init__(self, config: TinyConfig, batch: int, size: int = 128, dtype: torch.dtype = torch.float32):
        shape = (batch, config.n_head, size, config.n_embd // config.n_head)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in range(config.n_layer)]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in range(config.n_layer)]
        self.length = torch.zeros(batch, dtype=torch.long)

    @property
    def size(self) -> int:
        return self.k[0].shape[2]

    def reserve(self, size: int) -> None:
        """Make room for at least ``size`` positions."""
        if size > self.size:
            grow = max(size, 2 * self.size) - self.size
            pad = lambda t: torch.cat([t, t.new_zeros(*t.shape[:2], grow, t.shape[3])], dim=2)  # noqa: E731
            self.k, self.v = [pad(k) for k in self.k], [pad(v) for v in self.v]

    def keep(self, rows: torch.Tensor) -> None:
        """Drop every row not in ``rows`` (long [n]), in place: finished episodes stop costing compute."""
        self.k = [k[rows] for k in self.k]
        self.v = [v[rows] for v in self.v]
        self.length = self.length[rows]


class CausalSelfAttention(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None,
                pos: torch.Tensor | None = None, rows: torch.Tensor | None = None,
                bias: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, L, C] -> [B, L, C].

        With a cache (k, v [B', H, S, hd]), the new keys and values go to positions ``pos`` [B, L]
        of cache rows ``rows`` (None: all, in order) and the queries attend to that row's keys
        through ``bias`` [B, 1, L, span] (0 where allowed, -inf elsewhere).
        """
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.n_head, C // self.n_head).unbind(2)   # each [B, L, H, hd]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)              # [B, H, L, hd]
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            k_all, v_all = cache
            index = torch.arange(B) if rows is None else rows
            k_all[index[:, None], :, pos] = k.transpose(1, 2)                            # advanced dims first
            v_all[index[:, None], :, pos] = v.transpose(1, 2)
            span = bias.shape[-1]
            keys = k_all[:, :, :span] if rows is None else k_all[rows, :, :span]          # [B, H, span, hd]
            values = v_all[:, :, :span] if rows is None else v_all[rows, :, :span]
            att = torch.softmax((q * q.shape[-1] ** -0.5) @ keys.transpose(-2, -1) + bias, dim=-1)
            y = att @ values
        return self.proj(y.transpose(1, 2).reshape(B, L, C))


class Block(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(),
                                 nn.Linear(4 * config.n_embd, config.n_embd))

    def forward(self, x: torch.Tensor, cache=None, pos=None, rows=None, bias=None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache, pos, rows, bias)
        return x + self.mlp(self.ln_2(x))


class TinyAgent(nn.Module):
    """Decoder-only transformer: token ids [B, L] -> next-token logits [B, L, vocab_size]."""

    def __init__(self, vocab_size: int | None = None, config: TinyConfig | None = None, **shape: int):
        super().__init__()
        if config is None:
            if vocab_size is None:
                raise ValueError("TinyAgent needs vocab_size (the tokenizer's) or a TinyConfig")
            config = TinyConfig(vocab_size, **shape)
        if config.n_embd % config.n_head:
            raise ValueError(f"n_embd {config.n_embd} must be a multiple of n_head {config.n_head}")
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():   # GPT-2: scale the residual projections by depth
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None, rows: torch.Tensor | None = None,
                lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, L, V] for ids [B, L].

        Without a cache, position t of every row attends to positions <= t. With a cache, row b of
        ``ids`` continues cache row ``rows[b]`` (default: all rows in order) from its ``length``; only
        the first ``lengths[b]`` tokens (default L) are kept, the rest are padding whose outputs
        are meaningless and whose keys are overwritten later.
        """
        B, L = ids.shape
        bias = None
        if cache is None:
            if L > self.config.block_size:
                raise ValueError(f"sequence of {L} tokens is longer than block_size {self.config.block_size}")
            pos = torch.arange(L)[None].expand(B, L)
        else:
            start = cache.length if rows is None else cache.length[rows]             # [B]
            pos = start[:, None] + torch.arange(L)[None]                              # [B, L]
            lengths = torch.full((B,), L) if lengths is None else lengths
            if int((start + lengths).max()) > self.config.block_size:
                raise ValueError(f"the sequence would pass block_size {self.config.block_size}")
            span = int(start.max()) + L
            cache.reserve(span)
            allowed = torch.arange(span)[None, None, :] <= pos[:, :, None]           # [B, L, span]
            bias = torch.zeros(allowed.shape).masked_fill_(~allowed, float("-inf"))[:, None]
        x = self.tok_emb(ids) + self.pos_emb(pos.clamp(max=self.config.block_size - 1))  # clamp: padding only
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else (cache.k[i], cache.v[i]), pos, rows, bias)
        if cache is not None:
            cache.length[slice(None) if rows is None else rows] += lengths
        return self.head(self.ln_f(x))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def save_pretrained(self, folder: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``folder``."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=1))
        save_file({k: v.detach().contiguous() for k, v in self.state_dict().items()}, str(folder / WEIGHTS_FILE))
        return folder

    @classmethod
    def from_pretrained(cls, folder: str | Path) -> TinyAgent:
        """A TinyAgent with the config and weights that :meth:`save_pretrained` wrote into ``folder``."""
        from safetensors.torch import load_file

        folder = Path(folder)
        model = cls(config=TinyConfig(**json.loads((folder / CONFIG_FILE).read_text())))
        model.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
        return model


__all__ = ["KVCache", "TinyAgent", "TinyConfig"]
