"""bugfix-scripted: agents-ch6's scripted baselines on BugFixEnv (random 0.10, blind 0.21, oracle 1.00 on train).

Each scripted policy plays ``episodes_per_task`` episodes of every task of both splits. The measured
pass rates are compared with the exact expected pass rates that :func:`pglab.envs.bugfix.exact_pass_rate`
computes by dynamic programming over the episode (statistical claims: the binomial se of the played episodes),
and those with the rates agents-ch6 cites. A second table measures what each op does to each bug family, on the
buggy and on the repaired source. That every scripted call is valid and the right op repairs every task of its
family hold at every seed: they are unit tests (tests/experiments/test_bugfix_scripted.py: the oracle's rollouts,
random play over the nine calls; tests/envs/bugfix/test_bugfix_ops.py: each op on each family).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from pglab.envs.bugfix import (
    FAMILIES,
    OP_NAMES,
    BugFixEnv,
    Grader,
    apply_op,
    default_grader,
    exact_pass_rate,
    make_tasks,
    rollout_stats,
    scripted_policy,
    scripted_rollout,
)
from pglab.envs.bugfix.scripted import KINDS
from pglab.reporting.plots import new_figure, outside_legend
from pglab.reporting.result import Result
from pglab.runtime.progress import track
from pglab.stats import binomial_se, check_printed, count_tail_p

SPLITS = ("train", "heldout")
BOOK_RATES = {"random": "0.10", "blind": "0.21", "oracle": "1.00"}
"""Training-split pass rates that agents-ch6 §6.2 cites from its Section 4.6, as printed."""
BOOK_EPISODES = 300
"""agents-ch6 measures its pass rates on "a few hundred episodes" (§6.2): the sample size taken for their se."""
BOOK_WITHIN_DIGITS = ("random", "oracle")
"""The book's rates that equal the exact expectation to their printed digits (exact claims); blind's 0.21 is a
draw of its few hundred episodes around the exact 0.2 (a statistical claim on the book's binomial se)."""


@dataclass
class Config:
    episodes_per_task: int = 64
    """Episodes of each policy on each task (the acceptance asks for at least 16)."""
    first_seed: int = 0
    """RNG seed of the policies' generators: policy k of (random, blind, oracle) uses first_seed + k."""
    budget: int = 6
    """Calls per episode."""
    QUICK: ClassVar[dict] = {"episodes_per_task": 16}


def op_effects(tasks: list, grader: Grader) -> list[dict]:
    """For each family and op: on how many tasks the op repairs, leaves or changes the buggy source,
    and leaves, keeps passing or breaks the repaired source."""
    programs = [(t, apply_op(op, s)) for t in tasks for op in OP_NAMES for s in (t.source, t.fixed)]
    passes = {(t.name, src): g.hidden_pass for (t, src), g in zip(programs, grader.grade_many(programs))}
    rows = []
    for family in FAMILIES:
        members = [t for t in tasks if t.family == family]
        for op in OP_NAMES:
            on_bug = [(apply_op(op, t.source), t.source, t) for t in members]
            on_fix = [(apply_op(op, t.fixed), t.fixed, t) for t in members]
            rows.append({
                "family": family, "op": op, "tasks": len(members),
                "bug: repaired": sum(passes[t.name, new] for new, _, t in on_bug),
                "bug: no change": sum(new == old for new, old, _ in on_bug),
                "bug: changed, still failing": sum(new != old and not passes[t.name, new] for new, old, t in on_bug),
                "fixed: no change": sum(new == old for new, old, _ in on_fix),
                "fixed: changed, still passing": sum(new != old and passes[t.name, new] for new, old, t in on_fix),
                "fixed: broken": sum(not passes[t.name, new] for new, _, t in on_fix),
            })
    return rows


def pass_rate_figure(rows: list[dict]):
    """Measured pass rate per policy and split (bars), the exact expectation (black ticks) and the book's rate."""
    fig, ax = new_figure(figsize=(7.5, 3.8))
    width = 0.38
    for s, split in enumerate(SPLITS):
        mine = [r for r in rows if r["split"] == split]
        xs = [k + (s - 0.5) * width for k in range(len(mine))]
        ax.bar(xs, [r["pass_rate"] for r in mine], width * 0.95, label=f"measured, {split} split", color=f"C{s}")
        ax.scatter(xs, [r["exact_pass_rate"] for r in mine], marker="_", s=300, color="black", zorder=3,
                   label="exact expectation" if s == 0 else None)
    train = [k - 0.5 * width for k in range(len(KINDS))]
    ax.scatter(train, [float(BOOK_RATES[kind]) for kind in KINDS], marker="x", s=50, color="C3", zorder=4,
               label="agents-ch6 (training split)")
    ax.set_xticks(range(len(KINDS)), KINDS)
    ax.set_xlabel("scripted policy")
    ax.set_ylabel("pass rate (share of episodes)")
    ax.set_ylim(0, 1.05)
    ax.set_title("Scripted policies on BugFixEnv")
    outside_legend(ax)
    return fig


def run(config: Config, result: Result) -> None:
    grader = default_grader()
    result.summary = (
        "Scripted policies on BugFixEnv: random (uniform over the nine valid calls), blind (one op guessed "
        "uniformly, then submit) and oracle (read, the right op, test, submit; told the family). Pass rate = "
        "submitted and every hidden test passes. `exact_pass_rate` is the expectation computed by dynamic "
        "programming over the episode with the same ops and grader.")
    sandbox = grader.sandbox.describe()
    result.tables["sandbox"] = [{"isolation": sandbox["isolation"], "landlock ABI": sandbox["landlock_abi"],
                                 "root": sandbox["root"], "not applied": "; ".join(sandbox["not_applied"]) or "-"}]
    rows, random_exact = [], {}
    for k, kind in enumerate(KINDS):
        policy = scripted_policy(kind, config.first_seed + k)
        for split in SPLITS:
            tasks = make_tasks(split)
            env = BugFixEnv(tasks, budget=config.budget, grader=grader)
            plays = [t for t in tasks for _ in range(config.episodes_per_task)]
            episodes = [scripted_rollout(policy, env, t) for t in track(plays, f"{kind} on {split}")]
            exact = [exact_pass_rate(kind, t, grader, config.budget) for t in tasks]
            if kind == "random":
                random_exact.update({t.name: p for t, p in zip(tasks, exact)})
            stats = rollout_stats(episodes)
            mean_exact = sum(exact) / len(exact)
            se = math.sqrt(sum(p * (1 - p) for p in exact) / config.episodes_per_task) / len(tasks)
            rows.append({"policy": kind, "split": split, "episodes": len(episodes), **stats,
                         "exact_pass_rate": mean_exact, "book": float(BOOK_RATES[kind]) if split == "train" else None})
            rate_claim(result, f"{kind} pass rate on {split} equals its exact expectation", stats["pass_rate"],
                       mean_exact, se, len(episodes))
    result.tables["policies"] = rows
    book_claims(result, rows)
    effects = op_effects(make_tasks("all"), grader)
    result.tables["ops_by_family"] = effects
    result.figures["pass_rates"] = pass_rate_figure(rows)
    result.metrics.update({f"{r['policy']}_{r['split']}_{stat}": r[stat] for r in rows
                           for stat in ("pass_rate", "exact_pass_rate", "valid_calls", "submit_rate", "turns")})
    result.metrics.update({f"ops {r['family']} {r['op']}: bug {what}": r[f"bug: {what}"] for r in effects
                           for what in ("repaired", "no change")})
    result.metrics.update(random_exact_by_later_edits(make_tasks("all"), random_exact))


def rate_claim(result: Result, claim: str, measured: float, exact: float, se: float, episodes: int) -> None:
    """A measured pass rate against its exact expectation: the two-sided binomial tail of the pass count at the
    mean exact rate (exact in the small-count tail, where a normal z understates it; conservative for the
    stratified count, whose variance is at most the binomial's); where the exact rate is 0 or 1 on every task
    (the oracle) no episode can differ from it, so it is an exact claim."""
    if se > 0:
        passes = round(measured * episodes)
        result.check_p(claim, measured, min(1.0, 2 * count_tail_p(passes, episodes, exact)), f"= {exact:.6g}",
                       f"two-sided binomial tail of {passes} passes in {episodes} episodes at the exact rate "
                       f"(stratified se {se:.4f})")
    else:
        result.check(claim, measured, measured == exact, f"{exact:g}", "exact: every task's exact rate is 0 or 1")


def book_claims(result: Result, rows: list[dict]) -> None:
    """The exact training-split rates against agents-ch6 §6.2's (the same at every seed: no episode enters)."""
    for kind, printed in BOOK_RATES.items():
        exact = next(r for r in rows if r["policy"] == kind and r["split"] == "train")["exact_pass_rate"]
        if kind in BOOK_WITHIN_DIGITS:
            check_printed(result, f"{kind}: exact pass rate on the training split vs agents-ch6 §6.2", exact, printed)
            continue
        se = binomial_se(exact, BOOK_EPISODES)
        result.check_z(f"{kind}: agents-ch6 §6.2's training-split rate as a draw of {BOOK_EPISODES} episodes at the "
                       "exact pass rate", float(printed), exact, se,
                       f"binomial se of {BOOK_EPISODES} episodes (\"a few hundred\") at the exact rate, se = "
                       f"{se:.3f}; the same at every seed (the book's sample, not ours)")


def random_exact_by_later_edits(tasks: list, exact: dict[str, float]) -> dict[str, float]:
    """Lowest and highest exact random pass rate (``exact``: task name -> rate) over the tasks where some op,
    the right one included, changes the repaired source (an edit after the repair can undo it) and over the
    tasks where every op leaves the repaired source as it is."""
    exposed = {t.name: any(apply_op(op, t.fixed) != t.fixed for op in OP_NAMES) for t in tasks}
    metrics = {}
    for label, flag in (("an op changes the repaired source", True), ("no op changes the repaired source", False)):
        rates = [exact[t.name] for t in tasks if exposed[t.name] == flag]
        metrics |= {f"random exact, {label}: min": min(rates), f"random exact, {label}: max": max(rates),
                    f"random exact, {label}: tasks": len(rates)}
    return metrics
