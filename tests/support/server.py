"""`pglab serve` in a subprocess, for the web tests."""

import os
import subprocess
import sys
import time

from support import ROOT

SRC = ROOT / "src"


def start_server(port: int) -> tuple[subprocess.Popen, float]:
    """`pglab serve` in a subprocess; -> (process, seconds until /api/health answered)."""
    import httpx

    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pglab", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    while time.perf_counter() - began < 30:
        if proc.poll() is not None:
            raise RuntimeError(f"pglab serve exited: {proc.stdout.read().decode()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=0.5).status_code == 200:
                return proc, time.perf_counter() - began
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("pglab serve did not answer within 30 s")
