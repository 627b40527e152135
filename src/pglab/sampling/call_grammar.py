"""Constrained calls: the next tokens that keep a call well formed, with arguments copied from the context.

With ``--calls constrained`` a turn of the tool-use agent is either end-of-text or one call
``<call> TOOL ARG ... </call>`` in which TOOL is a tool the prompt names in that syntax, the number of
arguments is one its usages show (``[name]`` marks an optional one, as the TRL adapter writes it), and each
argument is a whole word of what the agent has seen: the prompt and the observations so far (words are split at
whitespace and stripped of surrounding punctuation; ``-3`` stays a number). A usage's argument names
(``VALUE`` and ``UNIT`` in ``<call> convert VALUE UNIT </call>``) are not values: a word written only inside usages
is no argument, unless it is a literal option, one of the different words that one tool's usages show at one place
(``<call> answer yes </call>`` or ``<call> answer no </call>``). The policy is the model's
distribution renormalised over the allowed tokens, ``pi_c(t | s) = pi(t | s) 1[t in A(s)] / pi(A(s) | s)``,
and that is what is sampled and what the update scores (``TokenBatch.allowed`` carries each position's set).

The rule is at the level of text: a token is allowed when the call's text so far followed by the token's text
is a prefix of some valid call. :meth:`CallGrammar.allowed` enumerates the continuations of the current and next
word and looks every prefix of each up in the tokenizer's texts, so a step costs a few hundred dictionary
lookups whatever the vocabulary size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

OPEN, CLOSE = "<call>", "</call>"
_USAGE = re.compile(r"<call>\s*([A-Za-z_][\w.-]*)([^<]*)</call>")
_NAMED = re.compile(r"<call>\s*([A-Za-z_][\w.-]*)")
PUNCTUATION = ".,;:!?\"'()[]{}"
"""Stripped from both ends of a context word (a leading ``-`` stays: ``-3`` is a number)."""
MAX_ARGUMENTS = 3
"""Arguments allowed to a tool the prompt names without a closed usage."""


def context_words(text: str) -> set[str]:
    """The words of ``text`` an argument may copy: whitespace-split, surrounding punctuation stripped, no tag."""
    words = (word.strip(PUNCTUATION) for word in text.split())
    return {word for word in words if word and "<" not in word and ">" not in word}


def argument_words(text: str) -> set[str]:
    """The words of ``text`` an argument may copy: its :func:`context_words` outside usages, and the literal options
    of its usages (the words that one tool's usages show at one argument place, when they show two or more)."""
    shown: dict[tuple[str, int], set[str]] = {}
    for name, rest in _USAGE.findall(text):
        for place, word in enumerate(rest.split()):
            shown.setdefault((name, place), set()).update(context_words(word))
    options = {word for words in shown.values() if len(words) > 1 for word in words}
    return context_words(_USAGE.sub(" ", text)) | options


def tool_arities(prompt: str) -> dict[str, tuple[int, int]]:
    """{tool: (fewest, most) arguments} over the tools ``prompt`` names as ``<call> NAME``: from its usages
    ``<call> NAME ARG ... </call>`` (a word in brackets is optional), else 0 to MAX_ARGUMENTS."""
    arities: dict[str, tuple[int, int]] = {}
    for name, rest in _USAGE.findall(prompt):
        words = rest.split()
        low, high = sum(not (w.startswith("[") and w.endswith("]")) for w in words), len(words)
        old = arities.get(name, (low, high))
        arities[name] = (min(old[0], low), max(old[1], high))
    return {name: arities.get(name, (0, MAX_ARGUMENTS)) for name in dict.fromkeys(_NAMED.findall(prompt))}


@dataclass(frozen=True)
class TokenTexts:
    """A tokenizer's vocabulary as text: which ids decode to each string, and end-of-text."""

    ids_of: dict[str, tuple[int, ...]]
    """Every non-empty token text -> the ids that decode to it."""
    eos: int | None
    """End-of-text (allowed as a whole turn), or None."""

    @classmethod
    def of(cls, tokenizer) -> TokenTexts:
        ids_of: dict[str, list[int]] = {}
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        for i in range(len(tokenizer)):
            if i in special:
                continue
            text = tokenizer.decode([i])
            if text and "\ufffd" not in text:
                ids_of.setdefault(text, []).append(i)
        return cls({text: tuple(ids) for text, ids in ids_of.items()}, tokenizer.eos_token_id)


class CallGrammar:
    """The calls one episode allows; :meth:`observe` adds an observation's words, :meth:`allowed` the next ids."""

    def __init__(self, prompt: str, texts: TokenTexts):
        self.arities, self.texts = tool_arities(prompt), texts
        self.words = argument_words(prompt)
        self._cache: dict[str, tuple[int, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self.arities)

    def observe(self, observation: str) -> None:
        """The agent has seen ``observation``: its :func:`argument_words` become arguments too."""
        new = argument_words(observation) - self.words
        if new:
            self.words |= new
            self._cache.clear()

    def _choices(self, done: Sequence[str]) -> frozenset[str] | set[str]:
        """The words allowed after the complete words ``done`` of a call."""
        if not done:
            return frozenset((OPEN,))
        if len(done) == 1:
            return self.arities.keys()
        if done[-1] == CLOSE or done[1] not in self.arities:
            return frozenset()
        low, high = self.arities[done[1]]
        given = len(done) - 2
        return (self.words if given < high else set()) | ({CLOSE} if given >= low else set())

    def _whole(self, words: Sequence[str]) -> bool:
        """Whether ``words`` are the first whole words of a valid call."""
        return all(word in self._choices(words[:i]) for i, word in enumerate(words))

    def continuations(self, text: str) -> set[str]:
        """Every string that, written after ``text`` (a call so far), completes the current word, or completes it
        and writes the next with its space; empty when ``text`` is not the start of a valid call."""
        *done, partial = text.split(" ")
        if not self._whole(done):
            return set()
        here = self._choices(done)
        out = {word[len(partial):] for word in here if word.startswith(partial)}
        if partial in here:
            out |= {" " + word for word in self._choices([*done, partial])}
        return out

    def between_words(self, text: str) -> bool:
        """Whether the call text ``text`` ends with a whole word of a valid call (``<call>``, a tool, an argument):
        where the next token may start a new word, the places where a call chooses."""
        words = text.split(" ")
        return self._whole(words) and words[-1] != CLOSE

    def allowed(self, text: str) -> tuple[int, ...]:
        """The ids allowed after the call text ``text`` (sorted): those whose text is a prefix of a continuation,
        and end-of-text before anything is written."""
        if text not in self._cache:
            ids = {i for c in self.continuations(text) for k in range(1, len(c) + 1)
                   for i in self.texts.ids_of.get(c[:k], ())}
            if text == "" and self.texts.eos is not None:
                ids.add(self.texts.eos)
            self._cache[text] = tuple(sorted(ids))
        return self._cache[text]


class AllowedTable:
    """Distinct allowed-id sets of a batch, numbered from 1 (0: every id)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, ...], int] = {}

    def index(self, ids: tuple[int, ...]) -> int:
        return self.rows.setdefault(ids, len(self.rows) + 1)

    def table(self, vocab: int) -> torch.Tensor:
        """[1 + sets, vocab] bool, row 0 all True."""
        out = torch.zeros((len(self.rows) + 1, vocab), dtype=torch.bool)
        out[0] = True
        for ids, row in self.rows.items():
            out[row, list(ids)] = True
        return out


__all__ = ["AllowedTable", "CallGrammar", "MAX_ARGUMENTS", "TokenTexts", "context_words", "tool_arities"]
