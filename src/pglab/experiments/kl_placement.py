"""kl-placement: where the KL estimate goes decides which objective the gradient follows (llm-ch6, the KL penalty).

k1, k2 and k3, each in the reward (detached, as a per-token penalty, weighted by the whole return
or by the reward-to-go) and in the loss (with its gradient), and k3 in the loss times the
importance ratio (TRL's use_bias_correction_kl). Each is audited exactly on enumerable policies
(a table of logits and a tiny GPT-2, replies of one and of two tokens, three beta) against
grad(-J), J = E[r] - beta KL(pi || ref); the verdicts are compared with the closed forms of
docs/audit.md. Then three of them train the table policy, and the KL from each trained policy to
pi* = ref exp(r / beta) / Z, and to the limit its verdict predicts, is computed by enumeration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.audit import audit_loss, placement_loss
from pglab.envs.enumerable import EnumerablePolicy
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import track
from pglab.stats import chi2_upper_tail
from pglab.trainers.enumerable import ascend_objective, train_sampled

CONFIGURATIONS = [(kind, place, rtg, False) for place in ("reward", "loss") for kind in ("k1", "k2", "k3")
                  for rtg in (False, True)] + [("k3", "loss", rtg, True) for rtg in (False, True)]
"""(estimator, place, reward-to-go, importance-ratio correction)."""


@dataclass
class Config:
    betas: tuple[float, ...] = (0.1, 0.5, 2.0)
    """KL prices at which every configuration is audited."""
    parametrisations: tuple[str, ...] = ("table", "gpt2")
    """Enumerable policies: a table of logits per prefix, a tiny random GPT-2."""
    lengths: tuple[int, ...] = (1, 2)
    """Reply lengths (tokens); at 1 the per-token and sequence KL coincide."""
    prompts: int = 2
    """Prompts, weighted equally in J."""
    vocab: int = 3
    """Reply tokens."""
    group_size: int = 2
    """Replies per prompt in an audited batch (the leave-one-out baseline needs 2)."""
    tolerance: float = 1e-9
    """Relative gaps below this are zero (float64 enumeration; observed gaps are about 1e-15)."""
    train_beta: float = 0.5
    """beta of the three training runs."""
    train_steps: int = 600
    """Adam steps per training run."""
    train_group_size: int = 8
    """Replies per prompt per training step."""
    learning_rate: float = 0.05
    """Initial Adam step size (decays linearly to 0)."""
    fixed_point_steps: int = 1500
    """Adam steps along an objective's exact gradient to find the limit an estimator converges to."""
    apart: float = 1e-3
    """Two policies are 'told apart' when their KL exceeds what a fit from the last steps' samples (see ``window``)
    reaches with this probability (the chi-square quantile): a floor set by what training resolves."""
    window: float = 0.1
    """Share of the final steps whose samples a trained policy is compared with: it 'ends at' a limit when it is no
    further from it than a maximum-likelihood fit from those samples (lm-beta-optimum's test)."""
    first_seed: int = 0
    """RNG seed of the weights and rewards (the GPT-2 policy uses first_seed + 1) and of training."""

    QUICK: ClassVar[dict] = {"fixed_point_steps": 1000}

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise SettingsError("group_size must be >= 2: the leave-one-out baseline needs another reply")


def label(kind: str, place: str, rtg: bool, corrected: bool) -> str:
    return f"{kind}{' x ratio' if corrected else ''} in the {place}{', reward-to-go' if rtg else ''}"


def derived_follows(kind: str, place: str, corrected: bool, length: int) -> str | None:
    """The objective each placement follows, from the closed forms in docs/audit.md."""
    if place == "reward":
        return "reverse_kl" if kind == "k1" else None
    if kind == "k1":
        return "reward_only"
    direction = "reverse" if kind == "k2" or corrected else "forward"
    return f"{direction}_kl" if length == 1 else f"tokenwise_{direction}_kl"


def _gradient(policy: EnumerablePolicy, kind: str, beta: float) -> torch.Tensor:
    grads = torch.autograd.grad(-policy.objective(kind, beta), policy.parameters())
    return torch.cat([g.flatten() for g in grads])


def audit_all(config: Config) -> list[dict]:
    """One row per (policy, beta, length, configuration), with the gaps the claims need."""
    rows = []
    cases = [(par, length) for par in config.parametrisations for length in config.lengths]
    for par, length in track(cases, "auditing the KL placements", total=len(cases)):
        seed = config.first_seed + (par == "gpt2")
        policy = EnumerablePolicy(prompts=config.prompts, vocab=config.vocab, length=length, parametrisation=par,
                                  seed=seed)
        for beta in config.betas:
            reward_only = _gradient(policy, "reward_only", beta)
            token_forward = _gradient(policy, "tokenwise_forward_kl", beta)
            k2_loss = None
            for kind, place, rtg, corrected in CONFIGURATIONS:
                report = audit_loss(placement_loss(kind, place, beta, reward_to_go=rtg, corrected=corrected), policy,
                                    beta=beta, group_size=config.group_size, seed=seed)
                norm = float(report.target.norm())
                g = report.gradient
                if (kind, place, corrected) == ("k2", "loss", False) and not rtg:
                    k2_loss = g
                rows.append({
                    "policy": par, "beta": beta, "length": length, "configuration": label(kind, place, rtg, corrected),
                    "relative_bias": report.relative_bias, "scale": report.scale, "scaled_bias": report.scaled_bias,
                    "total_variance": report.total_variance, "follows": report.follows or "none found",
                    "derived": derived_follows(kind, place, corrected, length) or "none found",
                    "gap_to_reward_only": float((g - reward_only).norm()) / norm,
                    "gap_to_tokenwise_forward": float((g - token_forward).norm()) / norm,
                    "gap_to_k2_in_the_loss": float((g - k2_loss).norm()) / norm if corrected else None,
                    "_kind": (kind, place, corrected)})
    return rows


