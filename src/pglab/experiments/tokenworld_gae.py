"""tokenworld-gae: exact values, TD errors and GAE's lambda trade-off in the token world (llm-ch6 §6.8-6.10).

Every Monte Carlo number sits beside the same quantity computed exactly by enumerating all 2^T
replies with their probabilities, and beside the book's printed number where it prints one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pglab.envs.tokenworld import A, B, TokenWorld, at_states
from pglab.estimators import gae
from pglab.reporting.plots import median_band, new_figure, outside_legend
from pglab.reporting.result import Result
from pglab.runtime.threads import single_torch_thread
from pglab.stats import check_one_more, check_printed, rank_sum_p, standard_error, worst_of_p

BOOK_START = {"V(start)": "0.5443", "Q(s0, A)": "0.6826", "Q(s0, B)": "0.3370",
              "A(s0, A)": "0.1382", "A(s0, B)": "-0.2074"}
"""llm-ch6 §6.8, as printed."""
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
BOOK_REPLIES = 100_000
"""llm-ch6 §6.10 measures the trade-off on this many sampled replies."""
BOOK_BEST_LAMBDA = {0.05: 0.0, 0.15: 0.4}
"""The book's best lambda per noisy critic (6.10, reading 4)."""
# The book prints V to 3 decimals; GAE's coefficients on V sum to at most 2 in absolute value, so the
# rounding of its V column moves an advantage by at most 2 * 0.0005, plus 0.0005 for the printed output.
BOOK_V_TOL = 0.0015
WORLD = TokenWorld(length=6, need=4)
P_A = 0.6
"""The book's world and its fixed policy."""
EXAMPLE, EXAMPLE_LAM = "ABABAA", 0.95
"""The book's one episode and the lambda of its GAE column."""
FLOAT_ZERO = 1e-24
"""A variance below this is zero up to float64 rounding of numbers of order 1 (lambda 0: delta is fixed by (s, a))."""


@dataclass
class Config:
    episodes: int = 100_000
    """Monte Carlo replies sampled for the bias/variance measurement."""
    lambdas: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.0)
    """GAE lambdas measured (gamma = 1)."""
    noises: tuple[float, ...] = (0.0, 0.05, 0.15)
    """Critics: exact V plus Gaussian noise of this sd, drawn once per state (the largest grades the episode)."""
    noise_draws: int = 40
    """Independent critic-noise draws per noise level behind the spread of bias^2 (by enumeration)."""
    seed: int = 0
    """RNG seed of the torch.Generator behind the main critic noise and the sampled replies."""
    draw_seed: int = 1
    """RNG seed of the torch.Generator behind the extra critic-noise draws."""

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
        rows.append({"quantity": name, "exact": float(value), "book": float(BOOK_START[name])})
        result.metrics[f"exact {name}"] = float(value)
        check_printed(result, f"llm-ch6 §6.8: exact {name}", float(value), BOOK_START[name])
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
    from_book = {name: gae(rewards, book_v, 1.0, lam)[0] for name, lam in lams.items()}
    book_key = {"delta": "delta", "GAE": "gae", "MC": "monte_carlo"}
    rows = []
    for t in range(WORLD.length):
        row = {"t": t, "state": f"({t}, {int(states[t])})", "token": EXAMPLE[t], "r": float(rewards[t]),
               "V ours": float(ours["delta"][1][0, 0, t]), "V book": BOOK_EPISODE["V"][t]}
        for name in lams:
            row.update({f"{name} ours": float(ours[name][0][0, 0, t]),
                        f"{name} from book V": float(from_book[name][t]),
                        f"{name} book": BOOK_EPISODE[book_key[name]][t]})
        row.update({"exact A": float(exact[t]), "exact A book": BOOK_EPISODE["exact"][t]})
        rows.append(row)
        result.metrics[f"{EXAMPLE} t {t}: V ours"] = row["V ours"]
        result.metrics[f"{EXAMPLE} t {t}: GAE from book V"] = row["GAE from book V"]
    for name in lams:
        gap = max(abs(r[f"{name} from book V"] - r[f"{name} book"]) for r in rows)
        result.check(f"{EXAMPLE}: {name} (lambda {lams[name]:g}) from the book's V column = the printed one", gap,
                     gap <= BOOK_V_TOL, f"<= {BOOK_V_TOL}",
                     "V rounded to 3 decimals (coefficients on V sum to <= 2) plus the printed rounding")
    gap = max(abs(r["exact A"] - r["exact A book"]) for r in rows)
    result.check(f"{EXAMPLE}: exact advantages = the book's", gap, gap <= 5e-4, "<= 0.0005",
                 "half a unit of the book's 3rd decimal")
    return rows


