"""pglab demo: the main job at --quick size writes its files, and --resume continues it to the same numbers."""

import json

import pytest

from pglab.cli import main
from pglab.models import TinyAgent


@pytest.mark.slow
def test_quick_demo_writes_everything_and_resumes(tmp_path, capsys):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    folder = tmp_path / "demo"
    for name in ("result.json", "train.jsonl", "learning_curve.png", "checkpoint.pt", "agent/tokenizer.json"):
        assert (folder / name).exists(), name
    out = capsys.readouterr().out
    assert "base agent, train" in out and "before_after" in out and "top_call_sequences" in out
    TinyAgent.from_pretrained(folder / "agent")
    first = json.loads((folder / "result.json").read_text())["metrics"]
    lines = (folder / "train.jsonl").read_text().splitlines()
    assert len(lines) == first["steps"] == 10 and "grad_norm" in json.loads(lines[-1])
    assert main(["demo", "--resume", str(folder)]) == 0
    again = json.loads((folder / "result.json").read_text())["metrics"]
    assert again["resumed_from"] == 10
    assert {k: v for k, v in again.items() if "seconds" not in k and k != "resumed_from"} == {
        k: v for k, v in first.items() if "seconds" not in k and k != "resumed_from"}
