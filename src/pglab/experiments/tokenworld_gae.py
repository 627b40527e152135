"""tokenworld-gae: exact values, TD errors and GAE's lambda trade-off in the token world (llm-ch6 §6.8-6.10).

Every Monte Carlo number sits beside the same quantity computed exactly by enumerating all 2^T
replies with their probabilities, and beside the book's printed number where it prints one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from pglab.envs.tokenworld import A, B, TokenWorld, at_states
from pglab.estimators import gae
from pglab.plots import new_figure
from pglab.result import Result
from pglab.stats import standard_error
from pglab.threads import single_torch_thread

BOOK_START = {"V(start)": 0.5443, "Q(s0, A)": 0.6826, "Q(s0, B)": 0.3370,
              "A(s0, A)": 0.1382, "A(s0, B)": -0.2074}
BOOK_EPISODE = {  # llm-ch6 §6.9, the episode ABABAA under a rough critic (exact V plus noise 0.15)
    "V": [0.850, 0.553, 0.417, 0.572, 0.227, 0.456],
    "delta": [-0.298, -0.136, 0.156, -0.345, 0.229, 0.544],
    "gae": [0.025, 0.340, 0.501, 0.363, 0.746, 0.544],
    "monte_carlo": [0.15, 0.447, 0.583, 0.428, 0.773, 0.544],
    "exact": [0.138, -0.207, 0.173, -0.288, 0.240, 0.400],
}
BOOK_TRADEOFF = {  # (critic noise, lambda) -> (bias^2, variance, total error), llm-ch6 §6.10
    (0.0, 0.0): (0.0, 0.0, 0.0),
    (0.0, 0.95): (0.0, 0.1011, 0.1011),
    (0.0, 1.0): (0.0, 0.1304, 0.1304),
    (0.05, 0.0): (0.0058, 0.0, 0.0058),
    (0.05, 1.0): (0.0033, 0.1304, 0.1336),
    (0.15, 0.0): (0.0522, 0.0, 0.0522),
    (0.15, 0.4): (0.0405, 0.0063, 0.0468),
    (0.15, 1.0): (0.0292, 0.1304, 0.1596),
}
BOOK_BEST_LAMBDA = {0.0: 0.0, 0.05: 0.0, 0.15: 0.4}
"""The book's best lambda per critic noise (6.10, reading 4)."""
# The seed prints V to 3 decimals; GAE's coefficients on V sum to at most 2 in absolute value, so the
# rounding of its V column moves an advantage by at most 2 * 0.0005, plus 0.0005 for the printed output.
BOOK_V_TOL = 0.0015
WORLD = TokenWorld(length=6, need=4)
P_A = 0.6
"""The book's world and its fixed policy."""
EXAMPLE, EXAMPLE_LAM = "ABABAA", 0.95
"""The book's one episode and the lambda of its GAE column."""
FLOAT_ZERO = 1e-24
"""bias^2 and variance below this are zero up to float64 rounding of numbers of order 1."""


@dataclass
class Config:
    episodes: int = 100_000
    """Monte Carlo replies sampled for the bias/variance measurement."""
    lambdas: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.0)
    """GAE lambdas measured (gamma = 1)."""
    noises: tuple[float, ...] = (0.0, 0.05, 0.15)
    """Critics: exact V plus Gaussian noise of this sd, drawn once per state (the largest grades the episode)."""
    sigmas: float = 4.0
    """Monte Carlo variances must match the enumeration within this many standard errors."""
    seed: int = 0
    """Seed of the torch.Generator behind the critic noise and the sampled replies."""

    QUICK: ClassVar[dict] = {"episodes": 20_000}


def critic_table(noise: float, gen: torch.Generator) -> torch.Tensor:
    """Exact V of the policy plus N(0, noise^2) per state -> [T, T + 1] (after the last token: 0, in gae)."""
    exact = WORLD.exact_values(P_A)[:-1]
    return exact + noise * torch.randn(exact.shape, generator=gen, dtype=torch.float64)


