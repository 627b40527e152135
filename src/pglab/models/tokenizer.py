"""A word-level tokenizer built from what BugFixEnv actually shows: task texts, sources and observations.

Words are identifiers, digit runs and single punctuation characters; whitespace is dropped, so
``decode`` joins words with one space (a call such as ``<call> edit fix_init </call>`` round-trips
exactly). The vocabulary is collected by playing episodes in the environment (and a few
malformed calls, for its error messages), so it follows the observation text wherever it changes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pglab.envs.bugfix import CALLS, OP_NAMES, BugFixEnv, Task, scripted_policy, scripted_rollout

PAD, START, CALL, END_CALL, OBS, END_OBS, UNK = "<pad>", "<start>", "<call>", "</call>", "<obs>", "</obs>", "<unk>"
SPECIALS = (PAD, START, CALL, END_CALL, OBS, END_OBS, UNK)
"""Padding, start of an episode, call and observation boundaries, unknown word (ids 0..6, in this order)."""
GRAMMAR = ("read", "test", "edit", *OP_NAMES, "revert", "submit")
"""The words of the call grammar, right after the special tokens."""
PROBE_CALLS = ("<call> </call>", "<call> look </call>", "<call> edit nothing </call>", "<call> read now </call>",
               "call read")
"""Malformed calls played once per task so that the error observations are in the vocabulary."""
_WORD = re.compile(r"</?call>|</?obs>|<pad>|<start>|<unk>|[A-Za-z_][A-Za-z0-9_]*|\d+|\S")


def split_words(text: str) -> list[str]:
    """Text -> words: special tokens, identifiers, digit runs and single non-space characters."""
    return _WORD.findall(text)


class Tokenizer:
    """Word <-> id maps over a fixed vocabulary; id 0 is padding, unknown words map to ``<unk>``."""

    def __init__(self, vocab: Sequence[str]):
        if tuple(vocab[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with the special tokens {SPECIALS}")
        if len(set(vocab)) != len(vocab):
            raise ValueError("the vocabulary has repeated words")
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.pad_id, self.start_id, self.call_id, self.end_call_id, self.obs_id, self.end_obs_id, self.unk_id = (
            range(len(SPECIALS)))

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """Text -> token ids (unknown words -> ``unk_id``)."""
        return [self.index.get(w, self.unk_id) for w in split_words(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> words joined by single spaces (padding dropped)."""
        return " ".join(self.vocab[i] for i in map(int, ids) if i != self.pad_id)

    def save(self, path: str | Path) -> None:
        """Write the vocabulary as JSON."""
        Path(path).write_text(json.dumps({"vocab": self.vocab}, indent=0))

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """Read a vocabulary written by :meth:`save`."""
        return cls(json.loads(Path(path).read_text())["vocab"])

    def fingerprint(self) -> str:
        """A short hash of the vocabulary (part of the base agent's cache key)."""
        return hashlib.sha256("\n".join(self.vocab).encode()).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.vocab == other.vocab


def environment_texts(tasks: Sequence[Task], episodes_per_task: int = 8, seed: int = 0) -> list[str]:
    """Every text the environment shows on ``tasks``: issue, source, and the observations of played episodes.

    Plays ``episodes_per_task`` random and one oracle episode per task, plus :data:`PROBE_CALLS`.
    """
    texts: list[str] = []
    env = BugFixEnv(list(tasks))
    random, oracle = scripted_policy("random", seed), scripted_policy("oracle", seed)
    for task in tasks:
        texts += [task.issue, task.source, task.fixed]
        for policy in [oracle] + [random] * episodes_per_task:
            episode = scripted_rollout(policy, env, task)
            texts += [episode.prompt, *episode.observations]
        env.reset(options={"task": task})
        for call in PROBE_CALLS:
            texts.append(env.step(call)[0])
    return texts


def build_tokenizer(tasks: Sequence[Task], episodes_per_task: int = 8, seed: int = 0) -> Tokenizer:
    """A tokenizer over the special tokens, the call grammar and every word of :func:`environment_texts`."""
    words = {w for text in environment_texts(tasks, episodes_per_task, seed) for w in split_words(text)}
    words |= {w for call in CALLS for w in split_words(call)}
    fixed = list(SPECIALS) + list(GRAMMAR)
    return Tokenizer(fixed + sorted(words - set(fixed)))


__all__ = ["SPECIALS", "Tokenizer", "build_tokenizer", "environment_texts", "split_words"]
