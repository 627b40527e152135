"""Collapse warnings: what a run's per-step rows say went wrong, each as one line with one thing to try.

:func:`collapse_warnings` reads the history of rows :func:`pglab.trainers.loop.run_loop` returns
(train-agent's ``train.jsonl``, train-lm's ``metrics.jsonl``) and never the model. A check needs
its columns; a row without them (an older run, another trainer) makes that check silent. Each
line starts with ``warning:``, says what it saw (numbers and steps) and one thing to try. What
each check means and the thresholds below are in docs/agents.md, "Collapse warnings".

A run is compared with itself: the first ``window`` steps against the last ``window`` (or, for
the KL, the window before the last), with the standard error of each window's mean taken from the
spread of its per-step values, so a fall counts only when it is larger than ``SIGMAS`` standard
errors of the difference of the two means.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

SIGMAS = 3.0
"""How many standard errors of the difference of two window means a change must exceed."""
MIN_WINDOW = 3
"""The fewest steps a window holds; a run shorter than two windows is compared by no window check."""
WINDOW_SHARE = 8
"""A window is a 1/WINDOW_SHARE of the run's steps (at least MIN_WINDOW)."""
SKIP_PATIENCE = 5
"""Zero-gradient steps in a row that make a warning (or every step of a shorter run)."""
FALL_SHARE = 0.25
"""A rate falls 'well below the start' when it also loses at least this share of its start value."""
ENTROPY_SHARE = 0.25
"""Entropy collapses when the last window's is below this share of the first window's."""
KL_GROWTH = 2.0
"""The KL explodes when the last window's is more than this many times the window's before it..."""
KL_FLOOR = 0.01
"""... and above this many nats per policy token (below it no KL is worth a warning)."""
REPEAT_SHARE = 0.1
"""Repetition fills calls or replies when at least this share of them, over the last window, ran to the token
cap with one token filling at least REPEAT_MAJORITY of them."""
REPEAT_MAJORITY = 0.5
"""The share of a call's (reply's) tokens one id must fill for it to count as repeated."""


def repeat_share(segments: Sequence[Sequence[int]], capped: Sequence[bool]) -> float:
    """Share of ``segments`` (each call's or reply's token ids) that were cut at the token cap (``capped``) and
    whose most frequent id fills at least REPEAT_MAJORITY of them (0 when there is none)."""
    if not segments:
        return 0.0
    filled = sum(cut and len(ids) > 0 and Counter(ids).most_common(1)[0][1] >= REPEAT_MAJORITY * len(ids)
                 for ids, cut in zip(segments, capped, strict=True))
    return filled / len(segments)


def call_repeat_share(logs: Sequence[Any]) -> float:
    """:func:`repeat_share` over every call of a batch of episodes (``TokenBatch.info``: EpisodeLogs)."""
    calls = [ids for log in logs for ids in log.call_ids]
    return repeat_share(calls, [stop == "cap" for log in logs for stop in log.stops])


def monitored(update: Mapping[str, Any], batch: Any, beta: float) -> dict[str, float]:
    """What an episode trainer's row adds for the checks: the entropy estimate and zero-advantage share of the
    update's metrics, the repeated-token share of the batch's calls, its episodes (this process's), and
    (``beta`` > 0) the KL to the reference."""
    kl = {"kl_k1": update["kl_k1"], "policy_tokens": update["policy_tokens"]} if beta > 0 else {}
    return {"entropy": update["entropy"], "zero_adv_groups": update["zero_adv_groups"],
            "repeat_capped": call_repeat_share(batch.info), "episodes": batch.batch_size, **kl}