def split_errors(critics: torch.Tensor, tokens: torch.Tensor, weights: torch.Tensor, lam: float) -> list[tuple]:
    """GAE(lam) under each critic [C, T, T + 1] on replies tokens [N, T] weighted by [N] -> (bias^2, variance,
    squared deviation per reply [N]) per critic (see ``bias_variance``)."""
    estimates, _ = gae_along(critics, tokens, lam)
    keys, exact = pair_keys(tokens), WORLD.exact_advantages(P_A).flatten()
    return [bias_variance(per_critic, keys, exact, weights) for per_critic in estimates]


def tradeoff(critics: dict[float, torch.Tensor], config: Config, gen: torch.Generator) -> list[dict]:
    """bias^2 / variance / total for every critic and lambda, Monte Carlo and by enumeration -> rows."""
    sampled = WORLD.sample(P_A, config.episodes, gen)
    everything = WORLD.all_replies()
    sets = {"": (sampled, torch.ones(len(sampled), dtype=torch.float64)),
            " exact": (everything, WORLD.reply_probs(P_A, everything))}
    stacked = torch.stack(list(critics.values()))
    rows = {(noise, lam): {"critic": "exact V" if noise == 0 else f"V + noise {noise:g}", "noise": noise,
                           "lambda": lam} for noise in critics for lam in config.lambdas}
    for suffix, (tokens, weights) in sets.items():
        for lam in config.lambdas:
            for noise, (bias2, var, sq_dev) in zip(critics, split_errors(stacked, tokens, weights, lam), strict=True):
                row = rows[(noise, lam)]
                row.update({f"bias2{suffix}": bias2, f"variance{suffix}": var, f"total{suffix}": bias2 + var})
                if not suffix:
                    row["variance se"] = float(standard_error(sq_dev))
    for key, row in rows.items():
        book = BOOK_TRADEOFF.get(key, ("", "", ""))
        row.update({"book bias2": book[0], "book variance": book[1], "book total": book[2]})
    return list(rows.values())


def book_entry_metrics(rows: list[dict], result: Result) -> None:
    """Our Monte Carlo and exact bias^2 and variance at every (critic, lambda) the book prints, as metrics."""
    for row in rows:
        if (row["noise"], row["lambda"]) in BOOK_TRADEOFF:
            for part in ("bias2", "bias2 exact", "variance", "variance se", "variance exact"):
                result.metrics[f"noise {row['noise']:g}, lambda {row['lambda']:g}: {part}"] = row[part]


def noise_draws(config: Config) -> dict[float, dict[str, np.ndarray]]:
    """bias^2, variance and the best lambda by enumeration under ``noise_draws`` critics per noisy level.

    -> noise -> {"bias2", "variance": [draws, lambdas], "best": [draws]} (lambdas in config order).
    """
    gen = torch.Generator().manual_seed(config.draw_seed)
    everything = WORLD.all_replies()
    weights = WORLD.reply_probs(P_A, everything)
    noisy = [n for n in config.noises if n > 0]
    critics = torch.stack([critic_table(n, gen) for n in noisy for _ in range(config.noise_draws)])
    parts = np.array([[e[:2] for e in split_errors(critics, everything, weights, lam)] for lam in config.lambdas])
    parts = parts.transpose(1, 0, 2).reshape(len(noisy), config.noise_draws, len(config.lambdas), 2)
    lams = np.array(config.lambdas)
    return {n: {"bias2": p[..., 0], "variance": p[..., 1], "best": lams[p.sum(-1).argmin(-1)]}
            for n, p in zip(noisy, parts)}


