"""Write docs/results/conform_trl_versions.json: `pglab conform trl` on the acceptance's dapo config, per TRL release.

Each release is installed without dependencies into its own folder under CACHE (default /tmp/conform-trl) and put
first on PYTHONPATH (beside the installed transformers, accelerate and datasets); "installed" is the .venv's TRL.
A release that does not import is recorded with the error's last line. Needs the package registry (to install the
releases), so it is a script whose output is committed, not a test.

Usage: .venv/bin/python scripts/conform_trl_versions.py [OUT_JSON] [CACHE]
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIG = "loss_type: dapo\nsteps_per_generation: 4\ngradient_accumulation_steps: 2\n"
"""The acceptance's config (GRPOConfig defaults otherwise: per_device_train_batch_size 8, num_generations 8)."""
VERSIONS = ["installed", "1.10.0", "1.9.0", "1.0.0", "0.29.1", "0.28.0", "0.24.0"]
"""The installed TRL; 1.10.0, the first release that rescales dapo's normaliser to one accumulation window; 1.9.0,
the last before it; 1.0.0 and 0.29.1, older ones with rollout_func; 0.28.0 (rollout_func with vLLM only) and
0.24.0 (no rollout_func), which do not import beside transformers 5."""


def install(version: str, cache: Path) -> dict[str, str]:
    """The environment that runs ``version``: PYTHONPATH with its folder first (installed there if missing)."""
    if version == "installed":
        return dict(os.environ)
    folder = cache / f"trl-{version}"
    if not (folder / "trl").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(folder),
                        f"trl=={version}"], check=True)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def conform(version: str, cache: Path, tmp: Path) -> dict:
    """One release's row: its exit status, verdict and checks, or the error that stopped it."""
    config, out = tmp / "dapo.yaml", tmp / f"{version}.json"
    config.write_text(CONFIG)
    done = subprocess.run([sys.executable, "-m", "pglab", "conform", "trl", "--config", str(config), "--json",
                           str(out)], env=install(version, cache), capture_output=True, text=True)
    if not out.exists():
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        return {"release": version, "exit": done.returncode, "error": lines[-1] if lines else "no output"}
    result = json.loads(out.read_text())
    return {"release": version, "version": result["version"], "exit": done.returncode,
            "verdict": result["verdict"],
            "checks": [{k: c[k] for k in ("name", "status", "factor")} for c in result["checks"]]}


def main(out: Path, cache: Path) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for version in VERSIONS:
            rows.append(conform(version, cache, Path(tmp)))
            print(version, rows[-1].get("verdict", rows[-1].get("error")), rows[-1]["exit"], flush=True)
    out.write_text(json.dumps({"config": CONFIG, "releases": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/results/conform_trl_versions.json"),
         Path(sys.argv[2]) if len(sys.argv) > 2 else Path("/tmp/conform-trl"))
