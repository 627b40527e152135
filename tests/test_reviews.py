"""The synthetic review corpus: deterministic, varied, and its sentiments are what a sentiment reward sees."""

import numpy as np
import pytest

from pglab.data.reviews import review, reviews


def test_same_seed_same_corpus_other_seed_other_corpus():
    assert reviews(50, 3) == reviews(50, 3)
    assert reviews(50, 3) != reviews(50, 4)


def test_corpus_is_varied():
    texts = reviews(2000, 0)
    words = " ".join(texts).split()
    assert len(set(texts)) == len(texts)
    assert len(set(words)) > 250
    openings = {" ".join(t.split()[:2]) for t in texts}
    assert len(openings) > 20


def test_sentiment_moves_the_vader_score():
    vader = pytest.importorskip("vaderSentiment.vaderSentiment").SentimentIntensityAnalyzer()
    rng = np.random.default_rng(0)
    mean = {s: np.mean([vader.polarity_scores(review(rng, s))["compound"] for _ in range(300)])
            for s in ("positive", "negative", "neutral")}
    assert mean["positive"] > mean["neutral"] > mean["negative"]
    with pytest.raises(ValueError, match="unknown sentiment"):
        review(rng, "angry")
