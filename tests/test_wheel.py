"""pglab installed from a wheel, outside the source tree: the benchmarks and the catalogue ship with the package."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A wheel built from this checkout and unpacked into a temporary site folder (dependencies from this venv)."""
    tmp = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp / "dist"), str(ROOT)], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{build.stderr[-2000:]}")
    wheel = next((tmp / "dist").glob("pglab-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target",
                    str(tmp / "site"), str(wheel)], check=True, capture_output=True)
    return tmp / "site"


def run_installed(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "PGLAB_PROGRESS": "0"}
    return subprocess.run([sys.executable, "-m", "pglab", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_bench_runs_from_an_installed_wheel(installed, tmp_path):
    where = run_installed(installed, tmp_path, "--version")
    assert where.returncode == 0 and where.stdout.startswith("pglab ")
    code = "import pglab, sys; print(pglab.__file__)"
    origin = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(installed)}).stdout
    assert origin.startswith(str(installed)), origin          # the wheel's copy, not the checkout's
    listing = run_installed(installed, tmp_path, "bench", "--list")
    assert listing.returncode == 0 and {"bandit", "tabular", "bugfix"} <= {
        line.split()[0] for line in listing.stdout.splitlines()}
    bench = run_installed(installed, tmp_path, "bench", "tabular", "--quick", "--out", str(tmp_path / "runs"))
    assert bench.returncode in (0, 1), bench.stderr[-2000:]   # 1: a speed claim missed on a busy machine
    assert (tmp_path / "runs" / "bench-tabular" / "result.json").exists()
    assert run_installed(installed, tmp_path, "reproduce", "--list").returncode == 0
