"""Every ```python block of README.md and docs/*.md runs as written (blocks of one page share a namespace)."""

import pytest

from support import ROOT
from support.docs import PAGES, python_blocks

CHECKED_ELSEWHERE = {"bugfix.md"}
"""Pages whose blocks run in their own test, which also checks what they print (tests/test_bugfix_docs.py)."""


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p) and p.name not in CHECKED_ELSEWHERE],
                         ids=lambda p: p.name)
def test_snippets_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                      # snippets that write files write them here
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for i, block in enumerate(python_blocks(page)):
        exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)


def test_every_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    missing = [p.name for p in PAGES[1:] if f"docs/{p.name}" not in readme]
    assert not missing, f"README.md does not mention {missing}"
