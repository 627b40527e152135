"""The demos' JSON API as pure functions: a request dict in, a response dict out (no HTTP here).

Every number comes from ``pglab.envs.bandit.GaussianBandit``, ``pglab.estimators`` and
``pglab.trainers.bandit``: the page only draws. Both demos are stateless: the page sends its
controls, a sample count and an RNG seed, and the same request always returns the same numbers,
so "+25" re-draws the first n + 25 samples of the seed (the earlier dots do not move) and a
baseline change slides every dot along its own spoke. Bad input raises ``ApiError`` (a ValueError)
with a one-line message; the server turns it into a 400.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pglab.envs.bandit import GaussianBandit
from pglab.estimators import total_variance
from pglab.trainers.bandit import committed_arm, train_bandit

REWARDS = (1.0, 2.0, 4.0)
"""The chapter's worked example: arm means before the offset c."""
MAX_SAMPLES = 5000
MAX_STEPS = 5000
RACE_RUNS = 12
METHODS = {"none": "no baseline", "running": "running-average baseline"}
LIMITS = {"c": (-50.0, 50.0), "sigma": (0.0, 10.0), "alpha": (1e-4, 2.0), "b": (-1000.0, 1000.0)}
MIN_PROBABILITY = 1e-3


class ApiError(ValueError):
    """Bad input from the page: the message names the fix; the server answers 400."""


def _number(body: dict, key: str, default: float | None = None) -> float:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ApiError(f"{key} must be a finite number, got {value!r}")
    low, high = LIMITS.get(key, (-math.inf, math.inf))
    if not low <= value <= high:
        raise ApiError(f"{key} must be in [{low:g}, {high:g}], got {value:g}")
    return float(value)


def _count(body: dict, key: str, high: int, default: int = 0) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise ApiError(f"{key} must be a whole number in [0, {high}], got {value!r}")
    return value


def _policy(body: dict, key: str) -> torch.Tensor:
    """A point of the simplex -> logits theta [3]; refuses points off the simplex or on its edge."""
    pi = body.get(key)
    if (not isinstance(pi, list) or len(pi) != 3
            or not all(isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p) for p in pi)):
        raise ApiError(f"{key} must be a list of 3 finite probabilities, got {pi!r}")
    if min(pi) < MIN_PROBABILITY or abs(sum(pi) - 1.0) > 1e-6:
        raise ApiError(f"{key} must be 3 probabilities >= {MIN_PROBABILITY:g} that sum to 1, got {pi!r}")
    return torch.tensor(pi, dtype=torch.float64).log()


def _rounded(x: torch.Tensor, digits: int = 5) -> list:
    return torch.round(x, decimals=digits).tolist()


def cloud(body: dict) -> dict[str, Any]:
    """Demo 1. body: pi [3], c, sigma, baseline ("zero" | "J" | "b*" | a number b), samples, seed.

    -> J, b*, the baseline used, the exact gradient, the policy's move along it (d pi = pi * (g - pi.g)),
    the scores e_a - pi, the exact spread at b,
    the first ``samples`` single-pull estimates of the seed (arm and vector), their mean and
    measured spread, and the exact spread against b for the strip.
    """
    theta = _policy(body, "pi")
    c, sigma = _number(body, "c", 0.0), _number(body, "sigma", 0.0)
    samples = _count(body, "samples", MAX_SAMPLES)
    seed = _count(body, "seed", 2**31 - 1)
    bandit = GaussianBandit([r + c for r in REWARDS], sigma)
    value, b_star = float(bandit.exact_value(theta)), float(bandit.optimal_baseline(theta))
    choice = body.get("baseline", "zero")
    named = {"zero": 0.0, "J": value, "b*": b_star}
    if isinstance(choice, str):
        if choice not in named:
            raise ApiError(f"baseline must be a number or one of {', '.join(named)}, got {choice!r}")
        b = named[choice]
    else:
        b = _number({"b": choice}, "b")
    # Always MAX_SAMPLES draws, of which the first ``samples`` are shown: a prefix of the same seed.
    actions, estimates = bandit.sample_estimates(theta, b, MAX_SAMPLES, torch.Generator().manual_seed(seed))
    actions, estimates = actions[:samples], estimates[:samples]
    pi, gradient = bandit.policy(theta), bandit.exact_gradient(theta)
    strip_b = torch.linspace(min(0.0, b, b_star) - 2.0, max(b, b_star, max(REWARDS) + c) + 2.0, 121,
                             dtype=torch.float64)
    return {
        "pi": _rounded(pi, 6), "J": value, "b_star": b_star, "b": b,
        "gradient": _rounded(gradient),
        "pi_step": _rounded(pi * (gradient - (pi * gradient).sum())),
        "scores": _rounded(torch.eye(3, dtype=torch.float64) - pi),
        "spread_exact": float(bandit.exact_total_variance(theta, b)),
        "samples": [{"arm": int(a), "g": g} for a, g in zip(actions.tolist(), _rounded(estimates, 4))],
        "mean": _rounded(estimates.mean(0)) if samples else None,
        "spread_measured": float(total_variance(estimates)) if samples >= 2 else None,
        "strip": {"b": _rounded(strip_b, 4), "exact": _rounded(bandit.exact_total_variance(theta, strip_b), 5)},
    }


def race(body: dict) -> dict[str, Any]:
    """Demo 2. body: start [3] (a policy), c, alpha, steps, seed -> per method: the 12 paths of pi
    [runs][steps+1][3], mean J per step (c not included), runs not yet committed to arm 3 per step,
    and the final counts (committed to arm 3, to a wrong arm, to none)."""
    start = _policy(body, "start")
    c, alpha = _number(body, "c", 10.0), _number(body, "alpha", 0.1)
    steps = _count(body, "steps", MAX_STEPS, 400)
    seed = _count(body, "seed", 2**31 - 1)
    bandit = GaussianBandit([r + c for r in REWARDS], 1.0)
    best = int(bandit.means.argmax())
    out: dict[str, Any] = {"steps": steps, "runs": RACE_RUNS, "methods": {}}
    for baseline, label in METHODS.items():
        if steps:
            thetas = train_bandit(bandit, baseline, RACE_RUNS, steps, alpha, torch.Generator().manual_seed(seed),
                                  start=start).thetas
        else:
            thetas = start.expand(1, RACE_RUNS, 3)
        pi = bandit.policy(thetas)                                   # [steps+1, runs, 3]
        arm = committed_arm(pi, 0.5)                                 # [steps+1, runs]
        final = arm[-1]
        out["methods"][baseline] = {
            "label": label,
            "paths": _rounded(pi.transpose(0, 1), 4),
            "mean_J": _rounded(bandit.exact_value(thetas).mean(-1) - c, 4),
            "not_committed_to_best": (arm != best).sum(-1).tolist(),
            "committed_to_wrong": ((arm >= 0) & (arm != best)).sum(-1).tolist(),
            "final": {"best": int((final == best).sum()), "wrong": int(((final >= 0) & (final != best)).sum()),
                      "none": int((final < 0).sum())},
        }
    return out
