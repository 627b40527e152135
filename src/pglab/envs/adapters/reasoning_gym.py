"""reasoning-gym's procedural tasks as a one-turn text environment: ``--env reasoning-gym:TASK``.

``reset(seed)`` draws task ``seed`` (reasoning-gym's ``create_dataset(TASK, seed=seed, size=1)[0]``, made
offline from the seed alone) and poses its question; ``step(text)`` takes the reply as the answer and ends the
episode with the task's own scorer, ``score_answer(answer, entry)`` (1 for the answer, a task's partial credit
in between, 0 otherwise). The answer is the reply without the call markers, so ``<call> 42 </call>`` and a bare
``42`` both answer 42; ``<call> submit ANSWER </call>`` answers ANSWER. Needs the extra ``pglab[reasoning-gym]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pglab.runtime.options import SettingsError

_SUBMIT = re.compile(r"<call>\s*submit\b(.*?)</call>", re.DOTALL)
_MARKERS = re.compile(r"</?call>")
INSTRUCTION = "Reply with the answer alone, or as <call> submit ANSWER </call>."
"""What follows every question in the prompt."""


def answer_of(reply: str) -> str:
    """The answer in a reply, stripped: what ``<call> submit ... </call>`` holds, else the reply without call
    markers."""
    submitted = _SUBMIT.search(reply)
    return (submitted.group(1) if submitted else _MARKERS.sub(" ", reply)).strip()


def known_tasks() -> list[str]:
    """reasoning-gym's task names; SettingsError naming the extra when it is not installed."""
    try:
        from reasoning_gym.factory import DATASETS
    except ImportError:
        raise SettingsError("--env reasoning-gym:TASK needs reasoning-gym: pip install 'pglab[reasoning-gym]'"
                            ) from None
    return sorted(DATASETS)


class ReasoningGymEnv:
    """One reasoning-gym task family in the text-turn protocol: one question, one reply, its score."""

    def __init__(self, task: str):
        """``task``: a reasoning-gym dataset name (``chain_sum``, ``ransom_note``, ...)."""
        import reasoning_gym

        self.task, self.create = task, reasoning_gym.create_dataset

    def reset(self, seed: int) -> str:
        self.dataset = self.create(self.task, seed=seed, size=1)
        self.entry: dict[str, Any] = self.dataset[0]
        return f"{self.entry['question'].strip()}\n{INSTRUCTION}"

    def step(self, text: str) -> tuple[str, float, bool, dict]:
        answer = answer_of(text)
        score = float(self.dataset.score_answer(answer, self.entry))
        return f"score {score:g}", score, True, {"answer": answer, "expected": self.entry["answer"]}


def reasoning_gym_factory(task: str) -> Callable[[str], ReasoningGymEnv]:
    """``TASK`` -> a function from a split to a fresh :class:`ReasoningGymEnv` (the split's seeds set it apart:
    pglab draws training seeds below 100,000 and held-out seeds from 1,000,000)."""
    tasks = known_tasks()
    if task not in tasks:
        import difflib

        near = difflib.get_close_matches(task, tasks, n=3) or tasks[:5]
        raise SettingsError(f"--env reasoning-gym:{task}: no such task; pass one of reasoning-gym's tasks, e.g. "
                            f"{', '.join(near)}")
    return lambda split: ReasoningGymEnv(task)


__all__ = ["INSTRUCTION", "ReasoningGymEnv", "answer_of", "known_tasks", "reasoning_gym_factory"]
