"""grpo-weights: the weight each group advantage gives a prompt with pass rate p, in closed form and exactly audited.

One prompt, rewards 1 (pass) or 0 (fail), p the chance that a reply passes, G replies per group and
the estimator g = (1/G) sum_i A_i S(y_i), S the reply's score. A_i depends on the group only through
r_i and the count of passes, so h(v) = E[A_i | r_i = v] over the other G - 1 replies (m ~ Binomial(G - 1, p)
of them pass), and the score-function identity gives

    E[g] = E[h(r) S(y)] = h(1) grad p + h(0) grad(1 - p) = w(p, G) grad p,   w = h(1) - h(0),
    w(p, G) = sum_{m=0}^{G-1} C(G-1, m) p^m (1-p)^(G-1-m) [a_pass(m + 1) - a_fail(m)],

with a_pass(j) / a_fail(j) the advantage of a passing / failing reply in a group with j passes:

- RLOO (leave-one-out): a_pass(j) = 1 - (j-1)/(G-1), a_fail(j) = -j/(G-1); the bracket is 1, so w = 1.
- Dr. GRPO (centred): a_pass(j) = 1 - j/G, a_fail(j) = -j/G; the bracket is (G-1)/G, so w = (G-1)/G.
- GRPO: Dr. GRPO's advantages divided by s_j + eps, s_j = sqrt(j (G-j) / (G d)) the group's std, d = G
  (population) or G - 1 (sample). The sum stays; w(p) = w(1 - p) (m -> G-1-m maps the sum onto itself),
  w(0+) = w(1-) = (1 - 1/G) / (s_1 + eps) (-> sqrt(G - 1) for the population std as eps -> 0), and for
  large G, w -> 1 / sqrt(p (1 - p)) (population; the law of large numbers in the group's mean and std).
- REINFORCE++-baseline: the group mean subtracted, then divided by the batch std sigma_B. The batch is
  modelled as many prompts (one group's share of sigma_B vanishes) with pass rates spread uniformly over
  (0, 1): sigma_B^2 = E[(r - group mean)^2] = (G-1)/G * int_0^1 p (1 - p) dp = (G-1) / (6 G), so
  w = (G-1) / (G sigma_B) = sqrt(6 (G-1) / G), the same for every p.

The closed forms are checked against audit_loss on an enumerable policy (one prompt, two one-token
replies, the first passing, logits set so that it has chance p): the audit's scale is w and its scaled
bias says E[g] is parallel to grad p. docs/audit.md has the table's reading.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.audit import audit_loss
from pglab.envs.enumerable import EnumerablePolicy
from pglab.estimators import advantages, reinforce_loss
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import track

ESTIMATORS = ("GRPO (population std)", "GRPO (sample std)", "Dr. GRPO", "RLOO", "REINFORCE++-baseline")
"""The group advantages compared, in table order."""
Advantage = Callable[[int], float]
"""j (passes in the group) -> the advantage of one reply."""
ROUNDOFF = ("float64: a binomial sum and an enumeration of G + 1 multisets, each term O(sqrt G); "
            "observed gaps about 1e-14")
"""Where the tolerance of the exact identities comes from."""


@dataclass
class Config:
    group_sizes: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
    """Replies per prompt G."""
    audited_pass_rates: tuple[float, ...] = (0.05, 0.2, 0.5, 0.8, 0.95)
    """Pass rates at which every closed form is checked against an exact audit."""
    curve_points: int = 199
    """Pass rates on the figure's and the shape claims' grid, evenly spaced inside (0, 1)."""
    eps: float = 1e-6
    """The eps of GRPO's (r - mean) / (std + eps) (verl's)."""
    tolerance: float = 1e-10
    """Relative gaps below this are zero (float64 roundoff; see ROUNDOFF)."""
    first_seed: int = 0
    """RNG seed of the audited policy's logits (the failing replies' split of 1 - p)."""

    QUICK: ClassVar[dict] = {"audited_pass_rates": (0.05, 0.5, 0.8), "curve_points": 99}

    def __post_init__(self) -> None:
        if min(self.group_sizes) < 2:
            raise SettingsError("group_sizes must all be >= 2: a group of one has no baseline")
        if not all(0 < p < 1 for p in self.audited_pass_rates):
            raise SettingsError("audited_pass_rates must lie strictly inside (0, 1): at 0 or 1 grad p is 0")
        if self.curve_points < 3 or self.curve_points % 2 == 0:
            raise SettingsError("curve_points must be odd and >= 3, so the grid holds p = 1/2")


def batch_std(group_size: int) -> float:
    """REINFORCE++-baseline's modelled batch std: sqrt((G-1) / (6 G)) (pass rates uniform over a large batch)."""
    return math.sqrt((group_size - 1) / (6 * group_size))


def group_std(passes: int, group_size: int, sample: bool) -> float:
    """Std of a 0/1 group of G with j passes: sqrt(j (G-j) / (G d)), d = G - 1 (sample) or G (population)."""
    return math.sqrt(passes * (group_size - passes) / (group_size * (group_size - 1 if sample else group_size)))


