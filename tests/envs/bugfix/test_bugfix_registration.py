"""import pglab registers pglab/BugFix-v0 with gymnasium, lazily: neither torch nor the env is imported."""

import subprocess
import sys

import pytest


@pytest.mark.integration
def test_import_pglab_registers_the_env_without_importing_torch_or_the_env():
    code = ("import sys, pglab\nfrom gymnasium.envs.registration import registry\n"
            "assert 'pglab/BugFix-v0' in registry\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'pglab.envs.bugfix'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
