"""Prompts for ``train_lm``: text files, ``datasets`` datasets, chat templates, tokenising and left padding.

``--prompts`` names a ``.txt`` file (one prompt a line), a ``.jsonl`` / ``.json`` / ``.parquet``
file or a folder written by ``Dataset.save_to_disk`` (the last three read with ``datasets``). The
prompt column holds text or chat messages (a list of ``{"role", "content"}``); the other columns
travel with each prompt and reach the reward functions as keyword arguments, one value per
completion, as in TRL. Chat messages go through the tokenizer's chat template with the generation
prompt appended (``--chat-template auto``, TRL's rule); ``always`` wraps text prompts as one user
message too. Prompts are tokenised without special tokens (as TRL does) and used whole unless
``--prompt-length`` cuts them; the prompts of one step are left-padded to the longest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pglab.runtime.options import SettingsError
from pglab.trainers.lm.config import RLConfig

DATASET_SUFFIXES = (".jsonl", ".json", ".parquet")
REVIEW_PROMPT_TOKENS = 8
"""The synthetic review prompts are openings: their first 8 tokens (when --prompt-length is None)."""


@dataclass
class PromptSet:
    """Tokenised prompts with what the rewards see of them."""

    ids: list[list[int]]
    """Token ids of each prompt (after the chat template and any cut)."""
    texts: list[str]
    """The prompt text the model reads (templated)."""
    raw: list[Any]
    """Each prompt as in the data: text or chat messages (TRL's ``prompts`` argument)."""
    columns: dict[str, list] = field(default_factory=dict)
    """The dataset's other columns, one value per prompt."""
    conversational: bool = False

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def longest(self) -> int:
        return max(len(x) for x in self.ids)

    def padded(self, index: list[int], pad_id: int, device: torch.device | str = "cpu",
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompts ``index`` left-padded to the longest: (ids [n, P] long, mask [n, P] long, 0 on padding)."""
        rows = [self.ids[i] for i in index]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for b, row in enumerate(rows):
            ids[b, width - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[b, width - len(row):] = 1
        return ids.to(device), mask.to(device)

    def subset(self, index: list[int]) -> PromptSet:
        return PromptSet([self.ids[i] for i in index], [self.texts[i] for i in index], [self.raw[i] for i in index],
                         {k: [v[i] for i in index] for k, v in self.columns.items()}, self.conversational)


def is_messages(value: Any) -> bool:
    """Whether a prompt is chat messages: a list of dicts with role and content."""
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value)


def check_prompts_source(cfg: RLConfig) -> None:
    """Refuse, before any work, a --prompts that does not exist or needs a missing package."""
    if cfg.prompts is None:
        return
    path = Path(cfg.prompts)
    if not path.exists():
        raise SettingsError(f"--prompts {cfg.prompts}: no such file or folder; pass a .txt, .jsonl, .json or .parquet "
                            "file, or a folder written by Dataset.save_to_disk")
    if path.is_file() and path.suffix not in (".txt", *DATASET_SUFFIXES):
        raise SettingsError(f"--prompts {cfg.prompts}: unknown kind {path.suffix!r}; pass a .txt (one prompt a line), "
                            ".jsonl, .json or .parquet file, or a save_to_disk folder")
    if path.is_dir() or path.suffix in DATASET_SUFFIXES:
        try:
            import datasets  # noqa: F401
        except ImportError:
            raise SettingsError(f"--prompts {cfg.prompts} is read with the datasets package: "
                                "pip install 'pglab[lm]'") from None


def _dataset_rows(path: Path, column: str) -> tuple[dict[str, list], dict[str, list] | None]:
    """(train columns, eval columns or None) of a dataset file or save_to_disk folder."""
    import datasets

    try:
        if path.is_dir():
            data = datasets.load_from_disk(str(path))
        elif path.suffix == ".parquet":
            data = datasets.Dataset.from_parquet(str(path))
        else:
            data = datasets.Dataset.from_json(str(path))
    except Exception as err:  # noqa: BLE001 - datasets raises many kinds for an unreadable source
        raise SettingsError(f"--prompts {path}: cannot read it as a dataset ({str(err).splitlines()[0]}); "
                            "pass a .jsonl, .json or .parquet file or a save_to_disk folder") from None
    evaluation = None
    if isinstance(data, datasets.DatasetDict):
        names = list(data)
        held = next((n for n in ("test", "validation", "eval") if n in data), None)
        evaluation = data[held].to_dict() if held else None
        data = data["train" if "train" in data else names[0]]
    if column not in data.column_names:
        raise SettingsError(f"--prompt-column {column!r} is not a column of {path} (its columns: "
                            f"{', '.join(data.column_names)}); pass one of them")
    return data.to_dict(), evaluation


def read_prompts(cfg: RLConfig) -> tuple[dict[str, list], dict[str, list]]:
    """(train, eval) columns {name: values}, the prompts under cfg.prompt_column; a split is 7:1 when the data
    has no held-out split."""
    column = cfg.prompt_column
    if cfg.prompts is None:
        from pglab.models.default_lm import review_openings

        return ({column: review_openings("train", 4000)},
                {column: review_openings("eval", max(256, cfg.eval_prompts))})
    path = Path(cfg.prompts)
    if path.suffix == ".txt":
        train = {column: [s.strip() for s in path.read_text().splitlines() if s.strip()]}
        held = None
    else:
        train, held = _dataset_rows(path, column)
    if held is None:
        cut = len(train[column]) * 7 // 8
        train, held = ({k: v[:cut] for k, v in train.items()}, {k: v[cut:] for k, v in train.items()})
    return train, held


def templated(raw: list[Any], tokenizer: Any, mode: str, source: str) -> tuple[list[str], bool]:
    """The text the model reads for each prompt, and whether the prompts are chat messages."""
    messages = [is_messages(p) for p in raw]
    if any(messages) and not all(messages):
        raise SettingsError(f"the prompts of {source} mix text and chat messages; pass one kind")
    conversational = bool(messages) and all(messages)
    if not conversational and not all(isinstance(p, str) for p in raw):
        bad = next(p for p in raw if not isinstance(p, str))
        raise SettingsError(f"a prompt of {source} is {type(bad).__name__} ({str(bad)[:40]!r}); pass text or chat "
                            "messages (lists of {'role', 'content'})")
    if mode == "never" and conversational:
        raise SettingsError(f"the prompts of {source} are chat messages: pass --chat-template auto (not never)")
    if not conversational and mode != "always":
        return list(raw), False
    if getattr(tokenizer, "chat_template", None) is None:
        raise SettingsError(f"the prompts of {source} need a chat template and the tokenizer has none; pass a model "
                            "whose tokenizer has one, text prompts, or --chat-template auto")
    chats = raw if conversational else [[{"role": "user", "content": p}] for p in raw]
    texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    return texts, True


def tokenised(columns: dict[str, list], cfg: RLConfig, tokenizer: Any, split: str) -> PromptSet:
    """A PromptSet of one split: templated, tokenised without special tokens, cut when asked."""
    source = f"--prompts {cfg.prompts or '(synthetic reviews)'} ({split})"
    raw = columns[cfg.prompt_column]
    texts, conversational = templated(raw, tokenizer, cfg.chat_template, source)
    cut = cfg.prompt_length or (REVIEW_PROMPT_TOKENS if cfg.prompts is None else None)
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    keep = [i for i, x in enumerate(ids) if len(x) >= (cut or 1)]
    if not keep:
        raise SettingsError(f"no prompt of {source} has {cut or 1} tokens; pass a smaller --prompt-length "
                            "or longer prompts")
    rows = [ids[i][:cut] if cut else ids[i] for i in keep]
    shown = [tokenizer.decode(r) for r in rows] if cut else [texts[i] for i in keep]
    others = {k: [v[i] for i in keep] for k, v in columns.items() if k != cfg.prompt_column}
    return PromptSet(rows, shown, [raw[i] for i in keep], others, conversational)


def load_prompts(cfg: RLConfig, tokenizer: Any) -> tuple[PromptSet, PromptSet]:
    """(train, eval) PromptSets of cfg.prompts (see the module docstring)."""
    train, held = read_prompts(cfg)
    return tokenised(train, cfg, tokenizer, "train"), tokenised(held, cfg, tokenizer, "eval")


__all__ = ["DATASET_SUFFIXES", "PromptSet", "check_prompts_source", "is_messages", "load_prompts", "read_prompts",
           "templated", "tokenised"]