def draws_table(draws: dict[float, dict[str, np.ndarray]], config: Config, result: Result) -> list[dict]:
    """The book's bias^2 (and critic-dependent variance) beside the range over noise draws, each claimed inside it."""
    rows = []
    for (noise, lam), (bias2, variance, _) in BOOK_TRADEOFF.items():
        if noise not in draws or lam not in config.lambdas:
            continue
        column = config.lambdas.index(lam)
        parts = [("bias2", bias2)] + ([("variance", variance)] if 0.0 < lam < 1.0 else [])
        for part, book in parts:
            values = draws[noise][part][:, column]
            low, median, high = np.percentile(values, [0.0, 50.0, 100.0])
            rows.append({"critic": f"V + noise {noise:g}", "lambda": lam, "quantity": part, "book": book,
                         "min over draws": low, "median over draws": median, "max over draws": high})
            check_one_more(result, f"llm-ch6 §6.10: {part} at noise {noise:g}, lambda {lam:g} (book {book}) as one "
                           f"more of {config.noise_draws} critic-noise draws (enumeration per draw)", values, book,
                           log=bool((values > 0).all()) and book > 0)
    for noise in draws:
        for lam in config.lambdas:
            share = float((draws[noise]["best"] == lam).mean())
            book = " (the book's)" if BOOK_BEST_LAMBDA.get(noise) == lam else ""
            result.metrics[f"share of draws with best lambda {lam:g}{book}, critic noise {noise:g}"] = share
    return rows


def check_tradeoff(rows: list[dict], draws: dict, config: Config, result: Result) -> None:
    """Monte Carlo against enumeration, the book's Monte Carlo variances against enumeration, the book's readings."""
    by = {(r["noise"], r["lambda"]): r for r in rows}
    for noise in config.noises:
        own = [r for r in rows if r["noise"] == noise]
        z = torch.tensor([(r["variance"] - r["variance exact"]) / (r["variance se"] + FLOAT_ZERO) for r in own])
        result.check_p(f"critic noise {noise:g}: Monte Carlo variance = enumeration at every lambda",
                       float(z.abs().max()), worst_of_p(z), "every lambda's variance = its enumeration",
                       f"the largest of {len(z)} normal z of the mean squared deviation per reply (plus {FLOAT_ZERO:g} "
                       "in the se for float64 rounding where the variance is zero), Bonferroni over the lambdas")
        exact_var = [r["variance exact"] for r in sorted(own, key=lambda r: r["lambda"])]
        drop = max((a - b for a, b in zip(exact_var, exact_var[1:], strict=False)), default=0.0)
        result.check(f"critic noise {noise:g}: variance grows with lambda (enumeration)", drop, drop <= 1e-12,
                     "largest decrease from one lambda to the next <= 1e-12", "float64 rounding of an exact sum")
        result.metrics[f"best lambda, critic noise {noise:g}"] = min(own, key=lambda r: r["total exact"])["lambda"]
    for lam in (0.95, 1.0):   # the critic only enters as a baseline at lambda 1; at 0.95 the book's critic is exact
        row = by.get((0.0, lam))
        if row is None:
            continue
        book = BOOK_TRADEOFF[(0.0, lam)][1]
        se = row["variance se"] * math.sqrt(config.episodes / BOOK_REPLIES)
        result.check_z(f"llm-ch6 §6.10: variance at lambda {lam:g}, exact critic (book {book}) vs enumeration",
                       book, row["variance exact"], se,
                       f"normal z of the book's {BOOK_REPLIES:,}-reply estimate (our se {row['variance se']:.2g} "
                       f"from {config.episodes:,} replies, scaled: {se:.2g})")
    if 0.0 in config.lambdas:
        column = config.lambdas.index(0.0)
        levels = sorted(draws)
        for low, high in zip(levels, levels[1:]):
            p = rank_sum_p(draws[high]["bias2"][:, column], draws[low]["bias2"][:, column])
            result.check_p(f"lambda 0 bias^2 grows with critic noise: {high:g} not below {low:g} (one-sided rank-sum "
                           "p of the reverse order)", p, p, f"noise {high:g} not behind",
                           f"Mann-Whitney test that noise {low:g} gives the larger bias^2 over {config.noise_draws} "
                           "draws each (enumeration per draw)")


