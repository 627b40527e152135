"""Regenerate docs/numbers.json from experiment runs, then every number README.md and docs/*.md quote from it.

A measured number in the docs is followed by a marker naming its key, experiment:metric (a metric of
that experiment's result.json)::

    the median ratio is 0.903<!-- n tinyagent-baselines:median mean reward / none -->

The marker is invisible once rendered. The number is written with the digits the text wants (and a
``%`` after it for a share shown in percent, a ``+`` for a signed change); rewriting keeps them.

    python scripts/docs_numbers.py --runs runs --run   # run what is missing, write the file, rewrite the docs
    python scripts/docs_numbers.py --check             # exit 1 if a quoted number is not the file's

``make docs-numbers`` runs the first form. tests/test_docs_numbers.py checks every marker in CI.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBERS = ROOT / "docs" / "numbers.json"
EXPERIMENTS = ("tinyagent-reinforce", "tinyagent-masking", "tinyagent-baselines", "tinyagent-reward-to-go",
               "aggregation", "design-problems", "lm-kl", "lm-beta-optimum", "bandit-lab",
               "cartpole", "hf-agent", "bugfix-scripted", "bandit-race", "bandit-training", "bandit-variance",
               "tokenworld-gae", "tokenworld-training", "repair-mdp-gradient", "loo-enumeration", "frozenlake-static",
               "frozenlake-race")
"""The experiments the docs quote, run at full size with their default seeds (about 25 minutes on 2 idle cores)."""
COMMITTED = ("bench-lm-vs-trl-run1", "bench-lm-vs-trl-run2", "bench-lm-vs-trl-run3", "bench-lm-vs-trl-malloc",
             "bench-bugfix", "bench-bugfix-8f28683", "bench-bandit", "bench-tabular", "bench-agent-vs-trl")
"""Results the docs quote from their committed folder, docs/results/NAME/result.json (benchmarks: rerun by hand on an
idle machine, never by this script)."""
MARK = re.compile(r"(?<![\w.>])(?P<number>[-+]?\d[\d,]*(?:\.\d+)?)(?P<percent>%?)<!-- n (?P<key>[^>]+?) -->")
"""A marked number; a sign right after another marker is the dash of a range (0.59-0.85), not the number's."""


def documents(root: Path = ROOT) -> list[Path]:
    """README.md and every docs/*.md: the files whose quoted numbers come from docs/numbers.json."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def cpu_name() -> str:
    """The CPU model (float results, and so the trained agents, differ between CPUs)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(runs: Path, run_missing: bool) -> tuple[dict[str, float], dict[str, dict]]:
    """(experiment:metric -> value for every numeric metric of runs/NAME/result.json, NAME -> its provenance)."""
    paths = {name: runs / name / "result.json" for name in EXPERIMENTS}
    for name, path in paths.items():
        if not path.exists():
            if not run_missing:
                raise SystemExit(f"{path} is missing: run `pglab reproduce {name} --out {path.parent}` or pass --run")
            from pglab.experiments import run_experiment
            from pglab.reporting.report import write_report

            write_report(run_experiment(name), path.parent)
    paths |= {name: ROOT / "docs" / "results" / name / "result.json" for name in COMMITTED}
    numbers, sources = {}, {}
    for name, path in paths.items():
        result = json.loads(path.read_text())
        sources[name] = {k: result["provenance"].get(k) for k in ("commit", "time_utc", "command")}
        numbers.update({f"{name}:{k}": float(v) for k, v in result["metrics"].items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return numbers, sources


def render(value: float, shown: str, percent: bool) -> str:
    """``value`` written like ``shown``: the same decimals, thousands separators, a leading ``+``, percent (x 100)."""
    digits = len(shown.split(".")[1]) if "." in shown else 0
    spec = ("+" if shown.startswith("+") else "") + ("," if "," in shown else "") + f".{digits}f"
    return format(100 * value if percent else value, spec)


def rewrite(text: str, numbers: dict[str, float]) -> tuple[str, list[str]]:
    """(text with every marked number taken from ``numbers``, the keys it marks that ``numbers`` lacks)."""
    missing = []

    def one(match: re.Match) -> str:
        key = match["key"].strip()
        if key not in numbers:
            missing.append(key)
            return match[0]
        return f"{render(numbers[key], match['number'], bool(match['percent']))}{match['percent']}<!-- n {key} -->"

    return MARK.sub(one, text), missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs", help="folder of NAME/result.json (default runs)")
    parser.add_argument("--run", action="store_true", help="run the experiments that have no result.json yet")
    parser.add_argument("--check", action="store_true", help="only check the docs against docs/numbers.json")
    args = parser.parse_args(argv)
    if args.check:
        numbers = json.loads(NUMBERS.read_text())["numbers"]
    else:
        numbers, sources = collect(args.runs, args.run)
        NUMBERS.write_text(json.dumps({"provenance": {"runs": sources,
            "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "cpu": cpu_name(),
            "platform": platform.platform(), "experiments": list(EXPERIMENTS), "committed": list(COMMITTED),
            "note": "float results differ between CPUs, and so do cloned and trained agents: the docs quote medians "
                    "and ranges over seeds"}, "numbers": numbers}, indent=1, sort_keys=True) + "\n")
    stale = []
    for path in documents():
        text = path.read_text()
        new, missing = rewrite(text, numbers)
        stale += [f"{path.name}: no number {key!r} in docs/numbers.json" for key in missing]
        if new != text:
            if args.check:
                stale.append(f"{path.name}: quoted numbers differ from docs/numbers.json")
            else:
                path.write_text(new)
    for line in stale:
        print(line, file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