def gae_along(critics: torch.Tensor, tokens: torch.Tensor, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE (gamma = 1) under each critic; critics [C, T, T + 1], tokens [N, T] -> (adv, values) [C, N, T]."""
    shape = (len(critics), *tokens.shape)
    values = at_states(critics, WORLD.states(tokens)[..., :-1].expand(shape))
    advantages, _ = gae(WORLD.rewards(tokens).expand(shape), values, 1.0, lam)
    return advantages, values


def pair_keys(tokens: torch.Tensor) -> torch.Tensor:
    """Index of each visited (t, k, a) in a flattened [T, T + 1, 2] table; tokens [N, T] -> [N, T]."""
    t = torch.arange(WORLD.length)
    return (t * (WORLD.length + 1) + WORLD.states(tokens)[..., :-1]) * 2 + tokens


def bias_variance(estimates: torch.Tensor, keys: torch.Tensor, exact: torch.Tensor, weights: torch.Tensor):
    """Split the squared error against exact A(s, a) into bias^2 and variance, per visited (s, a) pair.

    estimates, keys [N, T]; exact [M] (A per key); weights [N] (1 for samples, probabilities for an
    enumeration) -> (bias^2, variance, squared deviation per reply [N] averaged over its tokens).
    Both parts average over every visited token, so a pair counts as often as it is visited.
    """
    w = weights[:, None].expand_as(estimates).flatten()
    flat_keys, flat = keys.flatten(), estimates.flatten()
    mass = torch.zeros(exact.numel(), dtype=torch.float64).index_add_(0, flat_keys, w)
    sums = torch.zeros(exact.numel(), dtype=torch.float64).index_add_(0, flat_keys, w * flat)
    conditional = (sums / mass.clamp(min=torch.finfo(torch.float64).tiny))[keys]   # E[A_hat | s, a] [N, T]
    sq_dev = (estimates - conditional).pow(2).mean(-1)
    total = weights.sum()
    bias2 = (weights[:, None] * (conditional - exact[keys]).pow(2)).mean(-1).sum() / total
    return float(bias2), float((weights * sq_dev).sum() / total), sq_dev


def start_table(result: Result) -> list[dict]:
    """V, Q and A at the start state beside the book's 4-digit values."""
    v, q, adv = WORLD.exact_values(P_A), WORLD.exact_q(P_A), WORLD.exact_advantages(P_A)
    ours = {"V(start)": v[0, 0], "Q(s0, A)": q[0, 0, A], "Q(s0, B)": q[0, 0, B],
            "A(s0, A)": adv[0, 0, A], "A(s0, B)": adv[0, 0, B]}
    rows = []
    for name, value in ours.items():
        rows.append({"quantity": name, "exact": float(value), "book": BOOK_START[name]})
        result.check_close(f"exact {name} to 4 digits", float(value), BOOK_START[name], 5e-5,
                           "half a unit of the book's 4th decimal")
    return rows


def values_table() -> list[dict]:
    """V, Q and A of every reachable state before the last token."""
    v, q, adv = WORLD.exact_values(P_A), WORLD.exact_q(P_A), WORLD.exact_advantages(P_A)
    return [{"t": t, "k": k, "V": float(v[t, k]), "Q(A)": float(q[t, k, A]), "Q(B)": float(q[t, k, B]),
             "A(A)": float(adv[t, k, A]), "A(B)": float(adv[t, k, B])}
            for t in range(WORLD.length) for k in range(t + 1)]


def episode_table(critic: torch.Tensor, result: Result) -> list[dict]:
    """The book's episode under our rough critic, beside GAE from the book's V column and its printed values."""
    tokens = torch.tensor([[A if c == "A" else B for c in EXAMPLE]])
    states, rewards = WORLD.states(tokens)[0], WORLD.rewards(tokens)[0]
    exact = WORLD.exact_advantages(P_A).flatten()[pair_keys(tokens)][0]
    lams = {"delta": 0.0, "GAE": EXAMPLE_LAM, "MC": 1.0}
    ours = {name: gae_along(critic[None], tokens, lam) for name, lam in lams.items()}
    book_v = torch.tensor(BOOK_EPISODE["V"], dtype=torch.float64)
    from_seed = {name: gae(rewards, book_v, 1.0, lam)[0] for name, lam in lams.items()}
    book_key = {"delta": "delta", "GAE": "gae", "MC": "monte_carlo"}
    rows = []
    for t in range(WORLD.length):
        row = {"t": t, "state": f"({t}, {int(states[t])})", "token": EXAMPLE[t], "r": float(rewards[t]),
               "V ours": float(ours["delta"][1][0, 0, t]), "V seed": BOOK_EPISODE["V"][t]}
        for name in lams:
            row.update({f"{name} ours": float(ours[name][0][0, 0, t]),
                        f"{name} from seed V": float(from_seed[name][t]),
                        f"{name} seed": BOOK_EPISODE[book_key[name]][t]})
        row.update({"exact A": float(exact[t]), "exact A seed": BOOK_EPISODE["exact"][t]})
        rows.append(row)
    for name in lams:
        gap = max(abs(r[f"{name} from seed V"] - r[f"{name} seed"]) for r in rows)
        result.check(f"{EXAMPLE}: {name} (lambda {lams[name]:g}) from the book's V column = the printed one", gap,
                     gap <= BOOK_V_TOL, f"<= {BOOK_V_TOL}",
                     "V rounded to 3 decimals (coefficients on V sum to <= 2) plus the printed rounding")
    gap = max(abs(r["exact A"] - r["exact A seed"]) for r in rows)
    result.check(f"{EXAMPLE}: exact advantages = the book's", gap, gap <= 5e-4, "<= 0.0005",
                 "half a unit of the book's 3rd decimal")
    return rows


def tradeoff(critics: dict[float, torch.Tensor], config: Config, gen: torch.Generator) -> list[dict]:
    """bias^2 / variance / total for every critic and lambda, Monte Carlo and by enumeration -> rows."""
    exact_adv = WORLD.exact_advantages(P_A).flatten()
    sampled = WORLD.sample(P_A, config.episodes, gen)
    everything = WORLD.all_replies()
    sets = {"": (sampled, torch.ones(len(sampled), dtype=torch.float64)),
            " exact": (everything, WORLD.reply_probs(P_A, everything))}
    stacked = torch.stack(list(critics.values()))
    rows = {(noise, lam): {"critic": "exact V" if noise == 0 else f"V + noise {noise:g}", "noise": noise,
                           "lambda": lam} for noise in critics for lam in config.lambdas}
    for suffix, (tokens, weights) in sets.items():
        keys = pair_keys(tokens)
        for lam in config.lambdas:
            estimates, _ = gae_along(stacked, tokens, lam)
            for noise, per_critic in zip(critics, estimates, strict=True):
                bias2, var, sq_dev = bias_variance(per_critic, keys, exact_adv, weights)
                row = rows[(noise, lam)]
                row.update({f"bias2{suffix}": bias2, f"variance{suffix}": var, f"total{suffix}": bias2 + var})
                if not suffix:
                    row["variance se"] = float(standard_error(sq_dev))
    for key, row in rows.items():
        seed = BOOK_TRADEOFF.get(key, ("", "", ""))
        row.update({"seed bias2": seed[0], "book variance": seed[1], "book total": seed[2]})
    return list(rows.values())


def check_tradeoff(rows: list[dict], config: Config, result: Result) -> None:
    """The book's four readings of the trade-off, plus Monte Carlo against enumeration."""
    by = {(r["noise"], r["lambda"]): r for r in rows}
    exact0 = by.get((0.0, 0.0))
    if exact0 is not None:
        for part in ("bias2", "variance"):
            for suffix, how in (("", "Monte Carlo"), (" exact", "enumeration")):
                value = exact0[part + suffix]
                result.check(f"exact critic, lambda 0: {part} is zero ({how})", value, value <= FLOAT_ZERO,
                             f"<= {FLOAT_ZERO:g}", "float64 rounding; deterministic transitions make delta = A")
    for noise in config.noises:
        row = by.get((noise, 1.0))
        if row is not None:
            result.check_close(f"lambda 1 variance, critic noise {noise:g} (Monte Carlo)", row["variance"],
                               0.130, 0.005, f"issue's tolerance; Monte Carlo se = {row['variance se']:.2g}, "
                               f"enumeration = {row['variance exact']:.4f}")
        own = [r for r in rows if r["noise"] == noise]
        excess = max(abs(r["variance"] - r["variance exact"]) / (config.sigmas * r["variance se"] + FLOAT_ZERO)
                     for r in own)
        result.check(f"critic noise {noise:g}: Monte Carlo variance = enumeration at every lambda", excess,
                     excess <= 1.0, "<= 1 (|MC - exact| / (sigmas * se))",
                     f"{config.sigmas:g} standard errors of the mean squared deviation per reply")
        exact_var = [r["variance exact"] for r in sorted(own, key=lambda r: r["lambda"])]
        drop = max((a - b for a, b in zip(exact_var, exact_var[1:], strict=False)), default=0.0)
        result.check(f"critic noise {noise:g}: variance grows with lambda (enumeration)", drop, drop <= 1e-12,
                     "largest decrease from one lambda to the next <= 1e-12", "float64 rounding")
        best = min(own, key=lambda r: r["total exact"])["lambda"]
        result.metrics[f"best lambda, critic noise {noise:g}"] = best
        if noise in BOOK_BEST_LAMBDA and 0.0 in config.lambdas and 1.0 in config.lambdas:
            book_best = BOOK_BEST_LAMBDA[noise]
            result.check(f"critic noise {noise:g}: best lambda (enumeration; seed {book_best:g})", best,
                         best == 0.0 if book_best == 0.0 else 0.0 < best < 1.0,
                         "0" if book_best == 0.0 else "in (0, 1)", "exact enumeration" if book_best == 0.0
                         else "exact enumeration; where inside (0, 1) depends on the noise draw")
    at_one = [by[(n, 1.0)]["variance exact"] for n in config.noises if (n, 1.0) in by]
    if len(at_one) > 1:
        spread = max(at_one) - min(at_one)
        result.check("lambda 1 variance is the same for every critic (enumeration)", spread, spread <= 1e-12,
                     "<= 1e-12", "float64 rounding: the critic is only a baseline at lambda 1")
    bias0 = [by[(n, 0.0)]["bias2 exact"] for n in sorted(config.noises) if (n, 0.0) in by]
    step = min((b - a for a, b in zip(bias0, bias0[1:], strict=False)), default=0.0)
    result.check("lambda 0 bias^2 grows with critic noise (enumeration)", step, step > 0,
                 "smallest increase > 0", "exact enumeration")


def tradeoff_figure(rows: list[dict], noises: tuple[float, ...]):
    fig, axes = new_figure(1, len(noises), figsize=(4.2 * len(noises), 3.8), sharey=True, squeeze=False)
    for ax, noise in zip(axes[0], noises, strict=True):
        own = sorted((r for r in rows if r["noise"] == noise), key=lambda r: r["lambda"])
        lams = [r["lambda"] for r in own]
        for part, color in (("bias2", "C0"), ("variance", "C1"), ("total", "C2")):
            ax.plot(lams, [r[f"{part} exact"] for r in own], color=color, label=f"{part} (exact)")
            ax.plot(lams, [r[part] for r in own], "o", color=color, ms=4, label=f"{part} (Monte Carlo)")
        ax.set_title(own[0]["critic"])
        ax.set_xlabel("lambda")
    axes[0][0].set_ylabel("squared error against exact A(s, a)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("GAE in the token world: bias^2 + variance = total error")
    fig.tight_layout()
    return fig


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"The {WORLD.length}-token world (reward 1 for at least {WORLD.need} A's) under P(A) = {P_A:g}: "
        "exact values, one episode graded by a rough critic, and GAE's squared error against the exact "
        f"advantage split into bias^2 and variance over {config.episodes:,} sampled replies, beside the same "
        "split computed exactly by enumerating every reply. Critics are exact V plus noise drawn once per state.")
    gen = torch.Generator().manual_seed(config.seed)
    critics = {noise: critic_table(noise, gen) for noise in config.noises}
    result.tables["start"] = start_table(result)
    result.tables["exact_values"] = values_table()
    result.tables["episode"] = episode_table(critics[max(config.noises)], result)
    with single_torch_thread():
        rows = tradeoff(critics, config, gen)
    result.tables["tradeoff"] = rows
    check_tradeoff(rows, config, result)
    result.figures["tradeoff"] = tradeoff_figure(rows, config.noises)
