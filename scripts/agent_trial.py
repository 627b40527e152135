"""agent_trial.py INCUMBENT CANDIDATE [--fresh ENV ...] [--out FILE]: a change of train-agent's defaults judged on
paired acceptance runs (scripts/agent_sweep.py --acceptance, the same environments and seeds on one machine). A side
may be several sweep folders joined by ``+`` (runs of more environments added to an earlier sweep).

Prints, over every (environment, seed) both folders ran: the mean trained held-out reward of each, their paired
difference with its standard error (the spread of the per-run differences over sqrt(runs)), the runs meeting the
acceptance goal (held-out reward up 0.3, or to 0.7 where a blind guess gets half), the same for the --fresh
environments alone, and each environment's held-out reward before -> after on both sides.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.tool_envs import meets_goal  # noqa: E402


def runs(folders: str) -> dict[tuple[str, int], dict]:
    """{(env, seed): row} of the sweep folders ``folders`` (joined by ``+``); a run in two folders is refused."""
    out: dict[tuple[str, int], dict] = {}
    for folder in folders.split("+"):
        for r in json.loads((Path(folder) / "runs.json").read_text())["rows"]:
            if (r["env"], r["seed"]) in out:
                raise SystemExit(f"{r['env']} at seed {r['seed']} is in two folders of {folders}; pass each run once")
            out[r["env"], r["seed"]] = r
    return out


def verdict(old: dict, new: dict, keys: list) -> list[str]:
    """The summary lines of the runs ``keys``."""
    gaps = [new[k]["trained_heldout"] - old[k]["trained_heldout"] for k in keys]
    gap = statistics.fmean(gaps)
    se = statistics.stdev(gaps) / len(gaps) ** 0.5 if len(gaps) > 1 else float("nan")

    def mean(side):
        return statistics.fmean(side[k]["trained_heldout"] for k in keys)

    def met(side):
        return sum(meets_goal(k[0], side[k]["base_heldout"], side[k]["trained_heldout"]) for k in keys)

    return [f"- runs: {len(keys)}; mean trained held-out reward: incumbent {mean(old):.3f}, candidate {mean(new):.3f}; "
            f"paired difference {gap:+.3f} (se {se:.3f}, {gap / se:+.1f} se)",
            f"- runs meeting the goal: incumbent {met(old)}, candidate {met(new)}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("incumbent", help="a sweep folder, or several joined by +")
    parser.add_argument("candidate", help="a sweep folder, or several joined by +")
    parser.add_argument("--fresh", nargs="*", default=[], help="environments written just before the trial")
    parser.add_argument("--out", type=Path, help="also write the summary here")
    args = parser.parse_args()
    old, new = runs(args.incumbent), runs(args.candidate)
    keys = sorted((k for k in old if k in new), key=lambda k: k[1])      # by seed, in the sweep's order
    lines = [f"`python scripts/agent_trial.py {' '.join(sys.argv[1:])}`", "", "All paired runs:", "",
             *verdict(old, new, keys)]
    fresh = [k for k in keys if k[0] in args.fresh]
    if fresh:
        lines += ["", f"The fresh environments ({', '.join(args.fresh)}):", "", *verdict(old, new, fresh)]
    lines += ["", "| environment | seed | incumbent | candidate |", "|---|---|---|---|"]
    lines += [f"| {env} | {seed} | {old[env, seed]['base_heldout']:.2f} -> {old[env, seed]['trained_heldout']:.2f} | "
              f"{new[env, seed]['base_heldout']:.2f} -> {new[env, seed]['trained_heldout']:.2f} |"
              for env, seed in keys]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
