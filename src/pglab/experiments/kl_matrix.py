"""kl-matrix: every KL estimator x placement x level, on and off policy, audited exactly against closed forms.

Each configuration is REINFORCE with a leave-one-out baseline on the score, weighted by the sequence
importance ratio rho_i = pi(y_i) / mu(y_i) of the sampler mu (1 on-policy), plus a KL term:

- in the reward (detached): -beta k per token with reward-to-go (token level), or -beta k(L) of the
  reply's log-ratio L = sum_t l_t on the score (sequence level), both times rho_i;
- in the loss (with its gradient): beta (1/B) sum_i sum_t k_t (token level) or beta (1/B) sum_i k(L_i)
  (sequence level), evaluated on mu's samples; "k3 x ratio" multiplies k3 by the importance ratio
  pi / mu (per token, or of the whole reply at the sequence level): TRL's use_bias_correction_kl.

Estimators k1, k2, k3 (``pglab.estimators.kl_estimate`` / ``sequence_kl``) and verl's k1+ and k3+ (the
value of k1 or k3, k2's gradient); in the reward only k1, k2, k3 (a detached "+" form is its value form).
Behaviours come from ``pglab.audit.behaviour.behaviour_pair`` (noise:S, stale:K).

The derived verdicts (docs/audit.md, "kl-matrix"): on-policy, with S the reply's score,
grad k2(L) = L S, so E[L S] = grad KL(pi || ref) (sequence k2 and its straight-through forms follow J);
grad k3(L) = (1 - ref / pi) S has mean -sum_y ref grad log pi = grad KL(ref || pi) (forward KL); the
sequence ratio-corrected k3 has gradient L S like k2; the token forms follow the tokenwise KLs (kl-placement).
Off-policy, E_mu[grad(rho k(L))] = grad E_pi[k(L)] for a sequence ratio rho = pi / mu, so only the
sequence-ratio-corrected k3 in the loss (E_pi[k3(L)] = KL) and k1 in the reward (times rho) stay exact;
the token ratio weighs the states by mu's prefixes, and the uncorrected forms take their score term
under mu (E_mu[S] != 0): no candidate objective.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.audit import audit_loss
from pglab.envs.enumerable import EnumerablePolicy
from pglab.estimators import discounted_returns, kl_estimate, leave_one_out, reinforce_loss, sequence_kl
from pglab.estimators.corrections import mismatch_ratios
from pglab.reporting.result import Result
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import track

ESTIMATORS = ("k1", "k2", "k3", "k3 x ratio", "k1+", "k3+")
"""KL estimators in the loss; in the reward only the first three."""
LEVELS = ("token", "sequence")
"""Token: a term per token; sequence: one term of the reply's whole log-ratio."""
CONFIGURATIONS = ([(kind, "reward", level) for kind in ESTIMATORS[:3] for level in LEVELS]
                  + [(kind, "loss", level) for kind in ESTIMATORS for level in LEVELS])
"""(estimator, placement, level)."""
EXACT = "exact enumeration in float64; observed identities hold to about 1e-15"


@dataclass
class Config:
    behaviours: tuple[str, ...] = ("noise:0.5", "stale:2")
    """Off-policy samplers (``pglab audit --behaviour`` specs); on-policy is always audited too."""
    betas: tuple[float, ...] = (0.1, 1.0)
    """KL prices at which every configuration is audited."""
    prompts: int = 2
    """Prompts, weighted equally in J."""
    vocab: int = 3
    """Reply tokens."""
    length: int = 2
    """Reply tokens (2: the tokenwise and sequence KLs differ)."""
    group_size: int = 2
    """Replies per prompt in an audited batch (the leave-one-out baseline needs 2)."""
    tolerance: float = 1e-9
    """Relative gaps below this are zero (float64 enumeration; observed gaps are about 1e-15)."""
    first_seed: int = 0
    """RNG seed of the policy's and reference's logits, the rewards and the behaviours' noise."""

    QUICK: ClassVar[dict] = {"betas": (0.5,), "prompts": 1}

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise SettingsError("group_size must be >= 2: the leave-one-out baseline needs another reply")
        if "" in self.behaviours:
            raise SettingsError("behaviours lists off-policy samplers only (on-policy is always audited)")


def label(kind: str, place: str, level: str) -> str:
    return f"{kind} in the {place}, {level} level"


def kl_loss_term(kind: str, level: str, logp: torch.Tensor, ref_logp: torch.Tensor, rollout_logp: torch.Tensor,
                 mask: torch.Tensor) -> torch.Tensor:
    """The KL term of the loss, (1/B) sum over replies; logp, ref_logp, rollout_logp, mask [B, T] -> scalar."""
    base = "k3" if kind == "k3 x ratio" else kind
    if level == "sequence":
        value = sequence_kl(logp, ref_logp, mask, base)
        if kind == "k3 x ratio":
            value = value * torch.exp(((logp - rollout_logp) * mask).sum(-1))
        return value.mean()
    value = kl_estimate(logp, ref_logp, base)
    if kind == "k3 x ratio":
        value = value * torch.exp(logp - rollout_logp)
    return (value * mask).sum(-1).mean()


