"""Procedural tool-use transcripts: the pre-training corpus of the tool-use agent, and the call syntax's checks.

A generator (pure functions of a ``random.Random``) invents small tasks in pglab's call syntax
(``<call> TOOL ARG ... </call>``): random tool names from a word list, argument placeholders of two kinds
(numbers: ``A``, ``B``, ``N``, ...; words: ``WORD``, ``NAME``, ...), a question holding numbers and words, and a
prompt in one of several templates (the calculator of docs/agents.md, a tool list as the TRL adapter writes it,
reasoning-gym's instruction, a one-turn choice). Each transcript is **scripted random play** (well-formed and
unskilled, agents-ch6 §6.2): every call names a tool of the prompt, its arguments are values of the right kind
copied from the question or from earlier observations (a call after an observation often takes that observation's
values first, so that tools chain), a random tool world answers (a number of up to six digits, some negative, a
word, an argument spelled backwards, an error, ``done``; a value often inside a sentence, which may hold two), and
the episode ends with an answer-like tool whose argument is often one of the last observation's values. Tasks of
several tools often call each once, in the order the prompt names them. Questions may hold their value
among filler words, or carry a sentence of filler beside them; fillers are never arguments.

:func:`prompt_tools`, :func:`tools_with_arguments` and :func:`well_formed` are the generic format check of a call
against the tools a prompt names (the format cost of ``train-agent`` outside BugFixEnv).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

VERSION = 11
"""The generator's version: part of the tool-use agent's cache key (bump it when a transcript changes)."""
TOOL_NAMES = ("add", "sum", "plus", "multiply", "times", "subtract", "minus", "divide", "double", "square",
              "increment", "decrement", "lookup", "get", "find", "search", "query", "fetch", "read", "open",
              "reverse", "upper", "lower", "count", "length", "spell", "check", "verify", "test", "compare",
              "convert", "translate", "move", "push", "pop", "store", "load", "roll", "flip", "step", "ask",
              "calc", "compute", "eval", "parse", "split", "join", "sort", "list", "show")
"""Names of the tools a task may offer (besides the answer-like ones)."""
ANSWER_TOOLS = ("answer", "submit", "guess", "reply", "finish", "final", "respond", "report", "done", "solve")
"""Names of the tools that end an episode."""
NUMBER_SLOTS = ("A", "B", "C", "N", "M", "X", "Y", "K", "n", "x", "value", "step", "amount", "number", "a", "b")
"""Placeholders of a number argument."""
WORD_SLOTS = ("WORD", "NAME", "KEY", "TEXT", "word", "name", "key", "city", "item", "query", "color", "s")
"""Placeholders of a word argument."""
OTHER_SLOTS = ("COUNTRY", "CITY", "FILE", "PATH", "ID", "USER", "DATE", "TERM", "TOPIC", "LABEL", "INDEX", "CODE",
               "TITLE", "ITEM", "ARG", "INPUT", "target", "arg", "id", "term")
"""Placeholders that say nothing of their kind; with invented ones (upper-case made-up words), OTHER_SLOT of the
slots, so that any word after a tool's name in a usage reads as an argument."""
OTHER_SLOT = 0.3
ANSWER_SLOTS = ("ANSWER", "answer", "RESULT", "result", "value", "N", "X", "text")
"""Placeholders of an answer tool's argument (a number or a word)."""
WORDS = ("apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "robot", "candle", "forest", "silver",
         "rabbit", "mirror", "garden", "planet", "window", "orange", "castle", "pencil", "bridge", "yellow", "dragon",
         "winter", "summer", "ocean", "paper", "green", "blue", "red", "black", "white", "north", "south", "alice",
         "bob", "carol", "dave", "paris", "tokyo", "lima", "oslo", "cairo", "delta", "gamma", "omega", "alpha",
         "cat", "dog", "fox", "owl", "bee", "sun", "moon", "star", "key", "box", "cup", "hat", "map", "pen")
"""Words a question may hold (and a random tool world may answer)."""
CHOICES = (("yes", "no"), ("true", "false"), ("left", "right"), ("up", "down"), ("even", "odd"), ("on", "off"),
           ("high", "low"), ("a", "b"))
