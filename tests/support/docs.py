"""The pages of the documentation and their ```python blocks."""

import re
from pathlib import Path

from support import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
"""README.md first, then every page of docs/."""
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: Path) -> list[str]:
    """The source of each ```python block of a page, in order."""
    return BLOCK.findall(page.read_text())
