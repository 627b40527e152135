"""Helpers the tests share: reference implementations, process and server set-up, the QUICK experiment runs.

Nothing here is a test; test modules import from here (``tests`` is on pytest's ``pythonpath``) and never from
one another.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (README.md, docs/, src/)."""