"""The options of a one-turn choice."""
ERRORS = ("error: wrong arguments", "error: unknown key", "error: malformed call", "error: not found",
          "error: expected a number")
"""What a random tool world answers to a call it refuses."""
DESCRIPTIONS = ("Add a value to the counter.", "Look up a key.", "Return the result.", "Check the value.",
                "Compute the value of the arguments.", "Read an entry.", "Submit the final answer.",
                "Search for a word.", "Change the state.", "Count the letters.")
"""First docstring lines of the tools in a TRL-style tool list."""
ANSWER_PRIOR = (("answer", 0.35), ("submit", 0.25))
"""The answer tools most environments use, and how often an invented task uses each (the rest: ANSWER_TOOLS)."""
INVENTED = 0.5
"""The share of tool names and words that are invented (random syllables): copying, not recall, predicts them."""
LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
LETTER_WEIGHTS = (12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0, 2.0, 1.9, 1.5,
                  1.0, 0.8, 0.2, 0.2, 0.1, 0.1)
"""Letters by their rough share of English text (percent), for invented words."""
_CALL_NAME = re.compile(r"<call>\s*([A-Za-z_][\w.-]*)")
_USAGE = re.compile(r"<call>\s*([A-Za-z_][\w.-]*)([^<]*)</call>")
_NUMBER, _WORD = re.compile(r"^-?\d+$"), re.compile(r"^[A-Za-z]+$")


@dataclass(frozen=True)
class ToolSpec:
    """A tool of an invented task."""

    name: str
    """What the call names."""
    slots: tuple[str, ...]
    """Its argument placeholders as the prompt writes them."""
    kinds: tuple[str, ...]
    """Each argument's kind: number, word, any (a number or a word) or a literal option."""


@dataclass(frozen=True)
class Transcript:
    """One scripted episode: the prompt, each call's text and the tool world's answer to it."""

    prompt: str
    """The task as the environment poses it."""
    calls: tuple[str, ...]
    """Each call, ``<call> TOOL ARG ... </call>``."""
    observations: tuple[str, ...]
    """The answer to each call (the last one is never shown to the agent)."""


def prompt_tools(prompt: str) -> tuple[str, ...]:
    """The tools ``prompt`` names in the call syntax (``<call> NAME ...``), in order of first mention."""
    return tuple(dict.fromkeys(_CALL_NAME.findall(prompt)))


def tools_with_arguments(prompt: str) -> frozenset[str]:
    """The tools every one of whose usages in ``prompt`` (``<call> NAME ARG ... </call>``) shows an argument."""
    usages: dict[str, bool] = {}
    for name, rest in _USAGE.findall(prompt):
        usages[name] = usages.get(name, True) and bool(rest.strip())
    return frozenset(name for name, shown in usages.items() if shown)


def well_formed(call: str, tools: tuple[str, ...], with_arguments: frozenset[str] = frozenset()) -> bool:
    """Whether ``call`` is ``<call> NAME ... </call>`` (nothing else around it) with NAME one of ``tools``, and with
    an argument when NAME is one of ``with_arguments`` (:func:`tools_with_arguments`: the prompt shows one)."""
    found = re.fullmatch(r"\s*<call>\s*(\S+)(.*?)</call>\s*", call, re.DOTALL)
    return (found is not None and found.group(1) in tools and "<call>" not in found.group(2)
            and (found.group(1) not in with_arguments or bool(found.group(2).strip())))


def _invented(rng: random.Random) -> str:
    """A made-up word: 2-3 syllables (``tomika``), or 3-8 letters of English-like frequency (``rtsaelin``), so that
    the agent learns to copy any split of a word into BPE pieces, not only those of the word list."""
    if rng.random() < 0.5:
        return "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 3)))
    return "".join(rng.choices(LETTERS, LETTER_WEIGHTS, k=rng.randint(3, 8)))


def _word(rng: random.Random) -> str:
    """A word of the list, or an invented one."""
    return _invented(rng) if rng.random() < INVENTED else rng.choice(WORDS)


