"""The seed sweep: each experiment at many fresh first seeds, and the share of seeds at which every claim held.

Each run is ``pglab reproduce NAME --first-seed S`` in a worker process (one torch thread), recorded in
``OUT/NAME.json`` as soon as it finishes: whether all evaluated claims held, each claim's value, p-value and
status, the wall seconds and the config. A stopped sweep keeps what finished, and a rerun with the same size skips
the seeds already done. An experiment without a ``first_seed`` setting runs with each of its RNG seed settings
(``seed``, ``*_seed``) shifted by the first seed; one with none at all is seed-free (its claims are the same at every
seed): it runs once. ``--summary DIR`` rebuilds ``DIR/README.md`` from every JSON in DIR, ``--timing DIR [DIR ...]
[--out FOLDER]`` writes ``timing.md`` (each experiment's median wall time and what 20 seeds would take).

    nice -n 5 .venv/bin/python scripts/seed_sweep.py bandit-race cartpole --first-seeds 10000:29000:1000 \\
        --out docs/results/seed-sweep [--quick] [--set KEY=VALUE ...] [--workers N] [--backend serial|process]
    .venv/bin/python scripts/seed_sweep.py --summary docs/results/seed-sweep

On a checkout others edit, sweep a commit: ``git worktree add /tmp/wt HEAD`` and ``PYTHONPATH=/tmp/wt/src
.venv/bin/python /tmp/wt/scripts/seed_sweep.py NAME ... --out docs/results/seed-sweep`` (each run records the
commit of the pglab it imported, and the sweep whether that checkout had uncommitted edits).

EXPERIMENT is a name from ``pglab reproduce --list``, or an importable module with a ``Config`` and a ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections import Counter as Tally
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pglab.cli import parse_sets
from pglab.experiments.registry import CATALOGUE, Experiment, get_experiment
from pglab.runtime.options import SettingsError
from pglab.runtime.progress import Counter
from pglab.runtime.threads import single_torch_thread

REPO = Path(__file__).resolve().parent.parent
NUMBERS = REPO / "docs" / "numbers.json"
SEEDS_PLANNED = 20
"""The sweep's size (first seeds 10000, 11000, ..., 29000), for the timing table's projection."""
LOWER_BOUND_LEVEL = 0.95
"""Confidence of the one-sided exact (Clopper-Pearson) lower bound on the share of seeds where all claims hold."""


@dataclass(frozen=True)
class ModuleExperiment(Experiment):
    """An experiment given as an importable module (a test's fake one) rather than a catalogue name."""

    def module(self) -> ModuleType:
        return importlib.import_module(self.module_name)


def experiment_for(spec: str) -> Experiment:
    """A catalogue name or an importable module path -> the Experiment (SettingsError naming both otherwise)."""
    if spec in CATALOGUE or "." not in spec:
        return get_experiment(spec)
    try:
        module = importlib.import_module(spec)
    except ImportError:
        raise SettingsError(f"{spec!r} is neither an experiment of `pglab reproduce --list` nor an importable "
                            "module") from None
    if not hasattr(module, "Config") or not hasattr(module, "run"):
        raise SettingsError(f"module {spec!r} is no experiment: it needs a Config dataclass and run(config, result)")
    return ModuleExperiment(spec, spec, module.__doc__ or "")


def parse_first_seeds(text: str) -> list[int]:
    """``START:STOP:STEP`` (STOP included: 10000:29000:1000 is 20 seeds) or a comma list ``0,100`` -> the seeds."""
    try:
        if ":" in text:
            start, stop, step = (int(part) for part in text.split(":"))
            if step <= 0 or stop < start:
                raise ValueError
            seeds = list(range(start, stop + 1, step))
        else:
            seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise SettingsError(f"--first-seeds takes START:STOP:STEP (e.g. 10000:29000:1000) or a list 0,100; "
                            f"got {text!r}") from None
    if min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise SettingsError(f"--first-seeds must be distinct and >= 0, got {text!r}")
    return seeds


def seed_fields(exp: Experiment) -> list[str]:
    """The settings a first seed moves: ``first_seed`` where there is one (as ``pglab reproduce --first-seed``),
    else every RNG seed setting (``seed``, ``*_seed``); none: a seed-free experiment."""
    fields = exp.fields()
    if "first_seed" in fields:
        return ["first_seed"]
    return [name for name, kind in fields.items() if kind is int and (name == "seed" or name.endswith("_seed"))]


def seed_settings(exp: Experiment, seed: int | None, quick: bool, overrides: dict[str, Any]) -> dict[str, Any]:
    """The settings of the run at first seed ``seed``: first_seed = seed, or, for an experiment without one, each
    RNG seed setting shifted by ``seed`` from its value (they stay distinct); {} for a seed-free run (None)."""
    if seed is None:
        return {}
    names = seed_fields(exp)
    if names == ["first_seed"]:
        return {"first_seed": seed}
    config = exp.config(quick=quick, **overrides)
    return {name: getattr(config, name) + seed for name in names}


def run_one(spec: str, seed: int | None, quick: bool, overrides: dict[str, Any]) -> dict[str, Any]:
    """One run of ``spec`` at first seed ``seed`` (None: a seed-free experiment) -> its record. An exception in
    the experiment is recorded as a failed run (its last line in ``error``)."""
    exp = experiment_for(spec)
    seeds = seed_settings(exp, seed, quick, overrides)
    started = time.perf_counter()
    try:
        with single_torch_thread():
            result = exp.run(quick=quick, command=command_line(spec, quick, {**overrides, **seeds}),
                             **overrides, **seeds)
    except Exception as error:  # noqa: BLE001 - a crash at one seed is that seed's failure, recorded
        lines = traceback.format_exception_only(type(error), error)
        return {"seed": seed, "passed": False, "status": "crashed", "error": lines[-1].strip(),
                "wall_seconds": round(time.perf_counter() - started, 2)}
    claims = [{"claim": c.claim, "value": c.value, "expected": c.expected, "p_value": c.p_value,
               "status": c.status} for c in result.checks]
    return {"seed": seed, "passed": result.passed, "status": result.status,
            "wall_seconds": round(result.metrics.get("wall seconds", time.perf_counter() - started), 2),
            "claims": claims, "family": result.family, "warnings": result.warnings,
            "commit": result.provenance.get("commit"), "time_utc": result.provenance.get("time_utc"),
            "config": result.config}


def command_line(spec: str, quick: bool, settings: dict[str, Any]) -> str:
    """The equivalent ``pglab reproduce`` command, for the run's provenance."""
    words = ["pglab", "reproduce", spec] + (["--quick"] if quick else [])
    words += [f"--first-seed {value}" if key == "first_seed" else f"--set {key}={value}"
              for key, value in settings.items()]
    return " ".join(words)


def source_dirty() -> bool | None:
    """Whether the pglab this sweep imports differs from its checkout's commit (uncommitted edits ran too); None
    outside a checkout."""
    import pglab

    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=Path(pglab.__file__).parent,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def load_sweep(path: Path, quick: bool, overrides: dict[str, Any]) -> dict[str, Any] | None:
    """The sweep already in ``path`` (None: none yet); SettingsError when it ran at another size."""
    if not path.exists():
        return None
    sweep = json.loads(path.read_text())
    if sweep.get("quick") != quick or sweep.get("overrides") != overrides:
        raise SettingsError(f"{path} holds a sweep at another size (quick={sweep.get('quick')}, --set "
                            f"{sweep.get('overrides')}); pass another --out, or the same --quick and --set")
    return sweep


def save_sweep(path: Path, sweep: dict[str, Any]) -> None:
    """Write the sweep (its runs in seed order) through a temporary file, so a killed sweep leaves a whole file;
    runs another sweep of the same size wrote there meanwhile are kept."""
    on_disk = load_sweep(path, sweep["quick"], sweep["overrides"])
    done = {run["seed"] for run in sweep["runs"]}
    sweep["runs"] += [run for run in (on_disk or {}).get("runs", []) if run["seed"] not in done]
    sweep["runs"].sort(key=lambda run: -1 if run["seed"] is None else run["seed"])
    staging = path.with_suffix(f".json.{os.getpid()}.tmp")
    staging.write_text(json.dumps(sweep, indent=1, default=str) + "\n")
    os.replace(staging, path)


def completed(jobs: list[tuple], backend: str, workers: int) -> Iterator[dict[str, Any]]:
    """Each job's record (``run_one(*job)``) as it finishes: in this process, or in a spawned pool of workers."""
    if backend == "serial":
        for job in jobs:
            yield run_one(*job)
        return
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        for future in as_completed([pool.submit(run_one, *job) for job in jobs]):
            yield future.result()


def checked_overrides(spec: str, quick: bool, sets: dict[str, str]) -> dict[str, Any]:
    """``--set`` texts -> the experiment's typed overrides, its config checked (SettingsError before any run)."""
    exp = experiment_for(spec)
    overrides = {key: exp.parse(key, text) for key, text in sets.items()}
    moved = sorted(set(overrides) & set(seed_fields(exp)))
    if moved:
        raise SettingsError(f"the sweep sets {', '.join(moved)} itself from --first-seeds; drop them from --set")
    exp.config(quick=quick, **overrides)
    return overrides


def sweep_experiment(spec: str, first_seeds: list[int], out: Path, *, quick: bool = False,
                     sets: dict[str, str] | None = None, backend: str = "process", workers: int = 1) -> dict:
    """Run ``spec`` at every first seed not yet in ``out/SPEC.json``, recording each run as it finishes."""
    exp = experiment_for(spec)
    overrides = checked_overrides(spec, quick, sets or {})
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{spec}.json"
    moved = seed_fields(exp)
    sweep = load_sweep(path, quick, overrides) or {
        "experiment": spec, "quick": quick, "overrides": overrides, "seed_free": not moved, "seed_settings": moved,
        "source_dirty_at_start": source_dirty(), "runs": []}
    seeds = first_seeds if moved else [None]
    done = {run["seed"] for run in sweep["runs"]}
    todo = [seed for seed in seeds if seed not in done]
    if not moved:
        print(f"{spec}: seed-free (no RNG seed setting): one run", flush=True)
    elif moved != ["first_seed"]:
        print(f"{spec}: no first_seed setting; first seed S runs with {', '.join(moved)} each shifted by S",
              flush=True)
    with Counter(spec, total=len(seeds), completed=len(seeds) - len(todo)) as bar:
        for record in completed([(spec, seed, quick, overrides) for seed in todo], backend, workers):
            sweep["runs"].append(record)
            save_sweep(path, sweep)
            bar.advance(status=f"seed {record['seed']}: {record['status']}")
    return sweep


def clopper_pearson_lower(held: int, runs: int, level: float = LOWER_BOUND_LEVEL) -> float:
    """The exact one-sided lower confidence bound on a binomial share: the p with P(X >= held | runs, p) = 1 -
    level (0 when held = 0), by bisection on the binomial tail."""
    if held == 0:
        return 0.0

    def tail(p: float) -> float:
        return sum(math.comb(runs, k) * p ** k * (1 - p) ** (runs - k) for k in range(held, runs + 1))

    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if tail(middle) < 1 - level else (low, middle)
    return low


def summarise(sweep: dict[str, Any]) -> dict[str, Any]:
    """One sweep -> runs, runs where all claims held, their share with its binomial se and exact lower bound, the
    failure count of each claim that failed somewhere, crashes, the median wall seconds, commits and size."""
    runs = sweep["runs"]
    held = sum(bool(run["passed"]) for run in runs)
    share = held / len(runs) if runs else math.nan
    failures = Tally(c["claim"] for run in runs for c in run.get("claims", []) if c["status"] == "NO")
    return {
        "experiment": sweep["experiment"], "runs": len(runs), "held": held, "share": share,
        "se": math.sqrt(share * (1 - share) / len(runs)) if runs else math.nan,
        "lower": clopper_pearson_lower(held, len(runs)) if runs else math.nan,
        "failures": dict(failures.most_common()), "crashes": sum(run["status"] == "crashed" for run in runs),
        "wall_seconds": statistics.median(run["wall_seconds"] for run in runs) if runs else math.nan,
        "seeds": [run["seed"] for run in runs], "seed_free": sweep["seed_free"],
        "seed_settings": sweep["seed_settings"],
        "size": size_words(sweep), "commits": sorted({(run.get("commit") or "?")[:7] for run in runs}),
        "dirty": sweep.get("source_dirty_at_start"),
    }


def size_words(sweep: dict[str, Any]) -> str:
    """The size a sweep ran at, in words: full, or QUICK, and any --set."""
    words = "QUICK" if sweep["quick"] else "full"
    return words + "".join(f", {key}={value}" for key, value in sweep["overrides"].items())


def load_all(*folders: Path) -> list[dict[str, Any]]:
    """Every sweep JSON in ``folders``, by experiment name; an experiment in several from the first."""
    sweeps: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            sweep = json.loads(path.read_text())
            sweeps.setdefault(sweep["experiment"], sweep)
    return [sweeps[name] for name in sorted(sweeps)]


def failure_words(row: dict[str, Any]) -> str:
    """The claims that failed, each with its count of runs, for a markdown cell."""
    parts = [f"{claim.replace('|', '&#124;')} ({count})" for claim, count in row["failures"].items()]
    parts += [f"crashed ({row['crashes']})"] if row["crashes"] else []
    return "; ".join(parts) or "none"


def seed_words(row: dict[str, Any]) -> str:
    if row["seed_free"]:
        return "seed-free"
    seeds, moved = row["seeds"], row["seed_settings"]
    shifted = "" if moved == ["first_seed"] else f" (as {' + S, '.join(moved)} + S)"
    return f"{seeds[0]}-{seeds[-1]}{shifted}" if seeds else ""


def summary_table(sweeps: list[dict[str, Any]]) -> list[str]:
    """The sweeps as markdown table lines."""
    lines = ["| experiment | size | first seeds | runs | all claims held | share (se) | 95% lower bound | "
             "claims that failed (runs) | median wall s | commit |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in map(summarise, sweeps):
        dirty = " + uncommitted src" if row["dirty"] else ""
        lines.append(f"| {row['experiment']} | {row['size']} | {seed_words(row)} | {row['runs']} | {row['held']} | "
                     f"{row['share']:.2f} ({row['se']:.2f}) | {row['lower']:.2f} | {failure_words(row)} | "
                     f"{row['wall_seconds']:.1f} | {', '.join(row['commits'])}{dirty} |")
    return lines


def readme(sweeps: list[dict[str, Any]]) -> str:
    """docs/results/seed-sweep/README.md: what the sweep is and the table over every JSON present."""
    return "\n".join([
        "# The seed sweep: each experiment at fresh first seeds", "",
        "Generated by `scripts/seed_sweep.py --summary` from the JSON files in this folder (do not edit by hand; "
        "one file per experiment, written run by run by `scripts/seed_sweep.py NAME --first-seeds "
        "10000:29000:1000 --out docs/results/seed-sweep`). Each run is `pglab reproduce NAME --first-seed S` at the "
        "size in the table (full: the experiment's defaults; QUICK or `--set`: a reduction that fits the shared "
        "2-core machine), in a worker process with one torch thread. An experiment without a first_seed setting "
        "runs with each of its RNG seed settings shifted by S (the first seeds column names them); one with no seed "
        "setting at all is seed-free and runs once. A run holds when every evaluated claim held (statistical claims "
        "judged together by Holm's step-down at 1%, so an honest experiment holds at a seed with probability at "
        "least 0.99; exact claims hold at every seed or at none). share = runs held / runs, se = sqrt(share "
        f"(1 - share) / runs); the lower bound is the exact one-sided {LOWER_BOUND_LEVEL:.0%} (Clopper-Pearson) "
        "bound on the share: 20 of 20 gives 0.86. commit: the commit each run reported, `+ uncommitted src` when "
        "src/ had uncommitted edits as the sweep started.", "",
        *summary_table(sweeps), "", *notes(sweeps), not_swept(sweeps), ""])


def notes(sweeps: list[dict[str, Any]]) -> list[str]:
    """The ``note`` a sweep's owner wrote into its JSON (how it ran, what is missing), one item each."""
    items = [f"- {sweep['experiment']}: {sweep['note']}" for sweep in sweeps if sweep.get("note")]
    return ["Notes from the sweeps:", "", *items, ""] if items else []


def not_swept(sweeps: list[dict[str, Any]]) -> str:
    """The catalogue's experiments with no sweep here yet, in one line."""
    missing = sorted(set(CATALOGUE) - {sweep["experiment"] for sweep in sweeps})
    return f"Not swept yet: {', '.join(missing)}." if missing else "Every experiment of the catalogue is swept."


def timing(sweeps: list[dict[str, Any]]) -> str:
    """docs/results/seed-sweep/timing.md: each experiment's wall time at one seed and what the sweep would take."""
    lines = ["# Wall time of each experiment", "",
             "Generated by `scripts/seed_sweep.py --timing DIR [DIR ...]` from one run per experiment at first seed "
             "10000 (`scripts/seed_sweep.py NAME --first-seeds 10000 --out DIR`, `nice -n 5`, one at a time, one "
             "torch thread), or from its owner's sweep where one had started (the median over its runs), on the "
             "shared 2-core machine while others worked on it (load average 8-12): a guide to what fits, not a "
             f"benchmark. {SEEDS_PLANNED} seeds: the time of {SEEDS_PLANNED} such runs on one worker.", "",
             f"| experiment | size | runs | median wall s | {SEEDS_PLANNED} seeds, min | runs where all claims held | "
             "commit |",
             "|---|---|---|---|---|---|---|"]
    for row in sorted(map(summarise, sweeps), key=lambda r: r["wall_seconds"]):
        projected = row["wall_seconds"] * (1 if row["seed_free"] else SEEDS_PLANNED) / 60
        held = f"{row['held']} of {row['runs']}" + ("" if row["held"] == row["runs"] else f": {failure_words(row)}")
        lines.append(f"| {row['experiment']} | {row['size']} | {row['runs']} | {row['wall_seconds']:.1f} | "
                     f"{projected:.1f} | {held} | {', '.join(row['commits'])} |")
    quoted = {key.split(":")[0]: value for key, value in json.loads(NUMBERS.read_text())["numbers"].items()
              if key.endswith(":wall seconds") and key.split(":")[0] not in {s["experiment"] for s in sweeps}}
    if quoted:
        lines += ["", "Not run here; full size at first seed 0, from docs/numbers.json: " + ", ".join(
            f"{name} {seconds:.0f} s ({seconds * SEEDS_PLANNED / 60:.0f} min for {SEEDS_PLANNED} seeds)"
            for name, seconds in sorted(quoted.items(), key=lambda item: item[1])) + "."]
    return "\n".join(lines + [""])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/seed_sweep.py", description=__doc__.split("\n")[0])
    p.add_argument("experiments", nargs="*", metavar="EXPERIMENT", help="names from `pglab reproduce --list`")
    p.add_argument("--first-seeds", default="10000:29000:1000", help="START:STOP:STEP (STOP included) or 0,100")
    p.add_argument("--out", type=Path, help="folder for EXPERIMENT.json")
    p.add_argument("--quick", action="store_true", help="the experiments' QUICK size")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field (every experiment)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1: the machine is shared)")
    p.add_argument("--backend", choices=["process", "serial"], default="process",
                   help="process: each run in a spawned worker (default); serial: in this process")
    p.add_argument("--summary", type=Path, metavar="DIR", help="rebuild DIR/README.md from DIR/*.json and stop")
    p.add_argument("--timing", type=Path, nargs="+", metavar="DIR", help="write timing.md (in --out, else the first "
                   "DIR) from DIR/*.json (an experiment from its first DIR) and stop")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for folders, name, render in ((args.summary and [args.summary], "README.md", readme),
                                  (args.timing, "timing.md", timing)):
        if folders:
            target = (args.out or folders[0]) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(render(load_all(*folders)))
            print(f"wrote {target}")
            return 0
    if not args.experiments or args.out is None:
        raise SettingsError("name at least one experiment and --out DIR (or pass --summary DIR)")
    if args.workers < 1:
        raise SettingsError(f"--workers must be >= 1, got {args.workers}")
    seeds, sets = parse_first_seeds(args.first_seeds), parse_sets(args.set)
    for spec in args.experiments:
        checked_overrides(spec, args.quick, sets)
    sweeps = [sweep_experiment(spec, seeds, args.out, quick=args.quick, sets=sets, backend=args.backend,
                               workers=args.workers) for spec in args.experiments]
    print("\n".join(summary_table(sweeps)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
