"""``pglab demo``: the main job on the embedded default (agents-ch6 §6.2, §6.7).

The word tokenizer, the behaviour-cloned base agent, REINFORCE from a copy of it, the
before/after table on both splits, the behaviour analysis and the learning curve, all written
under the run's folder. A stopped run continues with ``--resume``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pglab.envs.bugfix import make_tasks
from pglab.reporting.plots import new_figure
from pglab.reporting.result import Result, provenance
from pglab.runtime.options import RunOptions, SettingsError
from pglab.sampling.episodes import episode_stats
from pglab.trainers.loop import RunDir, RunSettings
from pglab.trainers.tinyagent import (
    FORMAT_PENALTY,
    SPLITS,
    before_after_rows,
    behaviour_rows,
    every,
    learning_curve,
    sample_transcripts,
    scripted_levels,
    train_from_base,
)

DEMO = {"steps": 80, "batch_size": 64, "eval_every": 10, "eval_per_task": 8, "stats_per_task": 16}
"""The demo's size (agents-ch6 §6.7): 80 steps of 64 episodes, held-out pass every 10 steps, 16 episodes per task
for the before/after table."""
DEMO_QUICK = {"steps": 10, "batch_size": 32, "eval_every": 5, "eval_per_task": 4, "stats_per_task": 4}
"""``pglab demo --quick``: a first look in seconds."""
BOOK_TRAINED = {"train": {"pass": 0.775, "valid_calls": 0.951, "submit_rate": 0.975, "turns": 3.416, "episodes": 320},
                "heldout": {"pass": 0.456, "valid_calls": 0.974, "submit_rate": 0.944, "turns": 4.481,
                            "episodes": 160}}
"""agents-ch6 §6.7: the trained agent on both splits (one seed, 16 episodes per task)."""
BOOK_BASE_PASS = {"train": 0.144, "heldout": 0.125}
"""agents-ch6 §6.7: the base agent's pass rate on both splits."""
SD_OVER_SEEDS = {"train": {"submit_rate": 0.0722, "turns": 0.6919}, "heldout": {"submit_rate": 0.1491, "turns": 0.2708}}
"""Standard deviation over seeds 0, 7 and 11 of the trained agent's submit rate and turns at the default format
penalty (``docs/results/format_penalty.json``; a test keeps the two in step). Which strategy a seed locks into is chance
(course-ch7's race), so these claims carry it in their standard error, as for one more seed: sd^2 (1 + 1/3)."""
VALID_SD_OVER_SEEDS = {"train": 0.0212, "heldout": 0.0241}
"""The same for valid calls (the sweep's runs at the default cost; a test derives it): the format cost keeps calls
valid, but how valid varies over seeds too (seed 10000 held-out: 0.935), so the valid-call claims carry it as well."""
SEED_FACTOR = 1 + 1 / 3
"""sd^2 over 3 seeds predicts one more seed's spread with this factor (1 + 1/n)."""
SEED_DOF = 2
"""Degrees of freedom of that sd (3 seeds): the submit-rate and turns claims, which it dominates, take their p-value
from Student's t with them (with the normal tail seed 12000's train submit rate 0.631 failed against 0.975: three
seeds had underestimated the spread). The valid-call claims keep the normal tail, so that the format cost's absence
still fails them."""


