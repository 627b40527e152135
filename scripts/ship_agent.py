"""ship_agent.py KIND SIZE [--from DIR]: build the embedded agent KIND (default | tool) of SIZE (full | quick) from
its recipe on this machine (or take this machine's build, cached, or the build in DIR) and copy it into
src/pglab/data/agents/KIND-SIZE, the folder pglab loads instead of building (pglab.trainers.hf_agent.SHIPPED).

Its agent.json gets the whole recipe (the tool-use corpus's version with it) and where it was built (torch, CPU),
since a build's floats differ between CPUs. Run it after every change of a recipe or of the tool-use corpus: until
then pglab builds the new recipe on each machine, and the test of the shipped agents fails.
"""

import argparse
import json
import platform
import shutil
from pathlib import Path

import torch

from pglab.trainers.hf_agent import SHIPPED, _build_into, agent_dir, agent_recipe

FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
"""What a shipped agent holds beside agent.json."""


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else the platform's processor string."""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=("default", "tool"))
    parser.add_argument("size", choices=("full", "quick"))
    parser.add_argument("--from", dest="source", type=Path, help="a build of the current recipe to ship")
    args = parser.parse_args()
    built = args.source or agent_dir(args.kind, args.size)
    if args.source is None and not (built / "agent.json").is_file():
        _build_into(built, args.kind, args.size, progress=True)
    target = SHIPPED / f"{args.kind}-{args.size}"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(built / name, target / name)
    stats = json.loads((built / "agent.json").read_text())
    recipe = agent_recipe(args.kind, args.size)
    if stats["recipe"] != {k: v for k, v in recipe.items() if k != "corpus_version"}:
        raise SystemExit(f"{built} was built from another recipe than {args.kind} {args.size}'s; pass a build of "
                         "the current one, or none to build it here")
    stats.update(recipe=recipe, torch=torch.__version__, cpu=cpu_name())
    (target / "agent.json").write_text(json.dumps(stats, indent=1) + "\n")
    print(f"shipped {built} -> {target}")


if __name__ == "__main__":
    main()