def _answer_name(rng: random.Random) -> str:
    """The answer tool's name: answer or submit most often (ANSWER_PRIOR), else one of ANSWER_TOOLS."""
    roll = rng.random()
    for name, share in ANSWER_PRIOR:
        if roll < share:
            return name
        roll -= share
    return rng.choice(ANSWER_TOOLS)


MIXED = 0.4
"""The share of two-argument tools that take a number and a word (``convert VALUE UNIT``)."""


def _tool(rng: random.Random, name: str) -> ToolSpec:
    """A tool of 1-2 arguments, numbers or words (a pair of both kinds MIXED of the time)."""
    count = rng.choice((1, 1, 2))
    kinds = (rng.sample(("number", "word"), 2) if count == 2 and rng.random() < MIXED
             else [rng.choice(("number", "word"))] * count)
    slots = [rng.choice(NUMBER_SLOTS if kind == "number" else WORD_SLOTS) for kind in kinds]
    if len(set(slots)) < len(slots):
        slots[1] = _other_slot(rng)
    slots = [_other_slot(rng) if rng.random() < OTHER_SLOT else slot for slot in slots]
    return ToolSpec(name, tuple(slots), tuple(kinds))


def _other_slot(rng: random.Random) -> str:
    """A placeholder of no telling name: one of OTHER_SLOTS or an invented word in capitals."""
    return rng.choice(OTHER_SLOTS) if rng.random() < 0.5 else _invented(rng).upper()


DIGITS = (0.2, 0.3, 0.25, 0.15, 0.07, 0.03)
"""How often a number has 1, 2, ... 6 digits (questions' second numbers and tool answers), so that a number is
copied whole whatever its length, not cut to the length the corpus shows most."""
NEGATIVE = 0.1
"""The share of those numbers that are below zero (``-12``), copied with their sign."""


def _number(rng: random.Random) -> int:
    """A number of 1-6 digits, as often as DIGITS says, negative NEGATIVE of the time."""
    digits = rng.choices(range(1, len(DIGITS) + 1), DIGITS)[0]
    value = rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)
    return -value if rng.random() < NEGATIVE else value


def _question(rng: random.Random) -> tuple[str, list[str]]:
    """A question and the values it holds (numbers as text, words)."""
    a, b, w, v = rng.randint(0, 99), _number(rng), _word(rng), _word(rng)
    forms = [(f"What is {a} + {b}?", [a, b]), (f"Compute {a} * {b}.", [a, b]), (f"What is {b} minus {a}?", [b, a]),
             (f"Add {a} and {b}.", [a, b]), (f"Reverse the word {w}.", [w]), (f"What is {w} in upper case?", [w]),
             (f"How many letters are in '{w}'?", [w]), (f"What is the {w} of {v}?", [w, v]),
             (f"Find the value stored under {w}.", [w]), (f"Is {a} greater than {b}?", [a, b]),
             (f"Bring the counter from 0 to {a}.", [a]), (f"Look up {w} and report its number.", [w]),
             (f"The secret is {a}. Which word is {v}?", [a, v]), (f"Sum {a}, {b} and {rng.randint(0, 9)}.", [a, b]),
             (f"Task {a}: {w} {v} {b}.", [a, w, v, b])]
    roll = rng.random()
    if roll < SENTENCE:
        text, values = _sentence(rng)
    else:
        if roll < SENTENCE + EMBEDDED:
            forms = [(form.format(w=w, f=_filler(rng), g=_filler(rng)), [w]) for form in EMBEDDED_FORMS]
        text, values = rng.choice(forms)
    return _chatty(rng, text), [str(x) for x in values]