@dataclass
class DemoSettings(RunOptions):
    """Settings of ``pglab demo``: the run folder, resume and size of :class:`RunOptions`, the seed and the cost."""

    seed: int = 0
    """RNG seed of the whole run."""
    steps: int | None = None
    """REINFORCE steps (None: 80, or 10 with --quick); the book's claims are checked at 80 steps only."""
    device: str = "cpu"
    """cpu: TinyAgent (two layers, 64 wide, episodes played in lockstep) trains on the CPU, where it is fastest."""
    format_penalty: float | None = None
    """Training cost of one malformed call, placed on its own tokens (None: the swept value FORMAT_PENALTY)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seed < 0:
            raise SettingsError(f"--seed must be a whole number >= 0, got {self.seed}")
        if self.steps is not None and self.steps < 1:
            raise SettingsError(f"--steps must be at least 1, got {self.steps}")
        if self.device != "cpu":
            raise SettingsError(f"--device {self.device}: the demo's TinyAgent trains on the CPU only; drop --device "
                                "(pglab train-agent and train-lm take --device cuda)")
        if self.format_penalty is not None and not 0 <= self.format_penalty < math.inf:
            raise SettingsError(f"--format-penalty is the cost of a malformed call, a number >= 0; got "
                                f"{self.format_penalty}")
        if self.resume and (self.format_penalty is not None or self.seed or self.quick or self.steps is not None):
            raise SettingsError("--resume continues with the run's own seed, size and format penalty (its demo.json); "
                                "drop --seed, --quick, --steps and --format-penalty")


def demo(out: str | Path, *, seed: int = 0, quick: bool = False, resume: bool = False, steps: int | None = None,
         format_penalty: float = FORMAT_PENALTY, echo: Callable[[str], None] = lambda line: None) -> Result:
    """The main job: tokenizer, base agent, REINFORCE, before/after table, behaviour analysis, learning curve.

    Writes into ``out``: the training log (``train.jsonl``), checkpoints, the trained agent
    (``agent/``, loadable with ``TinyAgent.from_pretrained``, with its ``tokenizer.json``).
    ``format_penalty`` is the training cost of a malformed call; ``steps`` replaces the size's step count (the
    book's claims are checked only at the full size). With ``resume``, ``seed``, ``quick``, ``steps``
    and ``format_penalty`` are read back from ``out/demo.json`` and training continues
    from the checkpoint. ``echo`` receives progress lines. Returns the Result (tables, metrics, figure).
    """
    out = Path(out)
    if resume:
        if not (out / "demo.json").exists():
            raise SettingsError(f"{out} holds no demo run to resume (no demo.json); pass the folder of a stopped run")
        saved = json.loads((out / "demo.json").read_text())
        seed, quick, format_penalty = saved["seed"], saved["quick"], saved.get("format_penalty", FORMAT_PENALTY)
        steps = saved.get("steps")
        step = RunDir(out).checkpoint_step()
        echo(f"resuming the demo in {out} (seed {seed}{', quick' if quick else ''}) from step {step or 0}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo.json").write_text(json.dumps({"seed": seed, "quick": quick, "format_penalty": format_penalty,
                                               "steps": steps}))
    size = {**(DEMO_QUICK if quick else DEMO), **({"steps": steps} if steps is not None else {})}
    result = Result("demo", {"seed": seed, "quick": quick, "format_penalty": format_penalty, **size},
                    provenance=provenance())
    result.summary = (
        "TinyAgent, behaviour-cloned on scripted random and blind play, learns by REINFORCE (reward minus an EMA "
        "baseline, token_mean, Adam 2e-3) to repair buggy functions through tool calls in BugFixEnv "
        f"(agents-ch6 §6.2, §6.7), each malformed call costing {format_penalty:g} on its own tokens (§6.5): "
        f"{size['steps']} steps of {size['batch_size']} episodes, seed {seed}.")
    trained = train_from_base(seed, **size, format_penalty=format_penalty, run=RunSettings(out=out, resume=resume),
                              echo=echo)
    trained["model"].save_pretrained(out / "agent")
    trained["tokenizer"].save(out / "agent" / "tokenizer.json")
    levels = {name: scripted_levels(make_tasks(name)) for name in SPLITS}
    run = trained["run"]
    result.tables["before_after"] = before_after_rows(trained)
    result.tables["training"] = every(run["history"], run["evals"], size["eval_every"])
    result.tables["behaviour"], result.tables["top_call_sequences"] = behaviour_rows(trained)
    result.tables["sample_episodes"] = sample_transcripts(trained["after"]["train"])
    result.tables["reference_levels"] = [{"split": name, "scripted random": lv["random"], "scripted blind": lv["blind"]}
                                         for name, lv in levels.items()]
    for row in result.tables["before_after"]:
        key = "base" if row["agent"] == "base" else "trained"
        result.metrics.update({f"{key}_{row['split']}_pass_rate": row["pass_rate"],
                               f"{key}_{row['split']}_valid_calls": row["valid_calls"]})
    result.metrics.update({"steps": len(run["history"]), "train_seconds": run["seconds"],
                           "total_seconds": trained["seconds"], "resumed_from": run["resumed_from"]})
    held_out = result.metrics["trained_heldout_pass_rate"]
    generalised, se = generalisation(held_out, len(trained["after"]["heldout"].info), levels["heldout"]["blind"])
    if size == DEMO:
        found = measured(trained)
        result.metrics.update({f"trained_{split}_{key}": value for split, values in found.items()
                               for key, value in values.items() if key not in ("pass", "base_pass")})
        book_claims(result, found, levels["heldout"]["blind"], generalised)
    verdict = verdict_line(seed, held_out, levels["heldout"]["blind"], se, generalised)
    result.metrics["generalised"] = float(generalised)
    result.summary += " " + verdict + "."
    echo(verdict)
    if not generalised:                         # printed again after the tables, where it is not scrolled away
        result.warnings.append(f"warning: {verdict}")
    fig, ax = new_figure(figsize=(7, 4))
    learning_curve(ax, run["history"], run["evals"], {"base agent (train)": result.metrics["base_train_pass_rate"],
                                                      "scripted blind (train)": levels["train"]["blind"]})
    ax.set_title(f"TinyAgent REINFORCE on BugFixEnv, seed {seed}")
    ax.legend(fontsize=8, loc="upper left")
    result.figures["learning_curve"] = fig
    return result


def binomial_gap_se(first: float, second: float, n_first: int, n_second: int) -> float:
    """Standard error of the difference of two independent shares measured over ``n_first`` and ``n_second`` trials
    (each variance floored at 1e-4, so a share of 0 or 1 still carries its resolution)."""
    return math.sqrt(max(first * (1 - first), 1e-4) / n_first + max(second * (1 - second), 1e-4) / n_second)


def generalisation(pass_rate: float, episodes: int, blind: float) -> tuple[bool, float]:
    """(whether the held-out pass rate lies more than 2 binomial se above the scripted blind level, that se).

    Below it the agent plays what it memorised ("name -> op, submit"), the blind script's level on held-out tasks."""
    se = math.sqrt(max(pass_rate * (1 - pass_rate), 1e-4) / episodes)
    return pass_rate > blind + 2 * se, se


