"""Word copy probe: how well a tool-use agent copies multi-piece words, teacher-forced on the word environment.

For each word of ``tests/support/tool_envs.py``'s WordTool, the agent in FOLDER scores the right episode
(``<call> reverse WORD </call>``, the observation WORD spelled backwards, ``<call> submit DROW </call>``) and prints
the probability of each copied argument piece, with the agent's own top choice in brackets where it gives the right
piece less than one half. Two products summarise a word: ``reverse`` (the word's pieces and the closing tag) and
``copy`` (the reversed word's pieces and the closing tag, given that the agent chose to submit). A piece that occurs
twice in the context (``saddle`` and ``elddas`` share ``dd``) is where copying from the last token alone fails.

Run: ``python scripts/word_copy_probe.py FOLDER`` (an agent folder, e.g. ``~/.cache/pglab/agent-tool-full-HASH``).
Output kept in docs/results/tool-agent/word-copy.txt.
"""

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pglab.models.hf import load_causal_lm  # noqa: E402
from support.tool_envs import WORDS, WordTool  # noqa: E402


def scored(model, tokenizer, segments: list[tuple[str, bool]]) -> list[tuple[str, float, str]]:
    """(piece, its probability, the top piece) of each scored segment's tokens; segments: (text, scored)."""
    ids, keep = [tokenizer.eos_token_id], [False]
    for text, scored_segment in segments:
        piece_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += piece_ids
        keep += [scored_segment] * len(piece_ids)
    x = torch.tensor([ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=x).logits[0, :-1], -1)
    return [(tokenizer.decode([ids[i]]), float(logp[i - 1, ids[i]].exp()),
             tokenizer.decode([int(logp[i - 1].argmax())])) for i in range(1, len(ids)) if keep[i]]


def prompt_for(word: str) -> str:
    """The environment's own prompt for ``word`` (the first reset seed that draws it)."""
    env = WordTool()
    return next(prompt for prompt in map(env.reset, range(10_000)) if env.word == word)


def shown(pieces: list[tuple[str, float, str]]) -> str:
    return " ".join(f"{p!r}:{q:.2f}" + (f"[{top!r}]" if q < 0.5 else "") for p, q, top in pieces)


def main(folder: str) -> None:
    model, tokenizer = load_causal_lm(folder)
    model.eval()
    totals = [0.0, 0.0]
    for word in WORDS:
        prompt = prompt_for(word)
        call = f"\n<call> reverse {word} </call>"
        reverse = scored(model, tokenizer, [(prompt + "\n<call> reverse", False), (f" {word} </call>", True)])
        copy = scored(model, tokenizer, [(prompt + call + f"\n<obs> {word[::-1]} </obs>\n<call> submit", False),
                                         (f" {word[::-1]} </call>", True)])
        products = [math.prod(q for _, q, _ in pieces) for pieces in (reverse, copy)]
        totals = [t + p for t, p in zip(totals, products)]
        print(f"{word:9s} reverse {products[0]:.2f} copy {products[1]:.2f} | {shown(reverse)} || {shown(copy)}")
    print(f"mean over {len(WORDS)} words: reverse {totals[0] / len(WORDS):.3f}, copy {totals[1] / len(WORDS):.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
