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


def test_the_sentiment_words_are_the_vader_lexicons():
    pytest.importorskip("vaderSentiment")
    from pglab.data.reviews import band, lexicon, role

    words = lexicon()
    assert len(words) > 6000 and all(w.isalpha() and len(w) >= 4 for w in words)
    used = {w for t in reviews(2000, 0) for w in t.split()} & set(words)
    assert len(used) > 2000
    assert [band(r) for r in (-3.0, -2.5, -1.0, 0.0, 0.5, 2.5)] == [
        "strong_negative", "strong_negative", "negative", "neutral", "positive", "strong_positive"]
    assert [role(w) for w in ("happily", "kindness", "amazing", "wonderful", "love")] == [
        "adverb", "noun", "gerund", "adjective", "other"]


def test_outbursts_repeat_one_strong_word():
    texts = reviews(2000, 0)
    repeats = [t for t in texts if any(a == b and len(a) > 3 for a, b in zip(t.split(), t.split()[2:]))]
    assert 0.05 < len(repeats) / len(texts) < 0.5