def advantage_pair(estimator: str, group_size: int, eps: float) -> tuple[Advantage, Advantage]:
    """(a_pass, a_fail): j -> the advantage of a passing (j >= 1) / failing (j < G) reply in a group with j passes."""
    g = group_size
    if estimator == "RLOO":
        return (lambda j: 1 - (j - 1) / (g - 1)), (lambda j: -j / (g - 1))
    if estimator == "Dr. GRPO":
        return (lambda j: 1 - j / g), (lambda j: -j / g)
    if estimator == "REINFORCE++-baseline":
        return (lambda j: (1 - j / g) / batch_std(g)), (lambda j: -j / g / batch_std(g))
    if estimator.startswith("GRPO"):
        sample = "sample" in estimator

        def scaled(centred: float, j: int) -> float:   # a group of equal rewards gets 0, as group_normalize gives
            return centred / (group_std(j, g, sample) + eps) if centred else 0.0

        return (lambda j: scaled(1 - j / g, j)), (lambda j: scaled(-j / g, j))
    raise ValueError(f"unknown estimator {estimator!r}; pass one of {', '.join(ESTIMATORS)}")


def closed_form_weight(estimator: str, p: float, group_size: int, eps: float) -> float:
    """w(p, G) = sum_m C(G-1, m) p^m (1-p)^(G-1-m) [a_pass(m + 1) - a_fail(m)] (the module docstring derives it)."""
    a_pass, a_fail = advantage_pair(estimator, group_size, eps)
    total = 0.0
    for m in range(group_size):
        chance = math.comb(group_size - 1, m) * p ** m * (1 - p) ** (group_size - 1 - m)
        total += chance * (a_pass(m + 1) - a_fail(m))
    return total


def estimator_loss(estimator: str, group_size: int, eps: float) -> Callable:
    """The audited loss: the estimator's advantages from ``pglab.estimators.advantages``, (1/B) sum -A log pi."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; pass one of {', '.join(ESTIMATORS)}")
    kind, options = {"RLOO": ("rloo", {}), "Dr. GRPO": ("dr_grpo", {}), "REINFORCE++-baseline": ("dr_grpo", {})}.get(
        estimator, ("grpo", {"unbiased": "sample" in estimator, "eps": eps}))
    divisor = batch_std(group_size) if estimator == "REINFORCE++-baseline" else 1.0

    def loss_fn(logp, ref_logp, rewards, mask, group):
        adv = advantages(rewards, kind, group_size, **options)
        return reinforce_loss(logp, adv / divisor, mask, "seq_mean_token_sum")

    return loss_fn


def pass_rate_policy(p: float, seed: int) -> EnumerablePolicy:
    """One prompt, two one-token replies, the first passing, with logits moved so that it has chance p (a group is
    enumerated by its count of passes: G + 1 multisets)."""
    policy = EnumerablePolicy(prompts=1, vocab=2, length=1, rewards=torch.tensor([[1.0, 0.0]]), seed=seed)
    with torch.no_grad():
        theta = policy.net.theta
        theta[0, 0, 0] = math.log(p / (1 - p)) + torch.logsumexp(theta[0, 0, 1:], 0)
    return policy


def audit_rows(config: Config) -> list[dict]:
    """One row per (estimator, G, audited p): the closed form beside the audit's scale, bias and variance."""
    cases = [(g, p) for g in config.group_sizes for p in config.audited_pass_rates]
    rows = []
    for g, p in track(cases, "auditing the group weights", total=len(cases)):
        policy = pass_rate_policy(p, config.first_seed)
        for estimator in ESTIMATORS:
            report = audit_loss(estimator_loss(estimator, g, config.eps), policy, beta=0.0, group_size=g,
                                seed=config.first_seed)
            derived = closed_form_weight(estimator, p, g, config.eps)
            rows.append({"estimator": estimator, "G": g, "p": p, "derived_weight": derived,
                         "audited_weight": report.scale, "relative_gap": abs(report.scale - derived) / derived,
                         "scaled_bias": report.scaled_bias, "total_variance": report.total_variance,
                         "batches": report.batches})
    return rows


def curve_rows(config: Config) -> list[dict]:
    """The closed forms on the grid of pass rates, for the figure and the shape claims."""
    grid = [(i + 1) / (config.curve_points + 1) for i in range(config.curve_points)]
    return [{"estimator": e, "G": g, "p": p, "weight": closed_form_weight(e, p, g, config.eps),
             "large_G_limit": 1 / math.sqrt(p * (1 - p)) if e == "GRPO (population std)" else None}
            for e in ESTIMATORS for g in config.group_sizes for p in grid]


def worst_gap(rows: list[dict], estimator: str, target: Callable[[dict], float], key: str = "audited_weight") -> float:
    """Largest |row[key] / target(row) - 1| over the estimator's rows."""
    return max(abs(r[key] / target(r) - 1) for r in rows if r["estimator"] == estimator)


