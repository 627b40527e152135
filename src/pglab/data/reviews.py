"""A synthetic movie-review corpus from a small grammar: the embedded default of the LM trainer.

Reviews are lower-case English, two to five sentences, with a sentiment drawn per review
(positive, negative, neutral or mixed) that sets the adjectives, verdicts and advice of its
sentences. Titles, names, genres, aspects, intensifiers, negations, connectives and a dozen
sentence shapes vary independently, so a language model must learn the structure (which word
class goes where, agreement between a sentence's parts, how a review opens and ends) rather than
memorise a few strings. Every draw goes through the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import numpy as np

SENTIMENTS = ("positive", "negative", "neutral", "mixed")

_TITLE_ADJ = ("silent", "last", "red", "broken", "hidden", "golden", "lonely", "distant", "frozen", "wild",
              "secret", "burning", "empty", "midnight", "little", "dark", "lost", "bright", "quiet", "iron")
_TITLE_NOUN = ("harbor", "river", "garden", "city", "king", "road", "island", "winter", "mirror", "train",
               "summer", "house", "forest", "letter", "station", "horizon", "bridge", "village", "storm", "song")
_NAMES = ("anna", "marco", "lena", "david", "sofia", "omar", "julia", "peter", "maya", "victor", "clara",
          "jonas", "nina", "samuel", "rosa", "felix", "irene", "hugo", "alice", "tomas")
_GENRES = ("drama", "comedy", "thriller", "western", "musical", "romance", "horror film", "war film",
           "documentary", "mystery", "science fiction film", "family film")
_ASPECTS = ("acting", "plot", "script", "score", "soundtrack", "camera work", "pacing", "dialogue", "ending",
            "direction", "cast", "story", "music", "photography", "editing")
_ROLES = ("detective", "teacher", "soldier", "singer", "farmer", "doctor", "widow", "young boy", "pilot",
          "painter", "thief", "nurse")
_PLACES = ("paris", "a small town", "the mountains", "new york", "a fishing village", "the desert", "berlin",
           "an old hotel", "the suburbs", "a ship")
_PLOT_VERBS = ("comes home after many years", "searches for a missing sister", "tries to save the family farm",
               "falls for a stranger", "plans one last job", "keeps a dangerous secret",
               "starts a new life", "loses everything in one night")
_DAYS = ("friday", "weekend", "night", "sunday", "month", "week")
_INTENSIFIERS = ("very", "really", "truly", "quite", "rather", "incredibly", "absolutely", "pretty")
_ADJ = {
    "positive": ("great", "wonderful", "brilliant", "beautiful", "excellent", "superb", "lovely", "delightful",
                 "charming", "amazing", "fantastic", "moving", "fun", "perfect", "clever", "funny", "good"),
    "negative": ("awful", "terrible", "boring", "dull", "bad", "horrible", "weak", "poor", "stupid", "painful",
                 "disappointing", "ugly", "messy", "lame", "tedious", "sad", "annoying"),
    "neutral": ("long", "short", "simple", "familiar", "ordinary", "typical", "slow", "quiet", "loud", "old",
                "modern", "plain", "standard", "straightforward"),
}
_VERDICTS = {
    "positive": ("a film worth seeing", "one of the best films of the year", "i would watch it again",
                 "i loved every minute of it", "highly recommended"),
    "negative": ("a waste of time", "one of the worst films of the year", "i would not watch it again",
                 "i hated most of it", "not recommended"),
    "neutral": ("an average evening at the movies", "it is what it is", "some will like it and some will not",
                "neither good nor bad", "fine for a rainy afternoon"),
}
_ADVICE = {
    "positive": ("do not miss it", "go and see it", "this one is for you", "bring your friends"),
    "negative": ("stay at home", "skip this one", "look elsewhere", "save your money"),
    "neutral": ("you may enjoy it", "give it a try", "wait for it on television", "it might be enough"),
}
_OPPOSITE = {"positive": "negative", "negative": "positive", "neutral": "neutral"}


def _pick(rng: np.random.Generator, items: tuple[str, ...]) -> str:
    return items[int(rng.integers(len(items)))]


def _title(rng: np.random.Generator) -> str:
    shape = int(rng.integers(3))
    if shape == 0:
        return f"the {_pick(rng, _TITLE_ADJ)} {_pick(rng, _TITLE_NOUN)}"
    if shape == 1:
        return f"the {_pick(rng, _TITLE_NOUN)} of {_pick(rng, _TITLE_NOUN)}s"
    return f"{_pick(rng, _TITLE_NOUN)} {_pick(rng, _TITLE_ADJ)}"


def _adj(rng: np.random.Generator, tone: str, intensify: float = 0.4) -> str:
    word = _pick(rng, _ADJ[tone])
    return f"{_pick(rng, _INTENSIFIERS)} {word}" if rng.random() < intensify else word


def _article(phrase: str) -> str:
    return "an" if phrase[0] in "aeiou" else "a"


def _opening(rng: np.random.Generator, title: str, tone: str) -> str:
    genre = _pick(rng, _GENRES)
    shape = int(rng.integers(5))
    if shape == 0:
        adj = _adj(rng, tone)
        return f"{title} is {_article(adj)} {adj} {genre} ."
    if shape == 1:
        return f"i watched {title} last {_pick(rng, _DAYS)} ."
    if shape == 2:
        director, place = _pick(rng, _NAMES), _pick(rng, _PLACES)
        return f"{title} , directed by {director} , is {_article(genre)} {genre} set in {place} ."
    if shape == 3:
        return f"in {title} , a {_pick(rng, _ROLES)} {_pick(rng, _PLOT_VERBS)} ."
    return f"so i finally saw {title} ."


def _body(rng: np.random.Generator, tone: str) -> str:
    aspect, other = (str(a) for a in rng.choice(_ASPECTS, 2, replace=False))
    shape = int(rng.integers(8))
    if shape == 0:
        return f"the {aspect} is {_adj(rng, tone)} ."
    if shape == 1:
        name, word = _pick(rng, _NAMES), _adj(rng, tone)
        return f"{name} gives {_article(word)} {word} performance as the {_pick(rng, _ROLES)} ."
    if shape == 2:
        return f"i found the {aspect} {_adj(rng, tone)} and the {other} {_adj(rng, tone)} ."
    if shape == 3:
        opposite = _OPPOSITE[tone]
        return f"the {aspect} was {_adj(rng, tone)} , but the {other} was {_adj(rng, opposite)} ."
    if shape == 4:
        return f"the {aspect} is not {_adj(rng, _OPPOSITE[tone], intensify=0.0)} at all ."
    if shape == 5:
        return f"the story follows a {_pick(rng, _ROLES)} who {_pick(rng, _PLOT_VERBS)} in {_pick(rng, _PLACES)} ."
    if shape == 6:
        return f"it runs about {10 * int(rng.integers(8, 16))} minutes and the {aspect} feels {_adj(rng, tone)} ."
    return f"if you like {_pick(rng, _GENRES)}s , {_pick(rng, _ADVICE[tone])} ."


def review(rng: np.random.Generator, sentiment: str | None = None) -> str:
    """One review: an opening, one to three body sentences, and (usually) a verdict."""
    sentiment = sentiment or _pick(rng, SENTIMENTS)
    if sentiment not in SENTIMENTS:
        raise ValueError(f"unknown sentiment {sentiment!r}; pass one of {', '.join(SENTIMENTS)}")
    tones = ("positive", "negative") if sentiment == "mixed" else (sentiment,)
    title = _title(rng)
    sentences = [_opening(rng, title, tones[0])]
    for i in range(int(rng.integers(1, 4))):
        sentences.append(_body(rng, tones[i % len(tones)]))
    if rng.random() < 0.7:
        sentences.append(f"overall , {_pick(rng, _VERDICTS[tones[-1] if sentiment != 'mixed' else 'neutral'])} .")
    return " ".join(sentences)


def reviews(n: int, seed: int) -> list[str]:
    """``n`` reviews drawn with ``numpy.random.default_rng(seed)``; the sentiments are mixed uniformly."""
    rng = np.random.default_rng(seed)
    return [review(rng) for _ in range(n)]