def reward_advantages(kind: str, level: str, score: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor,
                      mask: torch.Tensor, beta: float) -> torch.Tensor:
    """The score with the detached KL penalty: [B, T] reward-to-go (token level) or [B] (sequence level)."""
    if level == "sequence":
        return score - beta * sequence_kl(logp.detach(), ref_logp, mask, kind)
    penalty = -beta * kl_estimate(logp.detach(), ref_logp, kind) * mask
    last = mask * (mask.cumsum(-1) == mask.sum(-1, keepdim=True))
    return discounted_returns(penalty + score[:, None] * last, 1.0, mask=mask)


def matrix_loss(kind: str, place: str, level: str, beta: float) -> Callable:
    """The audited loss of one configuration (module docstring); rollout_logp [B, T] is the sampler's."""
    if (kind, place, level) not in CONFIGURATIONS:
        raise ValueError(f"no configuration {label(kind, place, level)!r}; the reward takes {ESTIMATORS[:3]}")

    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp=None):
        rollout = logp.detach() if rollout_logp is None else rollout_logp
        rho, _ = mismatch_ratios(logp, rollout, mask, "sequence")           # detached, on every token of a reply
        score = leave_one_out(rewards.reshape(-1, int((group == 0).sum()))).reshape(-1)
        if place == "reward":
            adv = reward_advantages(kind, level, score, logp, ref_logp, mask, beta)
            return reinforce_loss(logp, rho * (adv if adv.dim() == 2 else adv[:, None]), mask, "seq_mean_token_sum")
        policy = reinforce_loss(logp, rho * score[:, None], mask, "seq_mean_token_sum")
        return policy + beta * kl_loss_term(kind, level, logp, ref_logp, rollout, mask)

    return loss_fn


def derived_follows(kind: str, place: str, level: str, on_policy: bool) -> str | None:
    """The objective each configuration follows, from the closed forms in docs/audit.md (replies of 2+ tokens)."""
    if place == "reward":
        return "reverse_kl" if kind == "k1" else None
    if not on_policy:
        return "reverse_kl" if (kind, level) == ("k3 x ratio", "sequence") else None
    if kind == "k1":
        return "reward_only"
    direction = "forward" if kind == "k3" else "reverse"
    return f"{direction}_kl" if level == "sequence" else f"tokenwise_{direction}_kl"


def objective_gradient(policy: EnumerablePolicy, objective: str, beta: float) -> torch.Tensor:
    """grad(-objective) at the policy, flat [D]."""
    grads = torch.autograd.grad(-policy.objective(objective, beta), policy.parameters())
    return torch.cat([g.flatten() for g in grads])


def audit_pair(config: Config, spec: str | None) -> tuple[EnumerablePolicy, EnumerablePolicy | None]:
    """(audited policy, behaviour or None on-policy) for one sampler spec."""
    policy = EnumerablePolicy(prompts=config.prompts, vocab=config.vocab, length=config.length,
                              seed=config.first_seed)
    if spec is None:
        return policy, None
    from pglab.audit.behaviour import behaviour_pair

    return behaviour_pair(policy, spec, beta=max(config.betas))


def audit_rows(config: Config) -> list[dict]:
    """One row per (sampler, beta, configuration): verdict, derivation, bias, variance and the gaps the claims use."""
    rows = []
    samplers = [None, *config.behaviours]
    for spec in track(samplers, "auditing the KL matrix", total=len(samplers)):
        policy, behaviour = audit_pair(config, spec)
        extra = {} if behaviour is None else {"behaviour": behaviour}
        for beta in config.betas:
            norm = float(objective_gradient(policy, "reverse_kl", beta).norm())
            gradients = {}
            for kind, place, level in CONFIGURATIONS:
                report = audit_loss(matrix_loss(kind, place, level, beta), policy, beta=beta,
                                    group_size=config.group_size, seed=config.first_seed, **extra)
                derived = derived_follows(kind, place, level, behaviour is None)
                gradients[kind, place, level] = report.gradient
                gap = (float((report.gradient - objective_gradient(policy, derived, beta)).norm()) / norm
                       if derived else None)
                rows.append({"sampler": spec or "on-policy", "beta": beta, "estimator": kind, "placement": place,
                             "level": level, "follows": report.follows or "none found",
                             "derived": derived or "none found", "relative_bias": report.relative_bias,
                             "scale": report.scale, "scaled_bias": report.scaled_bias,
                             "total_variance": report.total_variance, "gap_to_derived": gap})
            for row in rows[-len(CONFIGURATIONS):]:
                k2 = gradients["k2", "loss", row["level"]]
                g = gradients[row["estimator"], row["placement"], row["level"]]
                row["gap_to_k2_in_the_loss"] = float((g - k2).norm()) / norm
    return rows