def train_three(config: Config) -> tuple[list[dict], dict[str, list[tuple[int, float]]]]:
    """k1 in the reward, k3 in the loss, k1 in the loss: each trains the table policy from the same start."""
    beta = config.train_beta
    start = EnumerablePolicy(prompts=config.prompts, vocab=config.vocab, length=max(config.lengths),
                             seed=config.first_seed)
    star = start.optimal_log_policy(beta)
    limits = {"k3 in the loss": ascend_objective(start, "tokenwise_forward_kl", beta, steps=config.fixed_point_steps,
                                                 lr=config.learning_rate).sequence_logp()[0].detach(),
              "k1 in the reward": star, "k1 in the loss": None}
    rows, curves = [], {}
    for name, kind, place in (("k1 in the reward", "k1", "reward"), ("k3 in the loss", "k3", "loss"),
                              ("k1 in the loss", "k1", "loss")):
        policy = start.copy()
        curves[name] = train_sampled(policy, placement_loss(kind, place, beta), steps=config.train_steps,
                                     group_size=config.train_group_size, lr=config.learning_rate,
                                     seed=config.first_seed, every=max(1, config.train_steps // 20),
                                     measure=lambda p: p.kl_to(star), progress=True)
        rows.append({"trained with": name, **_describe(policy, star, limits[name])})
    rows.append({"trained with": "pi* (exact)", **_describe_log(start, star, star, star)})
    rows.append({"trained with": "tokenwise forward-KL limit (exact)",
                 **_describe_log(start, limits["k3 in the loss"], star, limits["k3 in the loss"])})
    return rows, curves


def _describe(policy: EnumerablePolicy, star: torch.Tensor, limit: torch.Tensor | None) -> dict:
    return _describe_log(policy, policy.sequence_logp()[0].detach(), star, limit)


def _describe_log(policy: EnumerablePolicy, logp: torch.Tensor, star: torch.Tensor, limit) -> dict:
    _, ref = policy.sequence_logp()
    p = logp.exp()

    def kl(logq):
        return float((p * (logp - logq)).sum(-1).mean())

    return {"kl_to_pi_star": kl(star), "kl_to_its_limit": None if limit is None else kl(limit),
            "expected_reward": float((p * policy.rewards).sum(-1).mean()), "kl_to_reference": kl(ref)}


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"{len(CONFIGURATIONS)} KL placements audited exactly on a table and a GPT-2 policy ({config.prompts} prompts, "
        f"{config.vocab} tokens, replies of {' and '.join(map(str, config.lengths))} tokens, beta "
        f"{', '.join(f'{b:g}' for b in config.betas)}) against grad(-J), J = E[r] - beta KL(pi || ref); then three "
        f"of them train the table policy and are measured against pi* = ref exp(r / beta) / Z by enumeration.")
    rows = audit_all(config)
    tol = config.tolerance

    def worst(select, key):
        return max(r[key] for r in rows if select(r["_kind"]))

    exact = "exact enumeration in float64; observed identities hold to about 1e-15"
    result.check_range("k1 in the reward: largest relative bias against grad(-J)",
                       worst(lambda k: k[:2] == ("k1", "reward"), "relative_bias"), high=tol, tolerance=exact)
    result.check_range("k1 in the loss: largest |E[g] - grad(-E[r])| / |grad J| (no KL gradient in expectation)",
                       worst(lambda k: k[:2] == ("k1", "loss"), "gap_to_reward_only"), high=tol, tolerance=exact)
    result.check_range("k3 in the loss: largest |E[g] - grad(-J_tokenwise forward)| / |grad J|",
                       worst(lambda k: k == ("k3", "loss", False), "gap_to_tokenwise_forward"), high=tol,
                       tolerance=exact)
    result.check_range("k3 x ratio in the loss: largest |E[g] - E[g of k2 in the loss]| / |grad J|",
                       worst(lambda k: k[2], "gap_to_k2_in_the_loss"), high=tol, tolerance=exact)
    unbiased = {1: {"k1 in the reward", "k2 in the loss", "k3 x ratio in the loss"}, 2: {"k1 in the reward"}}
    wrong = sum((r["relative_bias"] < tol) != (r["configuration"].split(",")[0] in unbiased.get(r["length"], set()))
                for r in rows if r["length"] in unbiased)
    result.check_range("unbiased set (one token: k1 in the reward, k2 and k3 x ratio in the loss; two tokens: k1 in "
                       "the reward only): rows that disagree", wrong, high=0,
                       tolerance=f"exact; 'unbiased' is a relative bias below {tol:g}")
    biased = [r["relative_bias"] for r in rows if r["relative_bias"] >= tol]
    result.check_range("smallest relative bias of a biased placement (the split is not marginal)", min(biased),
                       low=1e-3, tolerance="exact; three orders of magnitude above the unbiased ones' 1e-9 bound")
    mismatched = sum(r["follows"] != r["derived"] for r in rows)
    result.check_range("audit verdicts ('follows') that disagree with the derivations in docs/audit.md", mismatched,
                       high=0, tolerance="exact; an objective is followed when E[g] is within a sine of 1e-8 of it")
    for r in rows:
        del r["_kind"]
    result.tables["placements"] = rows

    training, curves = train_three(config)
    result.tables["training"] = training
    result.tables["training_curves"] = [{"configuration": name, "step": s, "kl_to_pi_star": kl}
                                        for name, curve in curves.items() for s, kl in curve]
    by_name = {r["trained with"]: r for r in training}
    limit, floor = training_claims(result, config, by_name)
    result.metrics.update({"audits": len(rows), "k3_limit_kl_to_pi_star": limit, "told_apart_floor": floor})

    from pglab.reporting.plots import new_figure

    fig, ax = new_figure(figsize=(6, 4))
    for name, curve in curves.items():
        ax.plot([s for s, _ in curve], [k for _, k in curve], marker="o", label=name)
    ax.axhline(limit, color="C1", ls=":", label="k3 limit's KL to pi*")
    ax.axhline(floor, color="C3", ls="--", label=f"told apart: {floor:.2g} nats")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("KL(pi || pi*) (nats)")
    ax.set_title(f"three KL placements, beta = {config.train_beta:g}")
    ax.legend(fontsize=8)
    result.figures["kl_to_optimum"] = fig


