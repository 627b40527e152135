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


def test_outbursts_repeat_one_common_strong_word():
    from pglab.data.reviews import OUTBURST_WORDS

    texts = reviews(2000, 0)
    runs = [(a, t) for t in texts for a, b, c in zip(t.split(), t.split()[1:], t.split()[2:]) if a == b == c]
    assert 0.05 < len({t for _, t in runs}) / len(texts) < 0.5
    assert {a for a, _ in runs} <= {*OUTBURST_WORDS["positive"], *OUTBURST_WORDS["negative"]}


def test_the_frame_carries_no_sentiment_so_the_commonest_rated_words_are_the_outbursts():
    """The sentence shapes around the rated slots use no rated word (no 'agree', 'recommended', 'honestly'), so the
    words a sentiment reward can most cheaply repeat are the outbursts' own, as in real reviews."""
    vader = pytest.importorskip("vaderSentiment.vaderSentiment").SentimentIntensityAnalyzer()
    from collections import Counter

    from pglab.data.reviews import OUTBURST_WORDS

    rated = Counter(w for t in reviews(3000, 0) for w in t.split() if w in vader.lexicon)
    outbursts = {*OUTBURST_WORDS["positive"], *OUTBURST_WORDS["negative"]}
    assert {w for w, _ in rated.most_common(len(outbursts))} == outbursts
    assert all(w in vader.lexicon and abs(vader.lexicon[w]) >= 1.3 for w in outbursts)


def test_vader_logit_is_the_log_odds_of_the_compound_score_and_keeps_rising_where_it_saturates():
    vader = pytest.importorskip("vaderSentiment.vaderSentiment").SentimentIntensityAnalyzer()
    from pglab.trainers.lm.rewards import VADER_LOGIT_CAP, make_reward

    texts = ["the plot is long .", "great .", "great great great !", " ".join(["great"] * 40) + " !!!", "awful ."]
    compound = make_reward("vader")(texts)
    logit = make_reward("vader-logit")(texts)
    for c, z, text in zip(compound.tolist(), logit.tolist(), texts):
        assert c == vader.polarity_scores(text)["compound"]
        held = max(-VADER_LOGIT_CAP, min(VADER_LOGIT_CAP, c))
        assert z == pytest.approx(np.log((1 + held) / (1 - held)), rel=1e-12)
    assert logit[0] == 0.0 and logit[4] < 0 < logit[1] < logit[2] < logit[3] <= 2 * np.arctanh(VADER_LOGIT_CAP)
    assert logit[3] - logit[2] > 20 * (compound[3] - compound[2]) > 0
