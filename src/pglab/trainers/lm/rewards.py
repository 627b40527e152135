"""Rewards for the LM trainer: one or several functions, weighted, from ``--reward`` specs.

``vader``: the VADER compound score c in [-1, 1] (the ``vaderSentiment`` package; its lexicon
ships with it). ``vader-logit``: its log-odds, log((1 + c) / (1 - c)), so that more and stronger
sentiment keeps paying instead of saturating at 1, as a classifier's log-odds does (llm-ch6's
reward); VADER rounds c to 4 decimals, so c is held within +-0.9999 and the score within +-9.9.
``hf-classifier:PATH``: an ``AutoModelForSequenceClassification`` folder; the score is the
positive logit minus the negative logit (log-odds), and it also reports P(positive).
``module:function``: any importable Python callable (the current folder is on the import path),
in one of two forms, told apart by its signature:

- TRL's: ``fn(prompts, completions, **kwargs) -> list[float | None]`` (a function with a
  ``prompts`` or ``completions`` parameter, or ``**kwargs``). It receives the prompts as in the
  data (text or chat messages), the completions (text, or ``[{"role": "assistant", ...}]`` for
  chat prompts), ``completion_ids`` and every other dataset column, one value per completion.
- pglab's: ``fn(texts) -> floats``, one text (prompt + reply) per completion.

Several functions (``--reward a,b``) are summed with ``--reward-weights``; a None is left out of
that sum (TRL's rule: a completion that no function scores gets 0).
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pglab.runtime.options import SettingsError


class Reward:
    """texts -> scores [N] (float64); ``positive_probability(texts)`` -> [N] or None when not a classifier."""

    def __init__(self, name: str, score: Callable[[list[str]], Sequence[float] | torch.Tensor],
                 positive_probability: Callable[[list[str]], torch.Tensor] | None = None):
        self.name = name
        self._score = score
        self._positive = positive_probability

    def __call__(self, texts: list[str]) -> torch.Tensor:
        scores = as_scores(self.name, self._score(list(texts)), len(texts))
        if torch.isnan(scores).any():
            raise SettingsError(f"reward {self.name} returned NaN or None; return finite scores")
        return scores

    def positive_probability(self, texts: list[str]) -> torch.Tensor | None:
        return None if self._positive is None else self._positive(list(texts)).to(torch.float64).cpu()


VADER_LOGIT_CAP = 0.9999
"""|c| is held below 1 before the log-odds: VADER rounds c to 4 decimals, so 1.0 means only "at least 0.99995"."""


def vader_reward(logit: bool = False) -> Reward:
    """The VADER compound score c of each text, or (``logit``) its log-odds log((1 + c) / (1 - c))."""
    name = "vader-logit" if logit else "vader"
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError as err:
        raise SettingsError(f"--reward {name} needs the vaderSentiment package: pip install 'pglab[lm]'") from err
    analyzer = SentimentIntensityAnalyzer()

    def score(texts: list[str]) -> list[float]:
        compound = [analyzer.polarity_scores(t)["compound"] for t in texts]
        if not logit:
            return compound
        return [2 * math.atanh(max(-VADER_LOGIT_CAP, min(VADER_LOGIT_CAP, c))) for c in compound]

    return Reward(name, score)


def _label_index(id2label: dict, word: str, fallback: int) -> int:
    for index, label in id2label.items():
        if word in str(label).lower():
            return int(index)
    return fallback


def classifier_reward(path: str, device: torch.device | str = "cpu", batch_size: int = 64) -> Reward:
    """Log-odds positive minus negative of a sequence classifier saved at ``path``; also P(positive)."""
    if not (Path(path) / "config.json").exists():
        raise SettingsError(f"--reward hf-classifier:{path}: no classifier folder there (no config.json); pass a "
                            "folder written by save_pretrained of an AutoModelForSequenceClassification")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
    if model.config.num_labels < 2:
        raise SettingsError(f"the classifier at {path} has {model.config.num_labels} label; pass one with "
                            "positive and negative labels")
    pos = _label_index(model.config.id2label, "pos", 1)
    neg = _label_index(model.config.id2label, "neg", 0)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id

    @torch.no_grad()
    def log_odds(texts: list[str]) -> torch.Tensor:
        out = []
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(texts[i:i + batch_size], return_tensors="pt", padding=True, truncation=True).to(device)
            logits = model(**enc).logits.float()
            out.append((logits[:, pos] - logits[:, neg]).cpu())
        return torch.cat(out)

    return Reward(f"hf-classifier:{path}", log_odds, lambda texts: torch.sigmoid(log_odds(texts)))


def import_callable(spec: str) -> Callable:
    """The function named ``module:function``, imported with the current folder on the import path."""
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise SettingsError(f"--reward {spec}: cannot import {attr!r} from {module_name!r} ({err}); "
                            "pass module:function with the module in the current folder or on PYTHONPATH") from None
    if not callable(fn):
        raise SettingsError(f"--reward {spec}: {attr!r} is not callable; pass a function")
    return fn


def takes_trl_arguments(fn: Callable) -> bool:
    """Whether ``fn`` has TRL's reward signature (a prompts or completions parameter, or **kwargs)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name in ("prompts", "completions") or p.kind is p.VAR_KEYWORD for p in params)


def callable_reward(spec: str) -> Reward:
    """``module:function`` of texts -> floats, imported (for TRL's signature, see :func:`make_rewards`)."""
    return Reward(spec, import_callable(spec))