def verdict_line(seed: int, pass_rate: float, blind: float, se: float, generalised: bool) -> str:
    """The demo's one-line statement of whether, at this seed, the trained agent generalised or memorised."""
    where = f"held-out pass {pass_rate:.3f} against the scripted blind level {blind:.3f} (binomial se {se:.3f})"
    if generalised:
        return f"seed {seed}: the agent GENERALISED to the held-out tasks: {where}, more than 2 se above it"
    return (f"seed {seed}: the agent MEMORISED the training tasks and does not generalise: {where}, within 2 se of "
            "it; on held-out tasks it plays 'name -> op, submit', the blind script's level, so the held-out claims of "
            "agents-ch6 §6.7 (gain, submit rate, turns) are not made at this seed")


def valid_calls_floor(split: str, valid: float, calls: int) -> tuple[float, float]:
    """(lowest valid-call share that agrees with the book's on ``split``, se): the book's minus 3 binomial se of the
    difference, ``valid`` measured over ``calls`` calls (the format-cost sweep's qualification)."""
    book = BOOK_TRAINED[split]
    q, book_calls = book["valid_calls"], book["episodes"] * book["turns"]
    se = math.sqrt(valid * (1 - valid) / calls + q * (1 - q) / book_calls)
    return q - 3 * se, se