def shape_failures(curves: list[dict], estimator: str) -> int:
    """G >= 3 at which the curve is not symmetric about p = 1/2 (to 1e-12) or not strictly decreasing on (0, 1/2]."""
    failures = 0
    for g in sorted({r["G"] for r in curves if r["G"] >= 3}):
        w = [r["weight"] for r in curves if r["estimator"] == estimator and r["G"] == g]
        half = len(w) // 2
        symmetric = all(abs(a - b) <= 1e-12 * a for a, b in zip(w, reversed(w)))
        falling = all(a > b for a, b in zip(w[:half], w[1:half + 1]))
        failures += not (symmetric and falling)
    return failures


def edge_weight(group_size: int, eps: float, sample: bool) -> float:
    """GRPO's w(0+) = w(1-) = (1 - 1/G) / (s_1 + eps): a lone pass (or failure) among G replies."""
    return (1 - 1 / group_size) / (group_std(1, group_size, sample) + eps)


def check_claims(result: Result, config: Config, audited: list[dict]) -> None:
    """The audited weights against the closed forms. The closed forms' own shape (symmetric about 1/2, largest at
    the edges, 1 / sqrt(p (1 - p)) for large G) is arithmetic that no audit enters: a unit test
    (tests/experiments/test_grpo_weights_closed_forms.py)."""
    tol = config.tolerance
    result.check_range("RLOO: largest |w - 1| over every G and audited p (audit and closed form)",
                       max(worst_gap(audited, "RLOO", lambda r: 1.0, key) for key in ("audited_weight",
                                                                                    "derived_weight")),
                       high=tol, tolerance=ROUNDOFF)
    result.check_range("Dr. GRPO: largest |w / ((G-1)/G) - 1| (audit and closed form)",
                       max(worst_gap(audited, "Dr. GRPO", lambda r: (r["G"] - 1) / r["G"], key)
                           for key in ("audited_weight", "derived_weight")), high=tol, tolerance=ROUNDOFF)
    for estimator in ("GRPO (population std)", "GRPO (sample std)", "REINFORCE++-baseline"):
        result.check_range(f"{estimator}: largest relative gap between the audited weight and the closed form",
                           worst_gap(audited, estimator, lambda r: r["derived_weight"]), high=tol, tolerance=ROUNDOFF)
    result.check_range("REINFORCE++-baseline: largest |w / sqrt(6 (G-1) / G) - 1| (the same weight at every p)",
                       worst_gap(audited, "REINFORCE++-baseline", lambda r: math.sqrt(6 * (r["G"] - 1) / r["G"])),
                       high=tol, tolerance=ROUNDOFF + "; batch std modelled as sqrt((G-1) / (6 G))")
    result.check_range("every estimator: largest bias left after the best scale (E[g] is w grad p, nothing else)",
                       max(r["scaled_bias"] for r in audited), high=tol, tolerance=ROUNDOFF)


def run(config: Config, result: Result) -> None:
    result.summary = (
        "The per-prompt weight w(p, G) of GRPO (population and sample std), Dr. GRPO, RLOO and REINFORCE++-baseline "
        "on pass/fail rewards: E[g] = w(p, G) grad p for one prompt's group of G replies. Closed forms (finite "
        f"binomial sums) against exact audits of each estimator at G = {', '.join(map(str, config.group_sizes))} "
        f"and p = {', '.join(f'{p:g}' for p in config.audited_pass_rates)}.")
    audited = audit_rows(config)
    curves = curve_rows(config)
    check_claims(result, config, audited)
    result.tables["audited"] = audited
    result.tables["curves"] = curves
    result.metrics.update({f"grpo_edge_over_middle_G{g}": edge_weight(g, config.eps, False)
                           / closed_form_weight("GRPO (population std)", 0.5, g, config.eps)
                           for g in config.group_sizes})
    result.figures["weights"] = weight_figure(config, audited, curves)


def weight_figure(config: Config, audited: list[dict], curves: list[dict]):
    from pglab.reporting.plots import new_figure

    fig, axes = new_figure(1, 3, figsize=(14, 4), sharey=True)
    panels = (("GRPO (population std)", "GRPO (sample std)"), ("Dr. GRPO", "RLOO"), ("REINFORCE++-baseline",))
    for ax, names in zip(axes, panels):
        for i, g in enumerate(config.group_sizes):
            for name, style in zip(names, ("-", "--")):
                line = [r for r in curves if r["estimator"] == name and r["G"] == g]
                ax.plot([r["p"] for r in line], [r["weight"] for r in line], ls=style, color=f"C{i}",
                        label=f"G = {g}" if style == "-" else None)
                points = [r for r in audited if r["estimator"] == name and r["G"] == g]
                ax.plot([r["p"] for r in points], [r["audited_weight"] for r in points], "o", ms=3, color=f"C{i}")
        ax.set_title(" (solid), ".join(names) + (" (dashed)" if len(names) > 1 else ""), fontsize=9)
        ax.set_xlabel("pass rate p")
        ax.set_yscale("log")
    axes[0].set_ylabel("w(p, G): E[g] = w grad p")
    axes[0].legend(fontsize=7)
    return fig