def check_claims(result: Result, config: Config, rows: list[dict]) -> None:
    tol = config.tolerance
    on = [r for r in rows if r["sampler"] == "on-policy"]
    off = [r for r in rows if r["sampler"] != "on-policy"]
    result.check_range("audit verdicts ('follows') that disagree with the derivations, on and off policy",
                       sum(r["follows"] != r["derived"] for r in rows), high=0,
                       tolerance="exact; an objective is followed when E[g] is within a sine of 1e-8 of it")
    result.check_range("rows with a derived objective: largest |E[g] - grad(-J_derived)| / |grad J| (scale 1, "
                       "not only the direction)", max(r["gap_to_derived"] for r in rows if r["gap_to_derived"]
                                                      is not None), high=tol, tolerance=EXACT)
    tokenwise = [r for r in on if (r["estimator"], r["placement"], r["level"]) == ("k3", "loss", "token")]
    result.check_range("on-policy: k3 in the loss at the token level follows the per-token forward KL (rows whose "
                       "verdict is not tokenwise_forward_kl)", sum(r["follows"] != "tokenwise_forward_kl"
                                                                   for r in tokenwise), high=0, tolerance=EXACT)
    same = [r for r in on if r["placement"] == "loss" and r["estimator"] in ("k3 x ratio", "k1+", "k3+")]
    result.check_range("on-policy: largest |E[g] - E[g of k2 in the loss]| / |grad J| of k3 x ratio, k1+ and k3+ "
                       "in the loss (each level)", max(r["gap_to_k2_in_the_loss"] for r in same), high=tol,
                       tolerance=EXACT)
    k1_reward = [r for r in rows if (r["estimator"], r["placement"]) == ("k1", "reward")]
    result.check_range("k1 in the reward (token level with reward-to-go, and sequence level): largest relative bias "
                       "against J, on and off policy", max(r["relative_bias"] for r in k1_reward), high=tol,
                       tolerance=EXACT)
    unbiased = sum((r["relative_bias"] < tol) != (r["derived"] == "reverse_kl") for r in rows)
    result.check_range("rows whose unbiasedness (relative bias below the tolerance) disagrees with a derived "
                       "reverse_kl", unbiased, high=0, tolerance=f"exact; 'unbiased' is a relative bias below {tol:g}")
    if off:
        exact_off = {(r["estimator"], r["placement"], r["level"]) for r in off if r["relative_bias"] < tol}
        result.check("off-policy: the forms that stay exact are k1 in the reward (both levels) and the sequence-ratio "
                     "corrected k3 in the loss, at every sampler", len(exact_off), exact_off == {
                         ("k1", "reward", "token"), ("k1", "reward", "sequence"), ("k3 x ratio", "loss", "sequence")},
                     "3 configurations", tolerance=f"exact; a relative bias below {tol:g}")
    biased = [r["relative_bias"] for r in rows if r["relative_bias"] >= tol]
    result.check_range("smallest relative bias of a biased row (the split is not marginal)", min(biased), low=1e-3,
                       tolerance="exact; six orders of magnitude above the unbiased rows' 1e-9 bound")


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"{len(CONFIGURATIONS)} KL configurations (estimator x placement x level) audited exactly on a table policy "
        f"({config.prompts} prompts, {config.vocab} tokens, replies of {config.length}), on-policy and under "
        f"{', '.join(config.behaviours) or 'no other sampler'}, at beta {', '.join(f'{b:g}' for b in config.betas)}: "
        "the objective each follows against its closed form, and its exact relative bias and total variance.")
    rows = audit_rows(config)
    check_claims(result, config, rows)
    result.tables["matrix"] = rows
    result.metrics["audits"] = len(rows)
    result.figures["relative_bias"] = bias_figure(config, rows)


def bias_figure(config: Config, rows: list[dict]):
    """Relative bias of every configuration (rows) under every sampler (columns), at the first beta."""
    from pglab.reporting.plots import new_figure

    samplers = ["on-policy", *config.behaviours]
    beta = config.betas[0]
    grid = [[max(next(r["relative_bias"] for r in rows if r["sampler"] == s and r["beta"] == beta
                      and (r["estimator"], r["placement"], r["level"]) == c), 1e-16) for s in samplers]
            for c in CONFIGURATIONS]
    fig, ax = new_figure(figsize=(3 + 1.5 * len(samplers), 7))
    image = ax.imshow(torch.tensor(grid).log10().numpy(), aspect="auto", cmap="viridis", vmin=-16, vmax=1)
    ax.set_xticks(range(len(samplers)), samplers)
    ax.set_yticks(range(len(CONFIGURATIONS)), [label(*c) for c in CONFIGURATIONS], fontsize=7)
    ax.grid(False)
    ax.set_title(f"log10 relative bias against J, beta = {beta:g}", fontsize=9)
    fig.colorbar(image, ax=ax)
    return fig
