"""The embedded default of ``pglab train-lm``: a tiny GPT-2 pretrained on the synthetic VADER-lexicon review corpus.

Nothing is downloaded. The corpus comes from :mod:`pglab.data.reviews`; a byte-level BPE
tokenizer is trained on it with ``tokenizers``; a ``GPT2LMHeadModel`` a few layers deep and
about 128 wide is trained on it by next-token prediction; both are saved with
``save_pretrained`` under the cache folder (``$PGLAB_CACHE``, else ``~/.cache/pglab``), so the
RL trainer loads the default through the same ``from_pretrained`` path as any other model.
The build is deterministic for a given size and seed; the folder name carries a hash of the
size and of the corpus version, so changing either rebuilds instead of reusing a stale model.
Prompts are review openings from reviews generated with other seeds than the pretraining corpus
(held-out text).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from pglab.data.reviews import VERSION, reviews
from pglab.runtime.locks import build_once
from pglab.runtime.progress import track

EOS = "<|endoftext|>"
CORPUS_SEED, TRAIN_PROMPT_SEED, EVAL_PROMPT_SEED = 0, 1, 2
"""Seeds of the pretraining corpus and of the held-out reviews the train and eval prompts open."""


@dataclass(frozen=True)
class DefaultSize:
    """How big the embedded default is and how long it is pretrained."""

    layers: int
    """Transformer blocks."""
    width: int
    """Embedding width (n_embd)."""
    heads: int
    """Attention heads."""
    vocab: int
    """BPE vocabulary size (including the 256 byte tokens and end-of-text)."""
    reviews: int
    """Reviews in the pretraining corpus."""
    steps: int
    """Pretraining steps."""
    batch: int
    """Windows per pretraining step."""
    window: int
    """Tokens per window (also n_positions)."""
    lr: float
    """Peak AdamW learning rate (linear warm-up over 5% of the steps, cosine decay to 10%)."""
    seed: int = 0
    """Seed of the initial weights and the window draws."""


SIZES = {
    "full": DefaultSize(layers=2, width=128, heads=4, vocab=2048, reviews=20_000, steps=100, batch=32, window=64,
                        lr=3e-3),
    "quick": DefaultSize(layers=1, width=64, heads=2, vocab=512, reviews=2_000, steps=120, batch=16, window=48,
                         lr=5e-3),
}
"""``full`` is the default of ``train-lm`` and ``lm-kl``; ``quick`` is for tests and ``--quick`` (seconds). ``full``
stops at 100 steps, where its samples have more than 3 nats of entropy a token (real text's level, llm-ch6's GPT-2
has 4.1); on the first version of the corpus six times as many steps brought it below 2 nats, too narrow for lm-kl's
collapse."""


def cache_root() -> Path:
    """``$PGLAB_CACHE`` or ``~/.cache/pglab``."""
    return Path(os.environ.get("PGLAB_CACHE") or Path.home() / ".cache" / "pglab")


def default_model_dir(size: str = "full") -> Path:
    """Where the embedded default of this size lives (built or not)."""
    spec = _size(size)
    digest = hashlib.sha256(json.dumps({**asdict(spec), "corpus": VERSION}, sort_keys=True).encode()).hexdigest()[:10]
    return cache_root() / f"lm-default-{size}-{digest}"


def _size(size: str) -> DefaultSize:
    if size not in SIZES:
        raise ValueError(f"unknown default size {size!r}; pass one of {', '.join(SIZES)}")
    return SIZES[size]


def train_tokenizer(texts: list[str], vocab: int, whole_words: bool = False, pieces: str | None = None):
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``texts``, end-of-text as eos/bos/pad.

    ``whole_words``: merges may cross punctuation inside a space-separated word (``fix_init``,
    ``</call>`` can become one token); by default GPT-2's pre-tokenizer splits letters from
    punctuation first. ``pieces`` (a regex; overrides ``whole_words``): merges stay inside its matches.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pieces or r" ?[^\s]+|\s+"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ]) if whole_words or pieces else pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=EOS,
                                   unk_token=EOS)


def pretrain(spec: DefaultSize, folder: Path, progress: bool = True) -> dict:
    """Build the tokenizer and the tiny GPT-2 of ``spec`` and save both into ``folder``; returns stats."""
    from transformers import GPT2Config, GPT2LMHeadModel

    start = time.perf_counter()
    texts = reviews(spec.reviews, CORPUS_SEED)
    tokenizer = train_tokenizer(texts, spec.vocab)
    eos = tokenizer.eos_token_id
    stream = torch.tensor([t for ids in tokenizer(texts)["input_ids"] for t in [*ids, eos]], dtype=torch.long)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=spec.window, n_embd=spec.width, n_layer=spec.layers,
                        n_head=spec.heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    torch.manual_seed(spec.seed)
    model = GPT2LMHeadModel(config)
    gen = torch.Generator().manual_seed(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)
    warmup = max(1, spec.steps // 20)

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, spec.steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    offsets = torch.arange(spec.window)
    losses = []
    model.train()
    for _ in track(range(spec.steps), "pretraining the tiny GPT-2", total=spec.steps) if progress \
            else range(spec.steps):
        starts = torch.randint(0, len(stream) - spec.window, (spec.batch,), generator=gen)
        batch = stream[starts[:, None] + offsets]
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    tail = losses[-max(1, len(losses) // 10):]
    stats = {"size": asdict(spec), "corpus_tokens": len(stream),
             "parameters": sum(p.numel() for p in model.parameters()), "final_loss": sum(tail) / len(tail),
             "seconds": time.perf_counter() - start}
    (folder / "pretrain.json").write_text(json.dumps(stats, indent=1))
    return stats


def ensure_default_model(size: str = "full", force: bool = False, progress: bool = True) -> Path:
    """The folder of the embedded default, pretrained on first use (:func:`~pglab.runtime.locks.build_once`: one
    process builds it, in a temporary folder renamed into place; others started beside it wait and load it)."""
    folder = default_model_dir(size)
    if (folder / "pretrain.json").exists() and not force:
        return folder
    return build_once(folder, lambda tmp: pretrain(_size(size), tmp, progress=progress), "pretrain.json", force)


def save_random_gpt2(folder: Path, *, vocab: int = 257, layers: int = 2, width: int = 128, heads: int = 4,
                     positions: int = 64, seed: int = 0) -> None:
    """Save an untrained GPT2LMHeadModel and a BPE tokenizer of ``vocab`` ids (257: bytes only) into ``folder``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = train_tokenizer(reviews(200, CORPUS_SEED), vocab)
    eos = tokenizer.eos_token_id
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=positions, n_embd=width,
                                       n_layer=layers, n_head=heads, resid_pdrop=0.0, embd_pdrop=0.0,
                                       attn_pdrop=0.0, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def review_openings(split: str, n: int) -> list[str]:
    """``n`` held-out synthetic reviews (never in the pretraining corpus) for ``split`` = train | eval.

    The trainer keeps their first ``prompt_length`` tokens as the prompts.
    """
    seeds = {"train": TRAIN_PROMPT_SEED, "eval": EVAL_PROMPT_SEED}
    if split not in seeds:
        raise ValueError(f"unknown prompt split {split!r}; pass train or eval")
    return reviews(n, seeds[split])
