"""A synthetic review corpus on the VADER lexicon's rated words: the embedded default of the LM trainer.

Reviews are lower-case English about films, books, albums, restaurants, hotels, phones, games,
courses, shows and concerts, one to six sentences long, with a sentiment drawn per review
(positive, negative, neutral or mixed). The sentiment words are the lexicon's own: about 6,800
rated words (``vader_lexicon.txt``, shipped with the ``vaderSentiment`` package; abbreviations,
slurs and the violent extremes left out), grouped by rating band and, from their endings, by role
(adjective, adverb, noun, gerund, other). Thirty sentence shapes, items, aspects, names, places,
times and connectives vary independently, so the text has the entropy of real prose (a few nats
a token) instead of a few memorisable strings.

The sentence shapes around the rated slots carry no sentiment of their own (none of their words
is in the lexicon). A quarter of the opinionated body sentences are outbursts that repeat one of
the commonest strong words of their tone two to six times (``superb ! superb ! superb !``), as
real reviews do: a sentiment reward can be maximised by a degenerate mode the pretrained model
already assigns probability to, which is how the book's GPT-2 collapses (llm-ch6 §6.11), and those
words are the commonest rated words of the corpus. Every draw goes through the
``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

import numpy as np

SENTIMENTS = ("positive", "negative", "neutral", "mixed")
VERSION = 3
"""The grammar's version: bump it when the corpus changes (the embedded default's cache folder name carries it)."""
BANDS = ("strong_negative", "negative", "neutral", "positive", "strong_positive")
"""Rating bands of the lexicon: <= -2.5, (-2.5, -0.5], (-0.5, 0.5), [0.5, 2.5), >= 2.5 (VADER's -4..4 scale)."""

_LEFT_OUT = ("fuck", "fuk", "shit", "cock", "dick", "fag", "nigg", "rape", "raping", "whore", "slut", "cunt",
             "bitch", "puss", "bastard", "piss", "asshole", "murder", "kill", "suicid", "molest", "terror",
             "slave", "racis", "retard", "tortur", "jackass", "damn", "nazi", "douche", "wtf", "stfu")
_ROLES = (("adverb", ("ly",)), ("noun", ("ness", "ment", "tion", "sion", "ity", "ism", "ance", "ence", "dom", "ship")),
          ("gerund", ("ing",)),
          ("adjective", ("ful", "ous", "ive", "able", "ible", "ic", "al", "less", "ant", "ent", "ed", "y", "est")))


@functools.lru_cache(maxsize=1)
def lexicon() -> dict[str, float]:
    """The lexicon's plain words (four or more letters, a vowel, |rating| <= 3.2, none left out) -> mean rating."""
    try:
        text = resources.files("vaderSentiment").joinpath("vader_lexicon.txt").read_text(encoding="utf-8")
    except ModuleNotFoundError as err:
        raise ValueError("the review corpus is built on the VADER lexicon: pip install 'pglab[lm]' "
                         "(vaderSentiment)") from err
    words = {}
    for line in text.splitlines():
        word, rating = line.split("\t")[:2]
        if (re.fullmatch(r"[a-z]{4,}", word) and re.search(r"[aeiou]", word) and abs(float(rating)) <= 3.2
                and not any(bad in word for bad in _LEFT_OUT)):
            words[word] = float(rating)
    return words


def band(rating: float) -> str:
    """The rating band (see BANDS) of a lexicon rating."""
    edges = (-2.5, -0.5, 0.5, 2.5)
    return BANDS[sum(rating > e if i < 2 else rating >= e for i, e in enumerate(edges))]


def role(word: str) -> str:
    """adverb | noun | gerund | adjective | other, guessed from the word's ending."""
    return next((name for name, ends in _ROLES if word.endswith(ends)), "other")


@functools.lru_cache(maxsize=1)
def _classes() -> dict[tuple[str, str], tuple[str, ...]]:
    """(band, role) -> the lexicon's words of that band and role, sorted (so draws do not depend on dict order)."""
    found: dict[tuple[str, str], list[str]] = {}
    for word, rating in sorted(lexicon().items()):
        found.setdefault((band(rating), role(word)), []).append(word)
    return {key: tuple(words) for key, words in found.items()}


_DOMAINS = {
    "film": (("film", "movie", "picture", "sequel", "remake", "thriller", "caper", "drama", "western", "musical"),
             ("acting", "plot", "script", "score", "camera work", "pacing", "dialogue", "ending", "cast", "editing")),
    "book": (("book", "paperback", "memoir", "story collection", "biography", "debut", "trilogy", "cookbook"),
             ("prose", "plot", "characters", "ending", "first chapter", "translation", "cover", "pacing")),
    "album": (("album", "record", "single", "ep", "live album", "soundtrack", "mixtape"),
              ("vocals", "lyrics", "production", "guitar", "drums", "melodies", "mixing", "opening track")),
    "restaurant": (("restaurant", "cafe", "diner", "bakery", "pizzeria", "bistro", "food truck", "noodle bar"),
                   ("food", "service", "staff", "menu", "dessert", "coffee", "prices", "wine list", "portions")),
    "hotel": (("hotel", "hostel", "resort", "inn", "guest house", "motel", "apartment"),
              ("room", "bed", "breakfast", "staff", "location", "view", "shower", "pool", "wifi")),
    "phone": (("phone", "laptop", "tablet", "camera", "headset", "speaker", "watch", "router"),
              ("battery", "screen", "keyboard", "sound", "software", "price", "design", "charger", "manual")),
    "game": (("game", "board game", "puzzle game", "shooter", "racing game", "card game", "strategy game"),
             ("controls", "graphics", "levels", "story", "multiplayer", "music", "menus", "boss levels")),
    "course": (("course", "class", "workshop", "lecture series", "tutorial", "bootcamp"),
               ("teacher", "exercises", "slides", "homework", "exam", "examples", "pace", "forum")),
    "show": (("show", "series", "sitcom", "podcast", "documentary", "cartoon", "talk show"),
             ("host", "episodes", "writing", "sketches", "guests", "finale", "theme song", "first season")),
    "concert": (("concert", "gig", "street show", "opera", "ballet", "recital", "panto"),
                ("crowd", "sound", "lights", "encore", "seats", "band", "singer", "venue", "tickets")),
}
_NAMES = ("anna", "marco", "lena", "david", "sofia", "omar", "julia", "peter", "maya", "victor", "clara", "jonas",
          "nina", "samuel", "rosa", "felix", "irene", "hugo", "alice", "tomas", "priya", "kenji", "fatima", "lucas",
          "ingrid", "mateo", "zara", "emil", "hana", "leo")
_PLACES = ("paris", "a small town", "the mountains", "new york", "a fishing village", "berlin", "the suburbs",
           "tokyo", "the old town", "the station", "lisbon", "the airport", "my street", "the city centre")
_TIMES = ("last friday", "last weekend", "yesterday", "on sunday", "last month", "this week", "twice now",
          "on a trip", "after work", "with my kids", "on a rainy night", "for my birthday")
_PEOPLE = ("my wife", "my husband", "my neighbours", "my sister", "my dad", "the kids", "a colleague", "my partner",
           "everyone i know", "the whole family")
_INTENSIFIERS = ("very", "really", "quite", "rather", "incredibly", "fairly", "so", "a bit",
                 "extremely", "somewhat")
_NUMBERS = ("two", "three", "four", "five", "ten", "twenty")
_TONE_BANDS = {"positive": ("positive", "positive", "strong_positive"),
               "negative": ("negative", "negative", "strong_negative"),
               "neutral": ("neutral",)}
_OPPOSITE = {"positive": "negative", "negative": "positive", "neutral": "neutral"}
OUTBURSTS = 0.25
"""Share of a positive or negative review's body sentences that are outbursts."""
OUTBURST_WORDS = {"positive": ("great", "amazing", "awesome", "excellent", "fantastic", "wonderful", "perfect",
                               "brilliant", "superb", "best", "love", "beautiful"),
                  "negative": ("awful", "terrible", "horrible", "worst", "hate", "boring", "useless", "pathetic",
                               "disgusting", "ugly", "nasty", "stupid")}
"""The words outbursts repeat: the commonest strong words of each tone (all in the lexicon), as real reviewers use."""
_ANSWERS = {"positive": ("yes", "absolutely", "for sure"), "negative": ("no", "never", "not a chance"),
            "neutral": ("maybe", "perhaps", "who knows")}


def _pick(rng: np.random.Generator, items: tuple[str, ...]) -> str:
    return items[int(rng.integers(len(items)))]


@functools.cache
def _pool(chosen: str, roles: tuple[str, ...]) -> tuple[str, ...]:
    """The words of band ``chosen`` in any of ``roles`` (all roles if empty; its 'other' words if none match)."""
    words = tuple(w for r in (roles or ("adjective", "adverb", "noun", "gerund", "other"))
                  for w in _classes().get((chosen, r), ()))
    return words or _classes()[(chosen, "other")]


def _word(rng: np.random.Generator, tone: str, *roles: str) -> str:
    """A lexicon word of ``tone`` (a band drawn from the tone's bands) in one of ``roles`` (any, if none)."""
    return _pick(rng, _pool(_pick(rng, _TONE_BANDS[tone]), roles))


def _adj(rng: np.random.Generator, tone: str) -> str:
    """An adjective-like word of ``tone``, sometimes with an intensifier or an adverb before it."""
    word = _word(rng, tone, "adjective")
    roll = rng.random()
    if roll < 0.25:
        return f"{_pick(rng, _INTENSIFIERS)} {word}"
    if roll < 0.35:
        return f"{_word(rng, tone, 'adverb')} {word}"
    return word


def _article(phrase: str) -> str:
    return "an" if phrase[0] in "aeiou" else "a"


def _outburst(rng: np.random.Generator, tone: str) -> str:
    """One of the common strong words of ``tone`` repeated two to six times, as an excited reviewer writes."""
    word = _pick(rng, OUTBURST_WORDS[tone])
    times = int(rng.integers(2, 7))
    shape = int(rng.integers(3))
    if shape == 0:
        return " ! ".join([word] * times) + " !"
    return " ".join([word] * times) + (" ." if shape == 1 else " !!!")


def _opening(rng: np.random.Generator, item: str, tone: str) -> str:
    shape = int(rng.integers(8))
    if shape == 0:
        adj = _adj(rng, tone)
        return f"this {item} is {_article(adj)} {adj} one ."
    if shape == 1:
        return f"i tried this {item} {_pick(rng, _TIMES)} ."
    if shape == 2:
        return f"we went to the {item} in {_pick(rng, _PLACES)} {_pick(rng, _TIMES)} with {_pick(rng, _PEOPLE)} ."
    if shape == 3:
        return f"{_pick(rng, _NAMES)} suggested this {item} to me , and i have to say it was {_adj(rng, tone)} ."
    if shape == 4:
        return f"so i finally got around to the new {item} ."
    if shape == 5:
        return f"what {_article(_word(rng, tone, 'adjective'))} {_word(rng, tone, 'adjective')} {item} ."
    if shape == 6:
        return f"{_pick(rng, _NUMBERS)} stars for this {item} ."
    return f"after {_pick(rng, _NUMBERS)} weeks with this {item} , here is my review ."


def _body(rng: np.random.Generator, aspects: tuple[str, ...], tone: str) -> str:
    aspect, other = (str(a) for a in rng.choice(aspects, 2, replace=False))
    shape = int(rng.integers(16))
    if shape == 0:
        return f"the {aspect} is {_adj(rng, tone)} ."
    if shape == 1:
        return f"i found the {aspect} {_adj(rng, tone)} and the {other} {_adj(rng, tone)} ."
    if shape == 2:
        return f"the {aspect} was {_adj(rng, tone)} , but the {other} was {_adj(rng, _OPPOSITE[tone])} ."
    if shape == 3:
        return f"the {aspect} is not {_word(rng, _OPPOSITE[tone], 'adjective')} at all ."
    if shape == 4:
        return f"there is a real sense of {_word(rng, tone, 'noun', 'other')} in the {aspect} ."
    if shape == 5:
        return f"{_pick(rng, _PEOPLE)} said the {aspect} was {_adj(rng, tone)} , and i concur ."
    if shape == 6:
        return f"the {aspect} left me {_word(rng, tone, 'adjective')} ."
    if shape == 7:
        return f"{_word(rng, tone, 'adverb')} , the {aspect} works ."
    if shape == 8:
        return f"it is full of {_word(rng, tone, 'noun', 'gerund', 'other')} and {_word(rng, tone, 'noun', 'other')} ."
    if shape == 9:
        return f"words that come to mind : {_word(rng, tone)} , {_word(rng, tone)} , {_word(rng, tone)} ."
    if shape == 10:
        return f"if i had to describe the {aspect} in one word , {_word(rng, tone, 'adjective', 'other')} ."
    if shape == 11:
        return f"{_pick(rng, _NAMES)} did {_article(_adj(rng, tone))} {_adj(rng, tone)} job with the {aspect} ."
    if shape == 12:
        return f"compared to the last one , the {aspect} feels more {_word(rng, tone, 'adjective')} ."
    if shape == 13:
        return f"i {_pick(rng, ('remember', 'noticed', 'expected', 'mentioned', 'recall', 'studied'))} the {aspect} ."
    if shape == 14:
        return f"the {aspect} is {_adj(rng, tone)} , the {other} {_adj(rng, tone)} , and the rest is standard ."
    return f"frankly , pure {_word(rng, tone, 'noun', 'gerund', 'other')} from start to finish ."


def _closing(rng: np.random.Generator, item: str, tone: str) -> str:
    shape = int(rng.integers(6))
    if shape == 0:
        return f"overall , {_article(_adj(rng, tone))} {_adj(rng, tone)} {item} ."
    if shape == 1:
        return f"would i go back ? {_pick(rng, _ANSWERS[tone])} ."
    if shape == 2:
        return f"in the end it was {_adj(rng, tone)} ."
    if shape == 3:
        return f"{_pick(rng, _NUMBERS)} out of ten , {_word(rng, tone, 'adjective')} ."
    if shape == 4:
        return f"i would call it {_word(rng, tone, 'adjective')} and {_word(rng, tone, 'adjective')} ."
    return f"that is all , {_word(rng, tone, 'adverb')} yours ."


def review(rng: np.random.Generator, sentiment: str | None = None) -> str:
    """One review: an opening, one to four body sentences (sometimes an outburst), and (usually) a closing."""
    sentiment = sentiment or _pick(rng, SENTIMENTS)
    if sentiment not in SENTIMENTS:
        raise ValueError(f"unknown sentiment {sentiment!r}; pass one of {', '.join(SENTIMENTS)}")
    tones = ("positive", "negative") if sentiment == "mixed" else (sentiment,)
    if sentiment == "mixed" and rng.random() < 0.5:
        tones = tones[::-1]
    items, aspects = _DOMAINS[_pick(rng, tuple(_DOMAINS))]
    item = _pick(rng, items)
    sentences = [_opening(rng, item, tones[0])]
    for i in range(int(rng.integers(1, 5))):
        tone = tones[i % len(tones)]
        sentences.append(_outburst(rng, tone) if tone != "neutral" and rng.random() < OUTBURSTS else
                         _body(rng, aspects, tone))
    if rng.random() < 0.7:
        sentences.append(_closing(rng, item, tones[-1]))
    return " ".join(sentences)


def reviews(n: int, seed: int) -> list[str]:
    """``n`` reviews drawn with ``numpy.random.default_rng(seed)``; the sentiments are mixed uniformly."""
    rng = np.random.default_rng(seed)
    return [review(rng) for _ in range(n)]


__all__ = ["BANDS", "OUTBURST_WORDS", "OUTBURSTS", "SENTIMENTS", "VERSION", "band", "lexicon", "review", "reviews",
           "role"]