def tradeoff_figure(rows: list[dict], draws: dict[float, dict[str, np.ndarray]], config: Config):
    """Per critic: bias^2, variance and total against lambda (exact lines, Monte Carlo points, the book's crosses);
    for the noisy critics the median and interquartile band of bias^2 over the noise draws."""
    noises = config.noises
    fig, axes = new_figure(1, len(noises), figsize=(4.0 * len(noises) + 2.2, 3.9), sharey=True, squeeze=False)
    parts = (("bias2", "C0", "bias^2"), ("variance", "C1", "variance"), ("total", "C2", "total"))
    for ax, noise in zip(axes[0], noises, strict=True):
        own = sorted((r for r in rows if r["noise"] == noise), key=lambda r: r["lambda"])
        lams = [r["lambda"] for r in own]
        for part, color, name in parts:
            ax.plot(lams, [r[f"{part} exact"] for r in own], color=color, label=f"{name}, exact (this critic)")
            ax.plot(lams, [r[part] for r in own], "o", color=color, ms=4, label=f"{name}, Monte Carlo")
            book = [(r["lambda"], r[f"book {part}"]) for r in own if r[f"book {part}"] != ""]
            ax.plot([b[0] for b in book], [b[1] for b in book], "x", color=color, ms=7, mew=1.5,
                    label=f"{name}, book")
        if noise in draws:
            median_band(ax, np.array(config.lambdas), draws[noise]["bias2"], "0.45",
                        f"bias^2 over {config.noise_draws} noise draws: median, IQR", ls="--")
        ax.set_title(own[0]["critic"])
        ax.set_xlabel("GAE lambda")
    axes[0][0].set_ylabel("squared error against exact A(s, a)")
    outside_legend(axes[0][-1])
    fig.suptitle(f"GAE in the token world, P(A) = {P_A:g}: bias^2 + variance = total error")
    return fig


def run(config: Config, result: Result) -> None:
    result.summary = (
        f"The {WORLD.length}-token world (reward 1 for at least {WORLD.need} A's) under P(A) = {P_A:g}: "
        "exact values, one episode graded by a rough critic, and GAE's squared error against the exact "
        f"advantage split into bias^2 and variance over {config.episodes:,} sampled replies, beside the same "
        "split computed exactly by enumerating every reply. Critics are exact V plus noise drawn once per state; "
        f"the book's bias^2 depends on its own noise draw, so it is compared with {config.noise_draws} draws of ours.")
    gen = torch.Generator().manual_seed(config.seed)
    critics = {noise: critic_table(noise, gen) for noise in config.noises}
    result.tables["start"] = start_table(result)
    result.tables["exact_values"] = values_table()
    result.tables["episode"] = episode_table(critics[max(config.noises)], result)
    with single_torch_thread():
        rows = tradeoff(critics, config, gen)
        draws = noise_draws(config)
    result.tables["tradeoff"] = rows
    book_entry_metrics(rows, result)
    result.tables["noise_draws"] = draws_table(draws, config, result)
    check_tradeoff(rows, draws, config, result)
    result.figures["tradeoff"] = tradeoff_figure(rows, draws, config)
