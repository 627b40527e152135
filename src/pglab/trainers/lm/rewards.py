"""Rewards for the LM trainer: a callable from texts to one score each, from a ``--reward`` spec.

``vader``: the VADER compound score in [-1, 1] (the ``vaderSentiment`` package; its lexicon
ships with it). ``hf-classifier:PATH``: an ``AutoModelForSequenceClassification`` folder; the
score is the positive logit minus the negative logit (log-odds), and it also reports
P(positive). ``module:function``: any importable Python callable from a list of texts to a
list (or tensor) of floats.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import torch


class Reward:
    """texts -> scores [N] (float64); ``positive_probability(texts)`` -> [N] or None when not a classifier."""

    def __init__(self, name: str, score: Callable[[list[str]], Sequence[float] | torch.Tensor],
                 positive_probability: Callable[[list[str]], torch.Tensor] | None = None):
        self.name = name
        self._score = score
        self._positive = positive_probability

    def __call__(self, texts: list[str]) -> torch.Tensor:
        scores = torch.as_tensor(self._score(list(texts)), dtype=torch.float64).flatten().cpu()
        if scores.shape != (len(texts),):
            raise ValueError(f"reward {self.name} returned {scores.numel()} scores for {len(texts)} texts; "
                             "return one float per text")
        if not torch.isfinite(scores).all():
            raise ValueError(f"reward {self.name} returned NaN or inf; return finite scores")
        return scores

    def positive_probability(self, texts: list[str]) -> torch.Tensor | None:
        return None if self._positive is None else self._positive(list(texts)).to(torch.float64).cpu()


def vader_reward() -> Reward:
    """The VADER compound score of each text."""
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError as err:
        raise ValueError("--reward vader needs the vaderSentiment package: pip install 'pglab[lm]'") from err
    analyzer = SentimentIntensityAnalyzer()
    return Reward("vader", lambda texts: [analyzer.polarity_scores(t)["compound"] for t in texts])


def _label_index(id2label: dict, word: str, fallback: int) -> int:
    for index, label in id2label.items():
        if word in str(label).lower():
            return int(index)
    return fallback


def classifier_reward(path: str, device: torch.device | str = "cpu", batch_size: int = 64) -> Reward:
    """Log-odds positive minus negative of a sequence classifier saved at ``path``; also P(positive)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
    if model.config.num_labels < 2:
        raise ValueError(f"the classifier at {path} has {model.config.num_labels} label; pass one with "
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


def callable_reward(spec: str) -> Reward:
    """``module:function``, imported; the function maps a list of texts to one float each."""
    module_name, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"--reward {spec}: cannot import {attr!r} from {module_name!r} ({err}); "
                         "pass module:function with the module on PYTHONPATH") from err
    if not callable(fn):
        raise ValueError(f"--reward {spec}: {attr!r} is not callable; pass a function of a list of texts")
    return Reward(spec, fn)


def make_reward(spec: str, device: torch.device | str = "cpu") -> Reward:
    """The Reward named by ``spec``: vader | hf-classifier:PATH | module:function."""
    if spec == "vader":
        return vader_reward()
    if spec.startswith("hf-classifier:"):
        return classifier_reward(spec.split(":", 1)[1], device)
    if ":" in spec:
        return callable_reward(spec)
    raise ValueError(f"unknown reward {spec!r}; pass vader, hf-classifier:PATH or module:function")