def window(steps: int) -> int:
    """The steps of one window: a WINDOW_SHARE-th of ``steps``, at least MIN_WINDOW."""
    return max(MIN_WINDOW, steps // WINDOW_SHARE)


def column(history: Sequence[Mapping[str, Any]], key: str) -> np.ndarray | None:
    """Every row's ``key`` as floats [N], None unless every row has it (a number)."""
    values = [row.get(key) for row in history]
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        return None
    return np.asarray(values, dtype=np.float64)


def window_means(first: np.ndarray, last: np.ndarray) -> tuple[float, float, float]:
    """(mean of first, mean of last, standard error of their difference from each window's spread)."""
    se = math.sqrt(sum(np.var(x, ddof=1) / len(x) for x in (first, last)))
    return float(first.mean()), float(last.mean()), se


def span(history: Sequence[Mapping[str, Any]], start: int, stop: int) -> str:
    """The step numbers of rows start..stop-1 as 'steps A-B' (the rows' own step numbering)."""
    return f"steps {history[start]['step']}-{history[stop - 1]['step']}"


def skipped_steps(history: Sequence[Mapping[str, Any]]) -> str | None:
    """Every step (or SKIP_PATIENCE in a row) skipped with a zero gradient: all advantages were 0."""
    flags = [bool(row.get("skipped")) and row.get("grad_norm") == 0 for row in history]
    longest, end, run = 0, 0, 0
    for i, flag in enumerate(flags):
        run = run + 1 if flag else 0
        if run > longest:
            longest, end = run, i + 1
    if not history or longest < min(SKIP_PATIENCE, len(history)):
        return None
    rewards = [history[i].get("reward") for i in range(end - longest, end)]
    shown = f"batch reward {min(rewards):.3g}" + (f" to {max(rewards):.3g}" if max(rewards) > min(rewards) else "")
    return (f"warning: {sum(flags)} of {len(history)} steps skipped with a zero gradient ({longest} in a row, "
            f"{span(history, end - longest, end)}; {shown}): every advantage was 0 because every episode got the "
            "reward its baseline expected (with groups: every episode of a group got the same reward), so there "
            "was nothing to learn from; try a larger --group-size or --episodes-per-step, a partial reward or a "
            "format cost in the environment, or a base agent that sometimes succeeds")


def non_finite_steps(history: Sequence[Mapping[str, Any]]) -> str | None:
    """Steps skipped because the gradient was not finite."""
    bad = [row["step"] for row in history if row.get("skipped") and isinstance(row.get("grad_norm"), float)
           and not math.isfinite(row["grad_norm"])]
    if not bad:
        return None
    return (f"warning: {len(bad)} of {len(history)} steps skipped with a non-finite gradient (first at step "
            f"{bad[0]}); try a smaller --learning-rate")


def halves(history: Sequence[Mapping[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(first window, last window, window) of ``key``, None when the run is shorter than two windows or lacks it."""
    values, w = column(history, key), window(len(history))
    if values is None or len(values) < 2 * w or not np.isfinite(values).all():
        return None
    return values[:w], values[-w:], w


def entropy_collapse(history: Sequence[Mapping[str, Any]]) -> str | None:
    """The entropy per policy token fell below ENTROPY_SHARE of its start, by more than SIGMAS standard errors."""
    found = halves(history, "entropy")
    if found is None:
        return None
    start, end, se = window_means(found[0], found[1])
    w = found[2]
    if not (end < ENTROPY_SHARE * start and start - end > SIGMAS * se):
        return None
    return (f"warning: entropy fell from {start:.3g} to {end:.3g} nats per policy token ({span(history, 0, w)} "
            f"against {span(history, len(history) - w, len(history))}, {SIGMAS:g} se {SIGMAS * se:.2g}): the "
            "policy has nearly stopped exploring; try a smaller --learning-rate")


RATE_ADVICE = {
    "pass_rate": ("pass rate", "the policy may have found a shortcut that the reward does not stop (e.g. submitting "
                               "at once); try --beta 0.05 (a KL to the starting policy) or a smaller --learning-rate"),
    "valid_calls": ("valid calls", "try a larger --format-penalty (BugFixEnv) or a cost for malformed calls in "
                                   "your environment's reward"),
}
"""The rates whose fall is a warning: their name and the thing to try."""


def fell(start: float, end: float, se: float) -> bool:
    """Whether a rate fell from ``start`` to ``end`` by more than SIGMAS ``se`` and FALL_SHARE of ``start``."""
    return start > 0 and start - end > SIGMAS * se and start - end >= FALL_SHARE * start


def first_step(row: Mapping[str, Any], key: str) -> tuple[float, float, str] | None:
    """``key``'s rate in the first step's batch (sampled before any update), its binomial standard error and what
    it was measured on; None when the row lacks the counts (``episodes``, and ``turns`` for valid calls)."""
    trials = row.get("episodes", 0) * (row.get("turns", 0) if key == "valid_calls" else 1)
    if not trials >= 1:
        return None
    p = row[key]
    unit = "calls" if key == "valid_calls" else "episodes"
    return p, math.sqrt(p * (1 - p) / trials), f"step {row['step']}, {trials:.0f} {unit} of the starting policy"


def rate_fall(history: Sequence[Mapping[str, Any]], key: str) -> str | None:
    """``key`` (a RATE_ADVICE rate) of the last window fell below the first window's, or below the first step's (a
    collapse within the first window), by more than SIGMAS standard errors and FALL_SHARE of the start."""
    found = halves(history, key)
    if found is None:
        return None
    first, last, w = found
    start, end, se = window_means(first, last)
    where = f"mean of {span(history, 0, w)}"
    if not fell(start, end, se):
        measured = first_step(history[0], key)
        if measured is None:
            return None
        start, first_se, where = measured
        se = math.sqrt(first_se**2 + np.var(last, ddof=1) / w)
        if not fell(start, end, se):
            return None
    name, advice = RATE_ADVICE[key]
    return (f"warning: {name} fell from {start:.3g} ({where}) to {end:.3g} (mean of "
            f"{span(history, len(history) - w, len(history))}; {SIGMAS:g} se of the difference {SIGMAS * se:.2g}); "
            f"{advice}")


def measured_fall(before: np.ndarray, after: np.ndarray, split: str) -> str | None:
    """The trained agent's pass rate on ``split`` fell below the base's, measured on the same draws, by more than
    SIGMAS standard errors of the paired difference (over tasks) and FALL_SHARE of the base's; before, after
    [tasks, episodes per task] 0/1 tables, rows the same tasks."""
    base, trained = np.asarray(before, dtype=np.float64).mean(1), np.asarray(after, dtype=np.float64).mean(1)
    tasks = len(base)
    if tasks < 2:
        return None
    start, end = float(base.mean()), float(trained.mean())
    se = float(np.std(base - trained, ddof=1) / math.sqrt(tasks))
    if not fell(start, end, se):
        return None
    return (f"warning: the trained agent passes {end:.3g} of the {split} episodes against the base's {start:.3g} "
            f"(the same draws, {np.asarray(before).size} episodes of {tasks} tasks; {SIGMAS:g} se of the paired "
            f"difference {SIGMAS * se:.2g}); {RATE_ADVICE['pass_rate'][1]}")


def kl_explosion(history: Sequence[Mapping[str, Any]]) -> str | None:
    """The KL per policy token is not finite, or over the last window exceeds KL_FLOOR and KL_GROWTH times the
    window's before it, by more than SIGMAS standard errors."""
    kl, tokens = column(history, "kl_k1"), column(history, "policy_tokens")
    if kl is None:
        return None
    if not np.isfinite(kl).all():
        first = next(row["step"] for row, v in zip(history, kl) if not math.isfinite(v))
        return f"warning: the KL to the reference is not finite from step {first}; try a smaller --learning-rate"
    per_token = kl / np.maximum(tokens, 1) if tokens is not None else kl
    w = window(len(history))
    if len(per_token) < 2 * w:
        return None
    before, last, se = window_means(per_token[-2 * w:-w], per_token[-w:])
    if not (last > KL_FLOOR and last > KL_GROWTH * before and last - before > SIGMAS * se):
        return None
    unit = "nats per policy token" if tokens is not None else "nats per reply"
    return (f"warning: the KL to the reference grew from {before:.3g} to {last:.3g} {unit} "
            f"({span(history, len(history) - 2 * w, len(history) - w)} against "
            f"{span(history, len(history) - w, len(history))}) and is still growing fast; try a larger --beta")


def repeated_tokens(history: Sequence[Mapping[str, Any]]) -> str | None:
    """At least REPEAT_SHARE of the calls (replies) of the last window ran to the cap filled with one token."""
    values = column(history, "repeat_capped")
    if values is None:
        return None
    w = min(window(len(history)), len(history))
    last = float(values[-w:].mean())
    if last < REPEAT_SHARE:
        return None
    return (f"warning: {last:.0%} of the calls or replies of {span(history, len(history) - w, len(history))} ran to "
            f"the token cap filled with one repeated token (at the start: {values[:w].mean():.0%}); try a cost for "
            "calls or replies cut at the cap (--format-penalty in BugFixEnv, your reward elsewhere)")


def collapse_warnings(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every warning the per-step rows of one run give, one line each (empty: nothing seen)."""
    found = [skipped_steps(history), non_finite_steps(history), entropy_collapse(history),
             rate_fall(history, "pass_rate"), rate_fall(history, "valid_calls"), kl_explosion(history),
             repeated_tokens(history)]
    return [line for line in found if line is not None]


__all__ = ["ENTROPY_SHARE", "FALL_SHARE", "KL_FLOOR", "KL_GROWTH", "MIN_WINDOW", "REPEAT_MAJORITY", "REPEAT_SHARE",
           "SIGMAS", "SKIP_PATIENCE", "WINDOW_SHARE", "call_repeat_share", "collapse_warnings", "entropy_collapse",
           "fell", "first_step", "kl_explosion", "measured_fall", "monitored", "non_finite_steps", "rate_fall",
           "repeat_share", "repeated_tokens", "skipped_steps", "window"]
