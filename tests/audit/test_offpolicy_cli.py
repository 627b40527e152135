"""pglab audit off-policy on the command line: --behaviour, --vocab, the behaviour in the table and the JSON, a
preset's warning under the verdict, refusals."""

import json
from types import SimpleNamespace

import pytest

from pglab.audit import PRESETS
from pglab.audit.report import AuditConfig, make_policy
from pglab.cli import main


def test_a_preset_off_policy_on_a_larger_vocabulary(tmp_path, capsys):
    path = tmp_path / "audit.json"
    assert main(["audit", "--preset", "trl-grpo", "--vocab", "3", "--length", "2", "--behaviour", "noise:0.5",
                 "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("verdict: ") and "sampled by noise:0.5" in out
    report = json.loads(path.read_text())
    assert report["behaviour"] == "sampled by noise:0.5" and report["off_policy"] is True
    assert report["config"]["behaviour"] == "noise:0.5" and report["config"]["vocab"] == 3
    assert report["exact"] is True


def test_the_default_vocabulary_is_unchanged():
    assert make_policy(AuditConfig(preset="pglab")).vocab == 2
    assert make_policy(AuditConfig(preset="pglab", variable_length=True)).vocab == 3
    assert make_policy(AuditConfig(preset="pglab", variable_length=True, vocab=4)).vocab == 4


def test_on_policy_says_so(tmp_path, capsys):
    path = tmp_path / "audit.json"
    assert main(["audit", "--preset", "trl-rloo", "--json", str(path)]) == 0
    assert "on-policy" in capsys.readouterr().out
    report = json.loads(path.read_text())
    assert report["off_policy"] is False and report["behaviour"].startswith("on-policy")


def test_a_presets_warning_is_printed_under_the_verdict(monkeypatch, capsys):
    base = PRESETS["trl-rloo"]
    monkeypatch.setitem(PRESETS, "warned", SimpleNamespace(build=base.build, summary=base.summary,
                                                           warning="the default epsilon_high caps the weight"))
    assert main(["audit", "--preset", "warned"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("verdict: ") and lines[1] == "warning: the default epsilon_high caps the weight"


@pytest.mark.parametrize("args, message", [
    (["--behaviour", "stale"], "KIND:VALUE"),
    (["--behaviour", "top-p:2"], "KIND:VALUE"),
    (["--vocab", "1"], "--vocab must be >= 2"),
    (["--vocab", "2", "--variable-length"], "--vocab must be >= 3 with --variable-length"),
])
def test_bad_off_policy_options_are_one_line_with_exit_2(args, message, capsys):
    assert main(["audit", "--preset", "trl-rloo", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