def measured(trained: dict) -> dict[str, dict[str, float]]:
    """What the §6.7 claims read, per split: base and trained pass rate, the trained agent's valid calls, submit
    rate, turns (mean and sd over episodes), episodes and calls."""
    found = {}
    for split in SPLITS:
        info, stats = trained["after"][split].info, episode_stats(trained["after"][split])
        found[split] = {"base_pass": episode_stats(trained["before"][split])["pass_rate"],
                        "pass": stats["pass_rate"], "valid_calls": stats["valid_calls"],
                        "submit_rate": stats["submit_rate"], "turns": stats["turns"],
                        "turns_sd": float(np.std([len(log.calls) for log in info], ddof=1)),
                        "episodes": len(info), "calls": sum(len(log.calls) for log in info)}
    return found


def book_claims(result: Result, found: dict[str, dict[str, float]], blind: float, generalised: bool) -> None:
    """The trained agent against agents-ch6 §6.7 (``found``: :func:`measured`): it learns the training tasks, keeps
    its call format on both splits and at least the scripted blind level on held-out ones, plays the book's submit
    rate and turns, and (where it ``generalised``) gains on held-out tasks and plays the book's held-out submit rate
    and turns. Statistical claims, judged together at the Result's family-wise rate."""
    held = found["heldout"]
    result.check_z(f"trained held-out pass at least the scripted blind level {blind:.2f}", held["pass"], blind,
                   math.sqrt(max(held["pass"] * (1 - held["pass"]), 1e-4) / held["episodes"]),
                   f"one-sided, binomial se of {held['episodes']} episodes; below it the agent lost even the blind "
                   "script's play", side="at_least")
    for split in SPLITS:
        got, book = found[split], BOOK_TRAINED[split]
        q, book_calls = book["valid_calls"], round(book["episodes"] * book["turns"])
        sd = VALID_SD_OVER_SEEDS[split]
        result.check_z(f"trained valid calls ({split}) no lower than the book's {q}", got["valid_calls"], q,
                       math.hypot(binomial_gap_se(got["valid_calls"], q, got["calls"], book_calls),
                                  sd * math.sqrt(SEED_FACTOR)),
                       f"one-sided: binomial se of the difference over {got['calls']} and {book_calls} calls and the "
                       f"sd over seeds 0, 7, 11 ({sd:.3f}, as for one more seed); no format cost fails it",
                       side="at_least")
        if split == "heldout" and not generalised:
            continue
        gain = book["pass"] - BOOK_BASE_PASS[split]
        result.check_z(f"trained minus base pass rate ({split}) at least half the book's {gain:+.3f}",
                       got["pass"] - got["base_pass"], gain / 2,
                       binomial_gap_se(got["pass"], got["base_pass"], got["episodes"], got["episodes"]),
                       "one-sided, binomial se of the difference of two rates; no learning fails it",
                       side="at_least")
        behaviour_claims(result, got, split)


def behaviour_claims(result: Result, got: dict[str, float], split: str) -> None:
    """Submit rate and turns near the book's on ``split`` (two-sided, carrying the measured sd over seeds)."""
    book, sd, n = BOOK_TRAINED[split], SD_OVER_SEEDS[split], got["episodes"]
    seeds = ("the sd over seeds 0, 7, 11 ({:.3f}, as for one more seed; Student's t, 2 dof) at the format cost "
             "fitted to bring submit rate and turns nearest the book's (docs/results/format_penalty.md)")
    p, q = got["submit_rate"], book["submit_rate"]
    se = math.sqrt(p * (1 - p) / n + q * (1 - q) / book["episodes"] + sd["submit_rate"] ** 2 * SEED_FACTOR)
    result.check_z(f"trained submit rate ({split}) near the book's {q}", p, q, se,
                   f"binomial over {n} and {book['episodes']} episodes and " + seeds.format(sd["submit_rate"]),
                   dof=SEED_DOF)
    se = math.sqrt(got["turns_sd"] ** 2 * (1 / n + 1 / book["episodes"]) + sd["turns"] ** 2 * SEED_FACTOR)
    result.check_z(f"trained turns per episode ({split}) near the book's {book['turns']}", got["turns"],
                   book["turns"], se, f"the episodes' sd {got['turns_sd']:.2f} over {n} and {book['episodes']} "
                                      "episodes and " + seeds.format(sd["turns"]), dof=SEED_DOF)
