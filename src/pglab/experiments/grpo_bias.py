"""grpo-bias: what GRPO's normalisers do to the expected gradient, exactly, at K = 2, 4 and 8.

Three audits on enumerable table policies (beta = 0, so J = E[r]): (1) the group mean that includes
the reply's own reward against leave-one-out; (2) GRPO's std scaling on pass/fail rewards over
prompts of different difficulty, against the per-prompt reweighting derived in docs/audit.md;
(3) the four loss-aggregation modes on replies of 1 or 2 tokens (an end token), against J and the
length-normalised objective. Each row gives the exact bias and the exact total variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.audit import audit_loss
from pglab.audit.presets import advantage_loss
from pglab.envs.enumerable import EnumerablePolicy
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import track

STD_EPS = 1e-6
"""The eps of GRPO's (r - mean) / (std + eps) in these audits (verl's; TRL uses 1e-4)."""


@dataclass
class Config:
    group_sizes: tuple[int, ...] = (2, 4, 8)
    """Replies per prompt K."""
    prompts: int = 2
    """Prompts in the group-mean audit."""
    pass_rates: tuple[float, ...] = (0.1, 0.5, 0.9)
    """Approximate chance of a passing reply per prompt in the std-scaling audit (one prompt each)."""
    vocab: int = 2
    """Reply tokens in the fixed-length audits."""
    length: int = 2
    """Reply tokens (fixed-length audits), or the most tokens (variable-length audit)."""
    tolerance: float = 1e-9
    """Relative gaps below this are zero (float64 enumeration; observed gaps are about 1e-15)."""
    first_seed: int = 0
    """RNG seed of the policies' weights and rewards."""

    QUICK: ClassVar[dict] = {}

    def __post_init__(self) -> None:
        if min(self.group_sizes) < 2:
            raise SettingsError("group_sizes must all be >= 2: a group of one has no baseline")


def pass_fail_rewards(policy: EnumerablePolicy, rates: tuple[float, ...]) -> torch.Tensor:
    """[P, N] 0/1 rewards: replies pass, in index order, while their probability mass stays below the prompt's rate
    (at least one passes and one fails)."""
    logp, _ = policy.sequence_logp()
    mass = logp.detach().exp().cumsum(-1)
    rewards = (mass <= torch.tensor(rates, dtype=torch.float64)[:, None]).double()
    rewards[:, 0], rewards[:, -1] = 1.0, 0.0
    return rewards


def std_weight(p: float, k: int, eps: float = STD_EPS) -> float:
    """Derived weight of a prompt with pass probability p under GRPO's (r - mean) / (sample std + eps), groups of k.

    E[A_i grad log pi(y_i)] = (h(1) - h(0)) grad p, with h(v) = E[A_i | r_i = v] over the other k - 1 replies
    (m ~ Binomial(k - 1, p) of them pass).
    """
    def std(j):  # sample std of a 0/1 group with j ones
        return math.sqrt(j * (k - j) / (k * (k - 1)))

    total = 0.0
    for m in range(k):
        chance = math.comb(k - 1, m) * p ** m * (1 - p) ** (k - 1 - m)
        total += chance * ((1 - (m + 1) / k) / (std(m + 1) + eps) + (m / k) / (std(m) + eps))
    return total


def measured(report) -> dict:
    """The columns every table shares; the variance is also given at scale 1 (divided by scale squared), so that
    estimators that differ only by a constant factor compare fairly."""
    return {"relative_bias": report.relative_bias, "scale": report.scale, "scaled_bias": report.scaled_bias,
            "total_variance": report.total_variance, "variance_at_scale_1": report.total_variance / report.scale ** 2,
            "follows": report.follows or "none found"}


def group_mean_rows(config: Config) -> list[dict]:
    policy = EnumerablePolicy(prompts=config.prompts, vocab=config.vocab, length=config.length,
                              seed=config.first_seed)
    rows = []
    for k in config.group_sizes:
        for name, kind, scale in (("leave-one-out", "rloo", 1.0), ("group mean incl. own reward", "dr_grpo",
                                                                  (k - 1) / k)):
            report = audit_loss(advantage_loss(kind, "seq_mean_token_sum"), policy, beta=0.0, group_size=k,
                                seed=config.first_seed)
            rows.append({"K": k, "advantage": name, **measured(report), "derived_scale": scale})
    return rows


