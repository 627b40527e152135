"""Argument rank probe: under constrained calls, where does the tool-use agent rank the right first argument?

Constrained calls (pglab.sampling.call_grammar) leave the agent one choice per argument: a word of the context. For
each environment, on its 8 held-out tasks (the seeds train-agent measures), this scores every context word as the
first argument of the right tool, teacher-forced under the grammar (the product of the renormalised probabilities
of the word's pieces), and prints the right word's rank among them, its probability, and the agent's top three; and
the probability that the first call names the right tool at all, with the tool the agent prefers. A right word
ranked low with a probability near 0, or a right tool the agent seldom opens with, is one the reinforcement does not
find by sampling.

Run: ``python scripts/argument_rank_probe.py [ENV ...]`` (default: every environment below), with the embedded
tool-use agent. Output kept in docs/results/tool-agent/argument-rank.txt.
"""

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import support.tool_envs as envs  # noqa: E402
from pglab.models.hf import load_causal_lm  # noqa: E402
from pglab.sampling.call_grammar import OPEN  # noqa: E402
from pglab.sampling.text_episodes import TextLayout  # noqa: E402
from pglab.trainers.hf_agent import USER_HELDOUT_SEEDS, ensure_agent  # noqa: E402

FIRST = {
    "calculator": ("add", lambda e: str(e.a)), "capital": ("capital", lambda e: e.country),
    "convert": ("convert", lambda e: str(e.value)), "stock": ("stock", lambda e: e.item),
    "weather": ("forecast", lambda e: e.town), "area": ("area", lambda e: str(e.width)),
    "gate": ("gate", lambda e: e.flight), "road": ("distance", lambda e: e.pair[0]),
    "seats": ("seats", lambda e: e.day), "translate": ("translate", lambda e: e.key[0]),
    "exchange": ("exchange", lambda e: str(e.amount)), "birthday": ("birthday", lambda e: e.person),
    "letters": ("count", lambda e: e.word), "hotel": ("rate", lambda e: e.hotel),
    "postcode": ("postcode", lambda e: e.town), "colour": ("colour", lambda e: e.fruit),
    "library": ("shelf", lambda e: e.title), "flight": ("status", lambda e: e.flight),
    "age": ("born", lambda e: e.person), "stove": ("sensor", lambda e: e.device),
    "recipe": ("grams", lambda e: e.cake), "plural": ("plural", lambda e: e.word),
    "bus": ("timetable", lambda e: e.line), "spell": ("words", lambda e: e.number),
    "warehouse": ("count", lambda e: e.item), "password": ("reset", lambda e: e.user),
    "dose": ("dose", lambda e: e.medicine),
}
"""Each environment's right tool and its right first argument after reset."""


@torch.no_grad()
def word_logp(model, layout: TextLayout, grammar, head: list[int], text: str, word: str) -> float:
    """log pi_c(word as the next argument | head), the call's text so far ``text``."""
    ids = layout.encode(" " + word)
    logits = model(torch.tensor([head + ids])).logits[0]
    total = 0.0
    for k, token in enumerate(ids):
        allowed = list(grammar.allowed(text))
        if token not in allowed:
            return -math.inf
        total += float(logits[len(head) + k - 1][allowed].log_softmax(-1)[allowed.index(token)])
        text += layout.tokenizer.decode([token])
    return total


def main(names: list[str]) -> None:
    folder = ensure_agent("tool", "full", progress=False)
    model, tokenizer = load_causal_lm(str(folder))
    model.eval()
    layout = TextLayout(tokenizer, chat=False, calls="constrained")
    print(f"agent {folder.name}; per held-out task: rank of the right first argument / context words, its "
          "probability, the top three")
    for name in names:
        tool, right = FIRST[name]
        cells, ranks, tool_p = [], [], []
        for seed in USER_HELDOUT_SEEDS:
            env = getattr(envs, name)()
            prompt = env.reset(seed)
            grammar, prompt_ids = layout.grammar(prompt), layout.prompt_ids(prompt)
            text = f"<call> {tool}"
            head = prompt_ids + layout.encode(text)
            scores = {w: word_logp(model, layout, grammar, head, text, w) for w in sorted(grammar.words)}
            order = sorted(scores, key=lambda w: -scores[w])
            opening = prompt_ids + layout.encode(OPEN)
            tools = {t: word_logp(model, layout, grammar, opening, OPEN, t) for t in grammar.arities}
            ranks.append(order.index(right(env)) + 1)
            tool_p.append(math.exp(tools[tool]))
            cells.append(f"{ranks[-1]}/{len(order)} p={math.exp(scores[right(env)]):.3f} "
                         f"top {','.join(order[:3])}; tool p={tool_p[-1]:.3f} top {max(tools, key=tools.get)}")
        print(f"\n{name}: median rank {sorted(ranks)[len(ranks) // 2]}, first call names {tool} with mean p "
              f"{sum(tool_p) / len(tool_p):.3f}")
        for c in cells:
            print("   ", c)


if __name__ == "__main__":
    main(sys.argv[1:] or list(FIRST))