def chi2_quantile(tail: float, dof: int) -> float:
    """x with P(chi-square with ``dof`` >= x) = ``tail``, by bisection on :func:`pglab.stats.chi2_upper_tail`."""
    low, high = 0.0, float(dof)
    while chi2_upper_tail(high, dof) > tail:
        low, high = high, 2 * high
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if chi2_upper_tail(middle, dof) > tail else (low, middle)
    return high


def training_claims(result: Result, config: Config, by_name: dict[str, dict]) -> tuple[float, float]:
    """The three training runs' claims; returns (KL(k3 limit || pi*), the told-apart floor in nats).

    Per prompt, 2 N KL of a maximum-likelihood fit of the K replies from N samples is a chi-square with K - 1 dof;
    over P prompts, 2 N P times the mean KL has P (K - 1) dof: a run 'ends at' a limit when its KL is no larger than
    such a fit's (a p-value), and two policies are 'told apart' when their KL exceeds the fit's 1 - apart quantile.
    """
    replies, per_prompt = config.vocab ** max(config.lengths), max(1, round(config.window * config.train_steps))
    samples = per_prompt * config.train_group_size
    dof, scale = config.prompts * (replies - 1), 2 * samples * config.prompts
    fit = (f"a maximum-likelihood fit of each prompt's K = {replies} replies from the N = {samples} samples of the "
           f"last {config.window:.0%} of {config.train_steps} sampled steps (2 N P KL a chi-square with {dof} dof); "
           "KL by enumeration of every reply")
    for name, key, target in (("k1 in the reward", "kl_to_pi_star", "pi*"),
                              ("k3 in the loss", "kl_to_its_limit", "its tokenwise forward-KL limit")):
        kl = by_name[name][key]
        result.check_p(f"{name}: KL(trained || {target}), no further than a fit from the last steps' samples", kl,
                       chi2_upper_tail(scale * kl, dof), f"a fit's mean {dof / scale:.3g}", f"p: {fit}")
    floor = chi2_quantile(config.apart, dof) / scale
    apart = f"a fit exceeds {floor:.3g} with probability {config.apart:g}: {fit}"
    limit = by_name["tokenwise forward-KL limit (exact)"]["kl_to_pi_star"]
    result.check_range("k3 in the loss: KL(its limit || pi*) (training tells the two limits apart)", limit,
                       low=floor, tolerance=f"{apart}; the limit found by {config.fixed_point_steps} steps along the "
                                            "exact gradient")
    star, ignored = by_name["pi* (exact)"], by_name["k1 in the loss"]
    result.check_range("k1 in the loss: KL(trained || pi*) (it ignores the KL price)", ignored["kl_to_pi_star"],
                       low=floor, tolerance=apart)
    result.check_range("k1 in the loss: KL(trained || ref) minus KL(pi* || ref) (it overspends the KL)",
                       ignored["kl_to_reference"] - star["kl_to_reference"], low=floor,
                       tolerance=f"{apart}; exact values of both policies")
    return limit, floor
