"""Small text-turn environments of the kind a new user writes (tools named only in the prompt), for the tool-use
agent's tests and the sweep of ``train-agent``'s defaults (docs/results/agent-sweep/).

``calculator`` is the docs' own (docs/agents.md "Your own environment"); ``word`` reverses a word then answers it;
``lookup`` looks a key up in a table then answers its value (several turns); ``parity`` is a one-turn yes/no choice
where a blind guess gets half; ``multiplier`` (numbers, a tool list as the TRL adapter writes it) and ``capital`` (a
made-up country's capital, word arguments) are held out of the defaults sweep. Each factory takes no argument:
``--env support.tool_envs:calculator`` from tests/.
"""

from __future__ import annotations

import random
import re

WORDS = ("maple", "harbor", "velvet", "quartz", "meadow", "copper", "falcon", "timber", "saddle", "crystal",
         "lantern", "marble", "pepper", "thunder", "violet", "walnut")
_CALL = re.compile(r"<call>\s*(\w+)\s*(.*?)\s*</call>", re.DOTALL)


def parse(text: str) -> tuple[str, list[str]] | None:
    """``<call> TOOL ARG ... </call>`` -> (TOOL, ARGs), None when the text holds no call."""
    found = _CALL.search(text)
    return (found.group(1), found.group(2).split()) if found else None


class Calculator:
    """Add two numbers; the calculator tool answers <call> add A B </call>, <call> answer N </call> ends."""

    def reset(self, seed: int) -> str:
        rng = random.Random(seed)
        self.a, self.b, self.turns = rng.randint(10, 99), rng.randint(10, 99), 0
        return f"What is {self.a} + {self.b}? Use <call> add A B </call>, then <call> answer N </call>."

    def step(self, text: str):
        self.turns += 1
        found = re.search(r"<call>\s*(add|answer)\s+([-\d ]+?)\s*</call>", text)
        if found is None:
            return "error: malformed call", 0.0, self.turns >= 4, {}
        tool, numbers = found.group(1), [int(n) for n in found.group(2).split() if n.lstrip("-").isdigit()]
        if tool == "add" and len(numbers) == 2:
            return str(sum(numbers)), 0.0, self.turns >= 4, {}
        if tool == "answer" and len(numbers) == 1:
            return "done", float(numbers[0] == self.a + self.b), True, {}
        return "error: wrong arguments", 0.0, self.turns >= 4, {}


class WordTool:
    """Reverse a word with <call> reverse WORD </call>, then submit the result with <call> submit WORD </call>."""

    def reset(self, seed: int) -> str:
        self.word, self.turns = random.Random(seed).choice(WORDS), 0
        return (f"Spell the word {self.word} backwards. Tools: <call> reverse WORD </call> reverses a word; "
                "<call> submit WORD </call> ends with your answer.")

    def step(self, text: str):
        self.turns += 1
        call, out_of_turns = parse(text), self.turns >= 4
        if call is None or len(call[1]) != 1:
            return "error: write <call> TOOL WORD </call>", 0.0, out_of_turns, {}
        tool, (word,) = call
        if tool == "reverse":
            return word[::-1], 0.0, out_of_turns, {}
        if tool == "submit":
            return "done", float(word == self.word[::-1]), True, {}
        return f"error: unknown tool {tool}", 0.0, out_of_turns, {}


class Lookup:
    """A table of four keys; look one up with <call> lookup KEY </call>, then <call> answer VALUE </call>."""

    def reset(self, seed: int) -> str:
        rng = random.Random(seed)
        keys = rng.sample(WORDS, 4)
        self.table = {k: rng.randint(100, 999) for k in keys}
        self.key, self.turns = rng.choice(keys), 0
        return (f"Which number is stored under {self.key}? Look it up with <call> lookup KEY </call> and reply "
                "<call> answer VALUE </call>.")

    def step(self, text: str):
        self.turns += 1
        call, out_of_turns = parse(text), self.turns >= 5
        if call is None or len(call[1]) != 1:
            return "error: malformed call", 0.0, out_of_turns, {}
        tool, (arg,) = call
        if tool == "lookup":
            return (str(self.table[arg]) if arg in self.table else "error: no such key"), 0.0, out_of_turns, {}
        if tool == "answer":
            return "done", float(arg == str(self.table[self.key])), True, {}
        return f"error: unknown tool {tool}", 0.0, out_of_turns, {}