def make_reward(spec: str, device: torch.device | str = "cpu") -> Reward:
    """The Reward named by ``spec``: vader | vader-logit | hf-classifier:PATH | module:function (of texts)."""
    if spec in ("vader", "vader-logit"):
        return vader_reward(logit=spec == "vader-logit")
    if spec.startswith("hf-classifier:"):
        return classifier_reward(spec.split(":", 1)[1], device)
    if ":" in spec:
        return callable_reward(spec)
    raise SettingsError(f"unknown reward {spec!r}; pass vader, vader-logit, hf-classifier:PATH or module:function")


@dataclass
class Completions:
    """What the reward functions see of one batch: B completions with their prompts and dataset columns."""

    prompts: list[Any]
    """Each row's prompt as in the data (text or chat messages)."""
    texts: list[str]
    """Prompt text + reply text (pglab's signature)."""
    replies: list[str]
    """The reply text alone."""
    completion_ids: list[list[int]]
    """The reply's token ids."""
    columns: dict[str, list] = field(default_factory=dict)
    """Other dataset columns, one value per row."""
    conversational: bool = False

    def trl_arguments(self) -> dict[str, Any]:
        completions = [[{"role": "assistant", "content": r}] for r in self.replies] if self.conversational \
            else list(self.replies)
        return {"prompts": list(self.prompts), "completions": completions, "completion_ids": self.completion_ids,
                **self.columns}


def as_scores(name: str, values: Any, n: int) -> torch.Tensor:
    """A reward function's output -> float64 [n] with NaN for None; ValueError naming the fix for anything else."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().flatten().tolist()
    elif hasattr(values, "tolist") and not isinstance(values, (str, bytes)):
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise SettingsError(f"reward {name} returned {type(values).__name__}; return a list of floats (or None), "
                            "one per completion")
    if len(values) != n:
        raise SettingsError(f"reward {name} returned {len(values)} scores for {n} completions; return one per "
                            "completion")
    out = []
    for v in values:
        if v is None:
            out.append(math.nan)
        elif isinstance(v, numbers.Real) and not isinstance(v, bool):
            out.append(float(v))
        else:
            raise SettingsError(f"reward {name} returned {type(v).__name__} values (e.g. {v!r:.40}); return floats "
                                "(or None), one per completion")
    scores = torch.tensor(out, dtype=torch.float64)
    if torch.isinf(scores).any():
        raise SettingsError(f"reward {name} returned inf; return finite scores (None leaves a completion unscored)")
    return scores


class Rewards:
    """Weighted reward functions of a batch of Completions -> scores [B] (float64), as TRL combines them."""

    def __init__(self, functions: list[tuple[str, Callable, bool]], weights: Sequence[float] = ()):
        self.functions = functions
        """(name, function, takes TRL's arguments) of each reward."""
        self.weights = torch.tensor(list(weights) or [1.0] * len(functions), dtype=torch.float64)
        self.last: dict[str, float] = {}
        """Mean score of each function on the last batch (NaN where it returned only None)."""

    @property
    def name(self) -> str:
        return ",".join(name for name, _, _ in self.functions)

    def score(self, batch: Completions) -> torch.Tensor:
        columns = []
        for name, fn, trl_style in self.functions:
            if trl_style:
                try:
                    values = fn(**batch.trl_arguments())
                except TypeError as err:
                    raise SettingsError(f"reward {name} cannot be called as TRL's fn(prompts, completions, "
                                        f"completion_ids, **columns): {err}; add **kwargs to its parameters") from None
            else:
                values = fn(list(batch.texts))
            columns.append(as_scores(name, values, len(batch.texts)))
        table = torch.stack(columns, 1)
        self.last = {name: float(col.nanmean()) for (name, _, _), col in zip(self.functions, table.T)}
        return (table * self.weights).nansum(1)

    def __call__(self, texts: list[str]) -> torch.Tensor:
        """Scores of prompt + reply texts, for functions of texts only."""
        if any(trl_style for _, _, trl_style in self.functions):
            raise ValueError("a TRL-style reward needs prompts and completions: call score(Completions(...))")
        n = len(texts)
        return self.score(Completions([None] * n, list(texts), list(texts), [[] for _ in range(n)]))

    def positive_probability(self, texts: list[str]) -> torch.Tensor | None:
        """P(positive) of the first classifier reward, None when there is none."""
        for _, fn, _ in self.functions:
            if isinstance(fn, Reward) and fn.positive_probability(texts[:1]) is not None:
                return fn.positive_probability(texts)
        return None


def as_rewards(reward: Any) -> Rewards:
    """Rewards for a Rewards, a Reward, or any callable (TRL's signature or texts -> floats)."""
    if isinstance(reward, Rewards):
        return reward
    if isinstance(reward, Reward):
        return Rewards([(reward.name, reward, False)])
    return Rewards([(getattr(reward, "__name__", "reward"), reward, takes_trl_arguments(reward))])


def make_rewards(specs: list[str], weights: Sequence[float] = (), device: torch.device | str = "cpu") -> Rewards:
    """The weighted Rewards of ``specs`` (each vader | vader-logit | hf-classifier:PATH | module:function)."""
    functions = []
    for spec in specs:
        if spec in ("vader", "vader-logit") or spec.startswith("hf-classifier:") or ":" not in spec:
            functions.append((spec, make_reward(spec, device), False))
        else:
            fn = import_callable(spec)
            functions.append((spec, fn, takes_trl_arguments(fn)))
    return Rewards(functions, weights)


__all__ = ["Completions", "Reward", "Rewards", "as_rewards", "as_scores", "callable_reward", "classifier_reward",
           "import_callable", "make_reward", "make_rewards", "takes_trl_arguments", "VADER_LOGIT_CAP", "vader_reward"]