def std_rows(config: Config) -> tuple[list[dict], list[float]]:
    policy = EnumerablePolicy(prompts=len(config.pass_rates), vocab=config.vocab, length=config.length,
                              seed=config.first_seed)
    policy.rewards = pass_fail_rewards(policy, config.pass_rates)
    logp, _ = policy.sequence_logp()
    passing = (logp.detach().exp() * policy.rewards).sum(-1).tolist()
    rows = []
    for k in config.group_sizes:
        derived = torch.tensor([std_weight(p, k) for p in passing], dtype=torch.float64)
        derived = derived / derived.mean()
        for name, kind, expected in (("GRPO: centred / std", "grpo", derived),
                                     ("Dr. GRPO: centred", "dr_grpo", torch.ones_like(derived))):
            report = audit_loss(advantage_loss(kind, "seq_mean_token_sum", unbiased=True, eps=STD_EPS), policy,
                                beta=0.0, group_size=k, seed=config.first_seed)
            weights = torch.tensor(report.prompt_weights, dtype=torch.float64)
            uniform = bool((expected - 1).abs().max() < 1e-12)
            rows.append({"K": k, "advantage": name, **measured(report),
                         "derived": "reverse_kl" if uniform else "reweighted",
                         "prompt_weights": ", ".join(f"{w:.4f}" for w in weights.tolist()),
                         "derived_weights": ", ".join(f"{w:.4f}" for w in expected.tolist()),
                         "weight_gap": float((weights - expected).abs().max()),
                         "weight_spread": float(weights.max() / weights.min())})
    return rows, passing


MODES = ("seq_mean_token_sum", "constant", "seq_mean_token_mean", "token_mean")


def aggregation_rows(config: Config) -> list[dict]:
    """One prompt (token_mean couples the prompts of a batch: one keeps the enumeration small), vocab 3 with an end."""
    policy = EnumerablePolicy(prompts=1, vocab=3, length=config.length, eos=True, seed=config.first_seed)
    rows = []
    for k in config.group_sizes:
        for mode in MODES:
            report = audit_loss(advantage_loss("rloo", mode, norm_const=float(k * config.length)), policy, beta=0.0,
                                group_size=k, seed=config.first_seed)
            length_norm = next(c for c in report.candidates if c["objective"] == "length_normalised")
            rows.append({"K": k, "mode": mode, **measured(report),
                         "length_normalised_scale": length_norm["scale"],
                         "length_normalised_sine": length_norm["sine"]})
    return rows