class Parity:
    """Is a number even? One turn: <call> answer yes </call> or <call> answer no </call>; a blind guess gets half."""

    def reset(self, seed: int) -> str:
        self.n = random.Random(seed).randint(10, 99)
        return f"Is {self.n} even? Reply <call> answer yes </call> or <call> answer no </call>."

    def step(self, text: str):
        call = parse(text)
        said = call[1][0] if call and call[0] == "answer" and len(call[1]) == 1 else None
        truth = "yes" if self.n % 2 == 0 else "no"
        return "done", float(said == truth), True, {}


def calculator() -> Calculator:
    return Calculator()


def word() -> WordTool:
    return WordTool()


def lookup() -> Lookup:
    return Lookup()


def parity() -> Parity:
    return Parity()


class Multiplier:
    """Multiply two numbers with <call> multiply X Y </call>; <call> submit RESULT </call> ends (one or more turns)."""

    def reset(self, seed: int) -> str:
        rng = random.Random(seed)
        self.x, self.y, self.turns = rng.randint(2, 30), rng.randint(2, 30), 0
        return (f"Compute {self.x} times {self.y}.\n<call> multiply X Y </call>: multiplies two numbers.\n"
                "<call> submit RESULT </call>: your final answer.")

    def step(self, text: str):
        self.turns += 1
        call, out_of_turns = parse(text), self.turns >= 4
        if call is None:
            return "error: no call", 0.0, out_of_turns, {}
        tool, args = call
        if tool == "multiply" and len(args) == 2 and all(a.isdigit() for a in args):
            return str(int(args[0]) * int(args[1])), 0.0, out_of_turns, {}
        if tool == "submit" and len(args) == 1:
            return "done", float(args[0] == str(self.x * self.y)), True, {}
        return "error: wrong call", 0.0, out_of_turns, {}


CITIES = {"norvia": "kalpen", "drosland": "mitravo", "essary": "pontel", "quamor": "silbek", "tarvoni": "ulmessa",
          "veltra": "yorrin", "zembia": "abrosk", "hollune": "ferradi"}


class Capital:
    """Ask a made-up country's capital with <call> capital COUNTRY </call>, then <call> reply CITY </call>."""

    def reset(self, seed: int) -> str:
        self.country, self.turns = random.Random(seed).choice(sorted(CITIES)), 0
        return (f"Name the capital of {self.country}. Ask with <call> capital COUNTRY </call> and finish with "
                "<call> reply CITY </call>.")

    def step(self, text: str):
        self.turns += 1
        call, out_of_turns = parse(text), self.turns >= 4
        if call is None or len(call[1]) != 1:
            return "error: malformed call", 0.0, out_of_turns, {}
        tool, (arg,) = call
        if tool == "capital":
            return CITIES.get(arg, "unknown country"), 0.0, out_of_turns, {}
        if tool == "reply":
            return "done", float(arg == CITIES[self.country]), True, {}
        return f"error: unknown tool {tool}", 0.0, out_of_turns, {}


def multiplier() -> Multiplier:
    return Multiplier()


def capital() -> Capital:
    return Capital()


ENVS = {"calculator": calculator, "word": word, "lookup": lookup, "parity": parity}
"""The sweep's environments by name."""
HELD_OUT_ENVS = {"multiplier": multiplier, "capital": capital}
"""Environments the defaults were not chosen on (only the acceptance runs use them)."""