COMMON = ("i", "you", "we", "they", "my", "our", "your", "the", "a", "an", "this", "that", "it", "is", "are", "was",
          "will", "can", "do", "does", "have", "has", "need", "want", "would", "like", "please", "tell", "me", "us",
          "know", "go", "going", "get", "see", "make", "take", "give", "find", "think", "say", "ask", "help", "use",
          "come", "leave", "stay", "buy", "send", "book", "check", "pay", "bring", "keep", "still", "just", "also",
          "very", "soon", "now", "then", "here", "there", "again", "later", "tomorrow", "tonight", "yesterday",
          "early", "late", "next", "last", "new", "old", "big", "small", "good", "best", "long", "short", "many",
          "much", "some", "any", "every", "other", "same", "how", "what", "which", "when", "where", "who", "why",
          "and", "or", "but", "so", "if", "with", "by", "about", "before", "after", "into", "over", "there", "time",
          "day", "year", "people", "way", "thing", "place", "home", "city", "town", "room", "door", "car", "bus",
          "train", "road", "street", "station", "airport", "ticket", "money", "price", "bill", "card", "letter",
          "phone", "email", "name", "number", "word", "question", "answer", "problem", "idea", "trip", "holiday",
          "hotel", "flight", "seat", "table", "food", "dinner", "lunch", "water", "coffee", "book", "game", "show",
          "film", "music", "friend", "mother", "father", "sister", "brother", "child", "teacher", "doctor", "guest")
"""Common English words that a SENTENCE question holds around its values and that are never arguments."""
SENTENCE = 0.3
"""The share of questions that are a sentence of COMMON words holding one or two values (a word, a number or a
code), each after a preposition half of the time: the value is what is not a common word."""
LEADS = ("in", "for", "from", "to", "at", "on", "called", "named", "of", "is", "about", "with")
CODE = 0.25
"""The share of a SENTENCE question's values, and of tool answers' word values, that are codes (``KX482``)."""


def _code(rng: random.Random) -> str:
    """A code of capital letters and digits (``B12``, ``KX482``)."""
    letters = "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXZ") for _ in range(rng.randint(1, 3)))
    return letters + str(rng.randint(1, 10 ** rng.randint(1, 4) - 1))


def _sentence(rng: random.Random) -> tuple[str, list[str]]:
    """A SENTENCE question: COMMON words with one or two values in them, in the order they appear."""
    values = [_code(rng) if roll < CODE else str(_number(rng)) if roll < 0.6 else _word(rng)
              for roll in (rng.random() for _ in range(rng.choice((1, 1, 2))))]
    words = [rng.choice(COMMON) for _ in range(rng.randint(5, 12))]
    for value, at in zip(values, sorted(rng.sample(range(1, len(words) + 1), len(values)), reverse=True)):
        words[at:at] = [rng.choice(LEADS), value] if rng.random() < 0.5 else [value]
    values = [w for w in words if w in values]
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice(("?", ".", "?", " please.")), values


FILLERS = ("shop", "store", "office", "team", "house", "market", "school", "farm", "kitchen", "trip", "week",
           "morning", "report", "order", "client", "friend", "manager", "project", "meeting", "weekend", "work",
           "family", "party", "class", "night", "today", "list", "plan", "sale", "boss")
"""Common words of a chatty question that are never an argument (the question's value sits among them)."""
EMBEDDED = 0.25
"""The share of questions whose one value (a word) sits among FILLERS (``How many boots does the shop have?``)."""
EMBEDDED_FORMS = ("How many {w} does the {f} have?", "How many {w} are in the {f}?", "Where is the {w} for the {f}?",
                  "My {f} wants to know about {w}.", "Check {w} before the {f} starts.",
                  "The {f} needs the {w} by the {g}.", "What does the {f} say about {w}?",
                  "I lost the {w} at the {f}. Can you find it?", "Our {f} asks how much {w} is left this {g}.")
"""Questions of one word value among fillers."""
CHATTY = 0.25
"""The share of questions with a sentence of fillers before or after them."""


def _filler(rng: random.Random) -> str:
    return rng.choice(FILLERS)


def _chatty(rng: random.Random, question: str) -> str:
    """``question``, CHATTY of the time with a sentence of fillers (no value) before or after it."""
    if rng.random() >= CHATTY:
        return question
    aside = rng.choice((f"I am busy with the {_filler(rng)} today.", f"This is for my {_filler(rng)}.",
                        f"Quick question from the {_filler(rng)}.", f"Thanks, the {_filler(rng)} is waiting.",
                        f"It is for the {_filler(rng)} {_filler(rng)}.", "Please help."))
    return f"{aside} {question}" if rng.random() < 0.5 else f"{question} {aside}"


