"""Call probe: where a tool-use agent loses the right episode of a held-out environment, teacher-forced.

For each environment, on its 8 held-out tasks (the seeds train-agent measures), the agent in FOLDER scores the
right episode (the right tool with the right arguments, then the answer tool with the right answer) and the probe
prints the mean probability of four parts: the first call's tool name, its arguments with the closing tag, the
answer tool's name, and the answer's argument with the closing tag. For the first task it also prints each
argument piece's probability, with the agent's own top choice in brackets where it gives the right piece less than
one half. A part near 0 is what the reinforcement cannot find by sampling.

Run: ``python scripts/call_probe.py FOLDER [ENV ...]`` (an agent folder, e.g. ``~/.cache/pglab/agent-tool-full-HASH``;
default: the held-out environments of tests/support/tool_envs.py). Output kept in docs/results/tool-agent/.
"""

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from word_copy_probe import scored, shown  # noqa: E402

import support.tool_envs as envs  # noqa: E402
from pglab.models.hf import load_causal_lm  # noqa: E402
from pglab.trainers.hf_agent import USER_HELDOUT_SEEDS  # noqa: E402

RIGHT = {
    "multiplier": lambda e: (("multiply", f"{e.x} {e.y}"), ("submit", str(e.result))),
    "capital": lambda e: (("capital", e.country), ("reply", envs.CITIES[e.country])),
    "convert": lambda e: (("convert", f"{e.value} {e.unit}"), ("answer", str(e.result))),
    "stock": lambda e: (("stock", e.item), ("answer", str(e.counts[e.item]))),
    "weather": lambda e: (("forecast", e.town), ("submit", str(e.degrees[e.town]))),
    "area": lambda e: (("area", f"{e.width} {e.length}"), ("answer", str(e.result))),
}
"""The right episode of each held-out environment after reset: (tool, arguments), (answer tool, answer)."""
PARTS = ("tool", "arguments", "answer tool", "answer")


def probe(model, tokenizer, name: str, seed: int, detail: bool) -> dict[str, float]:
    """The probability of each part of the right episode of task ``seed`` (printing the pieces if ``detail``)."""
    env = getattr(envs, name)()
    prompt = env.reset(seed)
    (tool, arguments), (answer_tool, answer) = RIGHT[name](env)
    observation = env.step(f"<call> {tool} {arguments} </call>")[0]
    segments = [(prompt, None), ("\n<call>", None), (f" {tool}", "tool"), (f" {arguments} </call>", "arguments"),
                (f"\n<obs> {observation} </obs>\n<call>", None), (f" {answer_tool}", "answer tool"),
                (f" {answer} </call>", "answer")]
    found = {}
    for part in PARTS:
        pieces = scored(model, tokenizer, [(text, kind == part) for text, kind in segments])
        found[part] = math.prod(q for _, q, _ in pieces)
        if detail and part in ("arguments", "answer"):
            print(f"  {name} {part}: {shown(pieces)}")
    return found


def main(folder: str, names: list[str]) -> None:
    model, tokenizer = load_causal_lm(folder)
    model.eval()
    print(f"agent {Path(folder).name}; mean over {len(USER_HELDOUT_SEEDS)} held-out tasks of each part's probability")
    for name in names:
        rows = [probe(model, tokenizer, name, seed, seed == USER_HELDOUT_SEEDS[0]) for seed in USER_HELDOUT_SEEDS]
        print(f"{name:10s} " + "  ".join(f"{part} {sum(r[part] for r in rows) / len(rows):.3f}" for part in PARTS))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or list(RIGHT))
