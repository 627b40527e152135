"""The command line and the report files: what a user types and what lands on disk."""

import json
from types import SimpleNamespace

from pglab.cli import _overrides, main
from pglab.experiments import get_experiment
from pglab.report import markdown_table


def test_cli_writes_the_report(tmp_path, capsys):
    assert main(["reproduce", "bandit-variance", "--quick", "--out", str(tmp_path)]) == 0
    for name in ("result.json", "report.md", "baseline_sweep.csv", "variance_vs_baseline.png"):
        assert (tmp_path / name).exists(), name
    payload = json.loads((tmp_path / "result.json").read_text())
    assert payload["name"] == "bandit-variance" and payload["passed"]
    report = (tmp_path / "report.md").read_text()
    assert "![variance_vs_baseline](variance_vs_baseline.png)" in report and "| b |" in report
    assert "results written to" in capsys.readouterr().out


def test_cli_list_and_errors(capsys):
    assert main(["reproduce", "--list"]) == 0
    assert "bandit-variance" in capsys.readouterr().out
    assert main(["reproduce", "no-such-experiment"]) == 2
    assert "unknown experiment" in capsys.readouterr().err
    assert main(["reproduce", "bandit-variance", "--set", "nonsense=1"]) == 2
    assert "no setting" in capsys.readouterr().err


def test_markdown_cells_escape_pipes():
    table = markdown_table([{"claim": "|grad| >= 0", "value": 1.5}])
    assert table.splitlines()[2] == "| \\|grad\\| >= 0 | 1.5 |"


def test_all_applies_seeds_and_backend_only_where_they_exist():
    args = SimpleNamespace(set=None, seeds=7, backend="process", all=True)
    assert _overrides(get_experiment("frozenlake-race"), args) == {"seeds": 7, "backend": "process"}
    assert _overrides(get_experiment("loo-enumeration"), args) == {}
    args.all = False
    assert main(["reproduce", "loo-enumeration", "--backend", "process"]) == 2


def test_bench_lists_the_benchmarks(capsys):
    assert main(["bench", "--list"]) == 0
    assert {"bandit", "bugfix", "tabular"} <= set(capsys.readouterr().out.split())
    assert main(["bench", "nonsense"]) == 2
