"""agent_sweep.py OUT [--acceptance [--seeds S ...] [--envs E ...]]: train-agent's defaults for user environments,
swept and checked.

Without --acceptance: the sweep of the learning rate, the advantage and the format cost over the small tool
environments of tests/support/tool_envs.py (seed 0, short runs, one at a time). With --acceptance: the default
settings (AgentConfig's USER_ENV) on each environment and on those held out of the sweep (or on --envs only), at
seeds 0 and 1 (--model, --calls, --explore, --novelty, --is-correction, --steps, --episodes-per-step: every
run's setting). Each run is measured on the 8 held-out seeds x 8 episodes before and after training; OUT gets
runs.json (one row per run, with the command) and report.md.
"""

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from pglab.runtime.progress import track  # noqa: E402
from pglab.sampling.text_episodes import CALLS  # noqa: E402
from pglab.trainers.agent_config import USER_ENV, AgentConfig  # noqa: E402
from pglab.trainers.hf_agent import train_agent  # noqa: E402
from support.tool_envs import ENVS, HELD_OUT_ENVS  # noqa: E402

GRID = {"learning_rate": (1e-3, 3e-3), "advantage": ("reinforce", "rloo"), "format_penalty": (0.0, 0.1)}
"""The swept settings (the rest at USER_ENV's)."""
CHOSEN = ("model", "calls", "explore", "novelty", "is_correction", "steps", "episodes_per_step")
"""The settings an acceptance run may be given (every run the same)."""
SWEEP_SCHEDULE = {"steps": 30, "episodes_per_step": 32}
"""The sweep's short runs."""


def run_one(env: str, settings: dict, seed: int, out: Path) -> dict:
    """One train-agent run -> its row: the settings, held-out and training reward before and after, seconds."""
    cfg = AgentConfig(env=f"support.tool_envs:{env}", seed=seed, **settings)
    started = time.perf_counter()
    name = "-".join([env, f"seed{seed}", *(f"{k}{Path(str(v)).name}" for k, v in sorted(settings.items()))])
    trained = train_agent(cfg, out / name, progress=False)
    reward = {f"{agent}_{split}": round(float(batches[split].rewards.mean()), 4)
              for agent, batches in (("base", trained["before"]), ("trained", trained["after"]))
              for split in ("train", "heldout")}
    shown = (*USER_ENV, "calls", "is_correction", "model")
    return {"env": env, "seed": seed, **{k: getattr(trained["config"], k) for k in shown}, **reward,
            "heldout_gain": round(reward["trained_heldout"] - reward["base_heldout"], 4),
            "seconds": round(time.perf_counter() - started, 1)}


def plan(acceptance: bool, seeds: list[int], envs: list[str] | None = None) -> list[tuple[str, dict, int]]:
    """(env, settings, seed) of every run."""
    if acceptance:
        return [(env, {}, seed) for seed in seeds for env in envs or {**ENVS, **HELD_OUT_ENVS}]
    return [(env, {**SWEEP_SCHEDULE, **dict(zip(GRID, values))}, 0)
            for values in itertools.product(*GRID.values()) for env in ENVS]


def by_settings(rows: list[dict]) -> list[str]:
    """The sweep's verdict: per setting of GRID, the mean and the lowest held-out gain over the environments, best
    mean first (the defaults are the best mean's)."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in GRID), []).append(r["heldout_gain"])
    ranked = sorted(groups.items(), key=lambda kv: -sum(kv[1]) / len(kv[1]))
    lines = ["", "Held-out gain by setting, over the environments (best mean first):", "",
             "| " + " | ".join(GRID) + " | environments | mean gain | lowest gain |", "|" + "---|" * (len(GRID) + 3)]
    return lines + [f"| {' | '.join(str(v) for v in key)} | {len(g)} | {sum(g) / len(g):.3f} | {min(g):.3f} |"
                    for key, g in ranked]


def markdown(rows: list[dict], command: str, acceptance: bool = False) -> str:
    keys = list(rows[0])
    lines = [f"`{command}` (one run at a time on a shared 2-core machine)", "", "| " + " | ".join(keys) + " |",
             "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines + ([] if acceptance else by_settings(rows))) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--acceptance", action="store_true")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="the acceptance runs' seeds")
    parser.add_argument("--envs", nargs="+", choices=sorted({**ENVS, **HELD_OUT_ENVS}),
                        help="the acceptance runs' environments (default: all)")
    parser.add_argument("--model", help="every run's --model, an agent folder (default: the embedded tool-use agent)")
    parser.add_argument("--calls", choices=CALLS, help="how every run samples a turn (default: train-agent's)")
    parser.add_argument("--explore", type=float, help="every run's --explore (default: train-agent's)")
    parser.add_argument("--novelty", type=float, help="every run's --novelty (default: train-agent's)")
    parser.add_argument("--is-correction", help="every run's --is-correction (default: train-agent's)")
    for flag in ("--steps", "--episodes-per-step"):
        parser.add_argument(flag, type=int, help=f"every run's {flag} (default: train-agent's)")
    args = parser.parse_args()
    if args.envs and not args.acceptance:
        parser.error("--envs goes with --acceptance; the sweep runs every environment of ENVS")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python scripts/agent_sweep.py " + " ".join(sys.argv[1:])
    rows = []
    for env, settings, seed in track(plan(args.acceptance, args.seeds, args.envs), "train-agent runs"):
        chosen = {k: getattr(args, k) for k in CHOSEN if getattr(args, k) is not None}
        rows.append(run_one(env, {**settings, **chosen}, seed, out / "runs"))
        (out / "runs.json").write_text(json.dumps({"command": command, "rows": rows}, indent=1))
        (out / "report.md").write_text(markdown(rows, command, args.acceptance))


if __name__ == "__main__":
    main()