NAMING = 0.2
"""The share of tasks whose question names their first tool (``Name the capital of norvia`` with a tool
``capital``): the tool's name in the question is not an argument."""


def _naming_question(rng: random.Random, name: str) -> tuple[str, list[str]]:
    """A question that names the tool ``name`` and holds one value, a word or a number (its argument)."""
    value = _word(rng) if rng.random() < 0.7 else str(rng.randint(0, 999))
    forms = (f"Name the {name} of {value}.", f"What is the {name} of {value}?", f"Find the {name} for {value}.",
             f"Give the {name} of {value}.", f"Get the {name} of {value} and report it.",
             f"{value}: what is its {name}?")
    return rng.choice(forms), [value]


def _usage(tool: ToolSpec) -> str:
    return f"<call> {' '.join((tool.name, *tool.slots))} </call>"


HEADS = ("Use", "Call", "You may call", "Tools:", "Ask with", "Try", "You can use", "Available:", "Work with",
         "Start with", "Look it up with", "First call")
"""How a sentence-style prompt introduces the tools."""
FINISHES = (", then", " and finish with", ". End with", "; answer with", ". Finish with", " and then", ". Submit with",
            ", and reply with")
"""How a sentence-style prompt introduces the answer tool after the others."""


VERBS = ("returns", "converts", "looks up", "computes", "counts", "checks", "adds", "stores", "reads", "changes",
         "finds", "gives", "turns", "sends", "moves", "makes")
"""Verbs of the invented tool descriptions."""


def _description(rng: random.Random) -> str:
    """What a tool does, as a prompt describes it: one of DESCRIPTIONS or an invented sentence of made-up nouns
    (``converts the tomika to a rtsa``), whose words are never arguments."""
    if rng.random() < 0.5:
        return rng.choice(DESCRIPTIONS)
    text = f"{rng.choice(VERBS)} {rng.choice(('a', 'the', 'its', 'one'))} {_word(rng)}"
    if rng.random() < 0.5:
        preposition = rng.choice(("to", "of", "for", "in", "into"))
        adjective = rng.choice(("next ", "other ", "given ", ""))
        text += f" {preposition} the {adjective}{_word(rng)}"
    return text[0].upper() + text[1:] + "."


def _described(rng: random.Random, tool: ToolSpec) -> str:
    """A usage with a description after it, in a sentence (``<call> count WORD </call> counts the letters``)."""
    return f"{_usage(tool)} {_description(rng).rstrip('.').lower()}"


def _prompt(rng: random.Random, question: str, tools: list[ToolSpec], answer: ToolSpec) -> str:
    """The task in one of the templates: a sentence naming the tools (the calculator's style, with varied wording),
    a TRL-style tool list, "First ...; finish with ...", or the usages described inline."""
    template = rng.randrange(4) if tools else 0
    if template == 0:
        uses = rng.choice((", ", " or ", "; ", " and ")).join(_usage(t) for t in tools)
        return (f"{question} {rng.choice(HEADS)} {uses}{rng.choice(FINISHES)} {_usage(answer)}." if tools
                else f"{question} {rng.choice(('Answer with', 'Reply with', 'Finish with'))} {_usage(answer)}.")
    if template == 1:
        lines = [f"{_usage(t)}: {_description(rng)}" for t in (*tools, answer)]
        return "\n".join([question, *lines, "A reply without a call ends the episode."])
    if template == 2:
        names = " or ".join(_usage(t) for t in tools)
        return f"{question}\nFirst {names}; finish with {_usage(answer)}."
    return f"{question} Tools: {'; '.join(_described(rng, t) for t in (*tools, answer))}."


IN_ORDER = 0.8
"""The share of calls whose arguments take the fitting values of the context in order (first slot, first value;
no value twice); the rest pick each argument at random among them."""