def run(config: Config, result: Result) -> None:
    result.summary = (
        "Exact expectations of GRPO-style estimators by enumeration of every group (beta = 0, J = E[r]): the group "
        "mean with the reply's own reward against leave-one-out, std scaling over prompts of different pass rates "
        "against the derived per-prompt weights, and the four aggregation modes on replies of different lengths; "
        f"at K = {', '.join(map(str, config.group_sizes))}, each with its exact total variance.")
    tol = config.tolerance
    exact = "exact enumeration in float64; observed identities hold to about 1e-15"
    parts = [("group mean", group_mean_rows), ("std scaling", std_rows), ("aggregation", aggregation_rows)]
    tables = {}
    for name, build in track(parts, "auditing GRPO's normalisers", total=len(parts)):
        tables[name] = build(config)
    group_mean, aggregation = tables["group mean"], tables["aggregation"]
    std, passing = tables["std scaling"]

    loo = [r for r in group_mean if r["advantage"] == "leave-one-out"]
    own = [r for r in group_mean if r["advantage"] != "leave-one-out"]
    result.check_range("leave-one-out: largest relative bias over K", max(r["relative_bias"] for r in loo), high=tol,
                       tolerance=exact)
    result.check_range("group mean incl. own reward: largest |scale - (K-1)/K| over K",
                       max(abs(r["scale"] - r["derived_scale"]) for r in own), high=tol, tolerance=exact)
    result.check_range("group mean incl. own reward: largest bias left after the scale (direction unchanged)",
                       max(r["scaled_bias"] for r in own), high=tol, tolerance=exact)

    grpo = [r for r in std if r["advantage"].startswith("GRPO")]
    dr = [r for r in std if not r["advantage"].startswith("GRPO")]
    result.check_range("std scaling: verdicts that disagree with the derivation (a per-prompt reweighting of grad J; "
                       "uniform, so J itself, at K = 2)", sum(r["follows"] != r["derived"] for r in std),
                       high=0, tolerance="exact; a reweighting is followed when E[g] is within a sine of 1e-8 of it")
    result.check_range("std scaling: largest gap between the audited and the derived prompt weights",
                       max(r["weight_gap"] for r in grpo), high=1e-8,
                       tolerance="exact; derived weights are a finite binomial sum (docs/audit.md)")
    result.check_range("std scaling, K > 2: smallest ratio of the largest to the smallest prompt weight (the weights "
                       "differ)", min(r["weight_spread"] for r in grpo if r["K"] > 2), low=1 + tol,
                       tolerance=f"exact (above 1 by more than roundoff; Dr. GRPO's is 1 to roundoff); pass rates "
                                 f"{', '.join(f'{p:.2f}' for p in passing)}")
    result.check_range("Dr. GRPO (no std) on the same prompts: largest deviation of a prompt weight from 1",
                       max(r["weight_gap"] for r in dr), high=tol, tolerance=exact)

    by = {(r["K"], r["mode"]): r for r in aggregation}
    ks = config.group_sizes
    result.check_range("seq_mean_token_sum with variable lengths: largest relative bias",
                       max(by[k, "seq_mean_token_sum"]["relative_bias"] for k in ks), high=tol, tolerance=exact)
    result.check_range("constant (B x max length): largest |scale - 1 / max length| and bias after the scale",
                       max(max(abs(by[k, "constant"]["scale"] - 1 / config.length), by[k, "constant"]["scaled_bias"])
                           for k in ks), high=tol, tolerance=exact)
    result.check_range("seq_mean_token_mean follows E[(r - mean r) / |y|]: largest |scale - 1| and sine",
                       max(max(abs(by[k, "seq_mean_token_mean"]["length_normalised_scale"] - 1),
                               by[k, "seq_mean_token_mean"]["length_normalised_sine"]) for k in ks), high=tol,
                       tolerance=exact)
    result.check_range("seq_mean_token_mean: smallest bias against J left after the best scale (its length bias)",
                       min(by[k, "seq_mean_token_mean"]["scaled_bias"] for k in ks), low=1e-3,
                       tolerance="exact; six orders of magnitude above the unbiased rows' 1e-9 bound")
    token = [by[k, "token_mean"]["scaled_bias"] for k in ks]
    result.check_range("token_mean: smallest bias left after the best scale (lengths vary within a batch)",
                       min(token), low=1e-3, tolerance="exact; the weight 1 / (sum of the batch's lengths) depends on "
                       "the reply itself")
    result.check_range("token_mean: K at which its bias after scaling fails to shrink as K grows (law of large "
                       "numbers: 1 / sum of lengths -> 1 / (K E|y|))",
                       next((k for k, a, b in zip(ks[1:], token, token[1:]) if b >= a), 0), high=0,
                       tolerance="exact values at each K; 0 means it shrinks at every step")

    result.tables["group_mean"] = group_mean
    result.tables["std_scaling"] = std
    result.tables["aggregation"] = aggregation
    result.metrics.update({f"pass_rate_{i}": p for i, p in enumerate(passing)})

    from pglab.reporting.plots import new_figure

    fig, (left, right) = new_figure(1, 2, figsize=(10, 4))
    for mode in MODES:
        left.plot(ks, [by[k, mode]["variance_at_scale_1"] for k in ks], marker="o", label=mode)
    for name in ("leave-one-out", "group mean incl. own reward"):
        left.plot(ks, [r["variance_at_scale_1"] for r in group_mean if r["advantage"] == name], marker="s", ls="--",
                  label=f"{name} (fixed length)")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("K (replies per prompt)")
    left.set_ylabel("total variance / scale^2 of one batch")
    left.legend(fontsize=7)
    for mode in ("seq_mean_token_mean", "token_mean"):
        right.plot(ks, [by[k, mode]["scaled_bias"] for k in ks], marker="o", label=mode)
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("K (replies per prompt)")
    right.set_ylabel("bias left after the best scale")
    right.set_title("length bias with replies of 1 or 2 tokens")
    right.legend(fontsize=7)
    result.figures["variance_and_length_bias"] = fig
