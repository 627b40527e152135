"""pglab demo: the main job at --quick size writes its files, and --resume continues it to the same numbers."""

import json

import pytest

from pglab.cli import main
from pglab.models import TinyAgent
from support import ROOT


@pytest.mark.experiment
def test_quick_demo_writes_everything_and_resumes(tmp_path, capsys):
    folder = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(folder)]) == 0
    for name in ("result.json", "train.jsonl", "learning_curve.png", "checkpoint.pt", "agent/tokenizer.json"):
        assert (folder / name).exists(), name
    out = capsys.readouterr().out
    assert "base agent, train" in out and "before_after" in out and "top_call_sequences" in out
    assert "GENERALISED" in out or "MEMORISED" in out                   # the run says which, at any size
    TinyAgent.from_pretrained(folder / "agent")
    first = json.loads((folder / "result.json").read_text())["metrics"]
    lines = (folder / "train.jsonl").read_text().splitlines()
    assert len(lines) == first["steps"] == 10 and "grad_norm" in json.loads(lines[-1])
    assert main(["demo", "--resume", str(folder)]) == 0
    assert "resuming the demo" in capsys.readouterr().out
    again = json.loads((folder / "result.json").read_text())["metrics"]
    assert again["resumed_from"] == 10
    assert {k: v for k, v in again.items() if "seconds" not in k and k != "resumed_from"} == {
        k: v for k, v in first.items() if "seconds" not in k and k != "resumed_from"}


def test_interrupted_demo_names_its_checkpoint_and_the_resume_command(tmp_path, capsys, monkeypatch):
    import pglab.apps.demo as demo_module
    from pglab.trainers.loop import RunDir

    def stopped(out, **_):
        RunDir(out).save_checkpoint({"settings": {}, "step": 30})
        raise KeyboardInterrupt

    monkeypatch.setattr(demo_module, "demo", stopped)
    assert main(["demo", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "after step 30" in err[0] and f"pglab demo --resume {tmp_path}" in err[0]


def test_negative_seed_is_refused_naming_the_option(tmp_path, capsys):
    assert main(["demo", "--seed", "-1", "--out", str(tmp_path)]) == 2
    assert "--seed" in capsys.readouterr().err


def test_the_default_format_penalty_and_seed_spread_are_the_committed_sweeps():
    from pglab.apps.demo import SD_OVER_SEEDS
    from pglab.trainers.tinyagent import FORMAT_PENALTY

    sweep = ROOT / "docs" / "results" / "format_penalty.json"
    choice = json.loads(sweep.read_text())["choice"]
    assert FORMAT_PENALTY == choice["format_penalty"] and SD_OVER_SEEDS == choice["seed_sd"]


@pytest.mark.parametrize("options", [["--format-penalty", "-0.5"], ["--format-penalty", "nan"],
                                     ["--format-penalty", "x"], ["--format-penalty", "1", "--resume"]])
def test_bad_format_penalty_is_refused_naming_the_option(tmp_path, capsys, options):
    assert main(["demo", "--out", str(tmp_path), *options]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--format-penalty" in err[0]