def _pick(rng: random.Random, kind: str, context: list[str]) -> str:
    """An argument of ``kind`` copied from ``context`` (any value when none fits; a literal option as is)."""
    if kind not in ("number", "word", "any"):
        return kind
    return rng.choice(_fitting(kind, context) or context or ["0"])


def _fitting(kind: str, context: list[str]) -> list[str]:
    return [v for v in context if kind == "any" or bool(_NUMBER.match(v)) == (kind == "number")]


def _arguments(rng: random.Random, kinds: tuple[str, ...], context: list[str]) -> tuple[str, ...]:
    """A call's arguments: in order (IN_ORDER of the time, each slot the first fitting value not yet used), else
    each at random."""
    if rng.random() >= IN_ORDER:
        return tuple(_pick(rng, k, context) for k in kinds)
    used: list[str] = []
    for kind in kinds:
        fresh = [v for v in _fitting(kind, context) if v not in used]
        used.append(fresh[0] if fresh and kind in ("number", "word", "any") else _pick(rng, kind, context))
    return tuple(used)


REVERSED = 0.2
"""The share of tool answers that are one of the call's arguments spelled backwards (a word tool's typical answer):
its pieces are the argument's in another order, so copying it needs more than the last token as context."""


WRAPPED = 0.4
"""The share of tool answers whose value sits inside a sentence (``the total is 6000 units``, ``count: 37 left``)."""
UNITS = ("left", "items", "units", "points", "in total", "found", "dollars", "times", "each", "per day", "so far",
         "in stock", "pieces", "people")
"""Words that may follow a value in a tool's sentence."""


def _wrapped(rng: random.Random, value: str) -> str:
    """``value`` inside a sentence of a tool's answer: a lead (``result:``, ``the count is``) and words after it (a
    unit, a remark), one or both."""
    noun = rng.choice(("result", "count", "total", "value", "answer", "number", _filler(rng)))
    lead = rng.choice(("", f"{noun}: ", f"the {noun} is ", "it is ", "= ", "got "))
    remark = rng.choice(("ok", "checked", "as of today"))
    tail = rng.choice(("", f" {rng.choice(UNITS)}", f" {rng.choice(UNITS)}, {remark}"))
    return f"{lead}{value}{tail}" if lead or tail else f"{noun} {value}"


PAIRED = 0.2
"""The share of valued tool answers that are a sentence holding two values (``3 lamps at 40 dollars each``,
``leaves at 1415 from gate 7``), of which a later call may take either."""
PAIRS = ("{a} {f} at {b} {u}", "{f} {a}, {g} {b}", "{a} {u} from {f} {b}", "{f} {a} and {g} {b}",
         "the {f} is {a} and the {g} is {b}", "{a} by {b}", "from {a} to {b} {u}", "{f}: {a} {u}, {g}: {b}")
"""Sentences of two values: ``{a}`` and ``{b}`` the values, ``{f}`` and ``{g}`` fillers, ``{u}`` a unit."""


def _value(rng: random.Random) -> str:
    """A tool answer's value: a number half of the time, else a code or a word."""
    return str(_number(rng)) if rng.random() < 0.5 else _code(rng) if rng.random() < CODE else _word(rng)


def _observe(rng: random.Random, arguments: tuple[str, ...]) -> tuple[str, list[str]]:
    """What a random tool world answers a call (with ``arguments``) that does not end the episode, and the values it
    holds in order (none for an error or a bare status)."""
    if arguments and rng.random() < REVERSED:
        chosen = rng.choice(arguments)
        value = "-" + chosen[:0:-1] if _NUMBER.match(chosen) and chosen.startswith("-") else chosen[::-1]
    else:
        roll = rng.random()
        if roll >= 0.75:
            return (rng.choice(ERRORS) if roll < 0.9 else rng.choice(("ok", "done", "no result"))), []
        if roll < 0.75 * PAIRED:
            a, b = _value(rng), _value(rng)
            while b == a:
                b = _value(rng)
            text = rng.choice(PAIRS).format(a=a, b=b, f=_filler(rng), g=_filler(rng), u=rng.choice(UNITS))
            return text, [a, b]
        value = _value(rng)
    return (_wrapped(rng, value) if rng.random() < WRAPPED else value), [value]


