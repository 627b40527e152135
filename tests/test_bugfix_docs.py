"""docs/bugfix.md: every ```python block runs, in order, in one namespace (the examples are tested)."""

import subprocess
import sys

from support import ROOT
from support.docs import python_blocks

DOC = ROOT / "docs" / "bugfix.md"


def test_the_python_examples_of_docs_bugfix_run(capsys):
    blocks = python_blocks(DOC)
    assert len(blocks) >= 4
    namespace = {"__name__": "docs_bugfix"}
    for k, block in enumerate(blocks):
        exec(compile(block, f"docs/bugfix.md, python block {k + 1}", "exec"), namespace)
    assert "reward 1 (pass)" in capsys.readouterr().out


def test_import_pglab_registers_the_env_without_importing_torch_or_the_env():
    code = ("import sys, pglab\nfrom gymnasium.envs.registration import registry\n"
            "assert 'pglab/BugFix-v0' in registry\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'pglab.envs'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