IN_SEQUENCE = 0.5
"""The share of tasks of several tools whose play calls each tool once, in the order the prompt names them (look
up, then compute, then answer); the rest call 0-3 tools at random."""
RECENT = 0.6
"""The share of calls after an observation with values that take those values before the older ones."""


def _play(rng: random.Random, question_values: list[str], tools: list[ToolSpec],
          answer: ToolSpec) -> tuple[list[str], list[str]]:
    """Scripted random play: 0-3 calls of the prompt's other tools, then the answer tool -> (calls, observations)."""
    context, calls, observations, last = list(question_values), [], [], []
    if len(tools) > 1 and rng.random() < IN_SEQUENCE:
        played = list(tools)
    else:
        turns = rng.choices((0, 1, 2, 3), (0.05, 0.5, 0.3, 0.15))[0] if tools else 0
        played = [rng.choice(tools) for _ in range(turns)]
    for tool in played:
        recent = last if last and rng.random() < RECENT else []
        arguments = _arguments(rng, tool.kinds, recent + [v for v in context if v not in recent])
        calls.append(_usage(ToolSpec(tool.name, arguments, tool.kinds)))
        observation, values = _observe(rng, arguments)
        observations.append(observation)
        if values:
            context += values
            last = values
    kind = answer.kinds[0]
    value = rng.choice(last) if last and kind == "any" and rng.random() < 0.7 else _pick(rng, kind, context)
    calls.append(_usage(ToolSpec(answer.name, (value,), answer.kinds)))
    observations.append(rng.choice(("done", "correct", "wrong", "score 0", "score 1")))
    return calls, observations


def _choice_task(rng: random.Random) -> Transcript:
    """A one-turn choice: two options named as two calls of one tool, one call picks one."""
    options, name = rng.choice(CHOICES), _answer_name(rng)
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    question = rng.choice((f"Is {a} greater than {b}?", f"Is {a} even?", f"Is {_word(rng)} a colour?",
                           f"Does {_word(rng)} come before {_word(rng)}?"))
    prompt = f"{question} Reply <call> {name} {options[0]} </call> or <call> {name} {options[1]} </call>."
    return Transcript(prompt, (f"<call> {name} {rng.choice(options)} </call>",), (rng.choice(("correct", "wrong")),))


def _submit_task(rng: random.Random) -> Transcript:
    """reasoning-gym's form: a question, then "Reply with the answer alone, or as <call> submit ANSWER </call>."."""
    question, values = _question(rng)
    prompt = f"{question}\nReply with the answer alone, or as <call> submit ANSWER </call>."
    return Transcript(prompt, (f"<call> submit {rng.choice(values)} </call>",), ("score 0",))


def transcript(rng: random.Random) -> Transcript:
    """One invented task and one episode of scripted random play on it."""
    roll = rng.random()
    if roll < 0.12:
        return _choice_task(rng)
    if roll < 0.2:
        return _submit_task(rng)
    names = [_invented(rng) if rng.random() < INVENTED else rng.choice(TOOL_NAMES)
             for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))]
    tools = [_tool(rng, name) for name in names] if rng.random() < 0.9 else []
    slot = _other_slot(rng) if rng.random() < OTHER_SLOT else rng.choice(ANSWER_SLOTS)
    answer = ToolSpec(_answer_name(rng), (slot,), ("any",))
    question, values = (_naming_question(rng, tools[0].name) if tools and rng.random() < NAMING
                        else _question(rng))
    calls, observations = _play(rng, values, tools, answer)
    return Transcript(_prompt(rng, question, tools, answer), tuple(calls), tuple(observations))


def corpus(size: int, seed: int) -> list[Transcript]:
    """``size`` transcripts, the same for a seed."""
    rng = random.Random(seed)
    return [transcript(rng) for _ in range(size)]


__all__ = ["ANSWER_TOOLS", "TOOL_NAMES", "VERSION", "ToolSpec", "Transcript", "corpus", "prompt_tools",
           "tools_with_arguments", "transcript", "well_formed"]
