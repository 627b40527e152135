"""The command line and the report files: what a user types, what they see, and what lands on disk."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import pglab.experiments.registry as registry
from pglab.cli import main
from pglab.reporting.report import markdown_table


def pglab(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m pglab ARGS` in a fresh process, as a user would."""
    return subprocess.run([sys.executable, "-m", "pglab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "PGLAB_PROGRESS": "0"})


def test_cli_writes_the_report(tmp_path, capsys):
    assert main(["reproduce", "bandit-variance", "--quick", "--out", str(tmp_path)]) == 0
    for name in ("result.json", "report.md", "report.html", "baseline_sweep.csv", "variance_vs_baseline.png"):
        assert (tmp_path / name).exists(), name
    payload = json.loads((tmp_path / "result.json").read_text())
    assert payload["name"] == "bandit-variance" and payload["passed"]
    assert {"pglab", "commit", "time_utc", "command", "python", "torch", "platform"} <= set(payload["provenance"])
    report = (tmp_path / "report.md").read_text()
    assert "![variance_vs_baseline](variance_vs_baseline.png)" in report and "| b |" in report
    page = (tmp_path / "report.html").read_text()
    assert "<img src='variance_vs_baseline.png'" in page and "<table>" in page and "Claims (all claims hold)" in page
    assert "(html, md, json, csv, png)" in capsys.readouterr().out


def test_an_experiment_removes_only_its_own_stale_files(tmp_path):
    from pglab.reporting.report import write_report
    from pglab.reporting.result import Result

    (tmp_path / "notes.txt").write_text("mine")
    write_report(Result("a", {}, tables={"old": [{"x": 1}]}), tmp_path)
    write_report(Result("b", {}, tables={"other": [{"x": 1}]}), tmp_path)
    written = write_report(Result("a", {}, tables={"new": [{"x": 1}]}), tmp_path)
    assert not (tmp_path / "old.csv").exists()
    assert (tmp_path / "new.csv").exists() and (tmp_path / "other.csv").exists() and (tmp_path / "notes.txt").exists()
    assert {p.suffix for p in written} == {".html", ".md", ".json", ".csv"}     # no png when no figure
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]                    # the staging folder is gone


BAD_INPUTS = [
    (["reproduce", "bandit-race", "--seeds", "0"], "--seeds >="),
    (["reproduce", "frozenlake-race", "--seeds", "-3"], "--seeds >="),
    (["reproduce", "tokenworld-training", "--seeds", "1"], "--seeds >= 2"),
    (["reproduce", "frozenlake-race", "--first-seed", "-1"], "--first-seed must be >= 0"),
    (["reproduce", "bandit-variance", "--set", "samples=abc"], "samples expects int"),
    (["reproduce", "bandit-variance", "--set", "nonsense=1"], "no setting 'nonsense'"),
    (["reproduce", "bandit-variance", "--set", "samples"], "--set takes KEY=VALUE"),
    (["reproduce", "bandit-race", "--seed", "3"], "unrecognized arguments: --seed 3"),
    (["reproduce", "no-such-experiment"], "unknown experiment"),
    (["reproduce"], "name one experiment, or pass --all"),
    (["reproduce", "loo-enumeration", "--backend", "process"], "takes no --backend"),
    (["reproduce", "--all", "--set", "nonsense=1"], "no experiment has the setting"),
    (["bench", "nonsense"], "unknown benchmark"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_with_exit_2(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_out_must_be_a_writable_folder(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert main(["reproduce", "loo-enumeration", "--out", str(a_file)]) == 2
    assert "is a file; pass a folder" in capsys.readouterr().err
    assert main(["reproduce", "loo-enumeration", "--out", "/proc/pglab-out"]) == 2
    assert "cannot write in /proc" in capsys.readouterr().err
    assert a_file.read_text() == "" and not os.path.exists("/proc/pglab-out")


def test_bad_input_in_a_real_process_prints_no_traceback(tmp_path):
    for args in (["reproduce", "bandit-race", "--seed", "3"], ["reproduce", "bandit-variance", "--set", "samples=abc"],
                 ["reproduce", "tokenworld-training", "--seeds", "1"]):
        done = pglab(*args, "--out", str(tmp_path))
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())
    assert pglab("--version").stdout.startswith("pglab ")


def test_list_shows_every_experiment(capsys):
    from pglab.experiments import CATALOGUE

    assert main(["reproduce", "--list"]) == 0
    assert set(CATALOGUE) <= {line.split()[0] for line in capsys.readouterr().out.splitlines()}


@pytest.mark.slow
def test_all_with_set_runs_where_the_key_exists_and_writes_the_index(tmp_path, monkeypatch):
    from pglab.cli import overrides_for, parse_sets
    from pglab.experiments import experiment_names, get_experiment

    class Args:
        all, seeds, first_seed, backend = True, None, None, None

    with_seed = [n for n in experiment_names() if "seed" in get_experiment(n).fields()]
    assert with_seed and all(overrides_for(get_experiment(n), Args, parse_sets(["seed=1"])) == {"seed": 1}
                             for n in with_seed)
    two = {n: v for n, v in registry.CATALOGUE.items() if n in ("loo-enumeration", "bandit-variance")}
    monkeypatch.setattr(registry, "CATALOGUE", two)     # --all over two fast experiments
    assert main(["reproduce", "--all", "--quick", "--set", "seed=1", "--out", str(tmp_path)]) == 0
    index = (tmp_path / "index.html").read_text()
    assert "loo-enumeration/report.html" in index and "bandit-variance/report.html" in index
    assert json.loads((tmp_path / "loo-enumeration" / "result.json").read_text())["config"]["seed"] == 1


def test_ctrl_c_exits_130_in_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    # A shell's background jobs and some test runners' workers ignore SIGINT, and a child inherits that:
    # restore the default so that Python installs its KeyboardInterrupt handler, as in a terminal.
    proc = subprocess.Popen([sys.executable, "-m", "pglab", "reproduce", "frozenlake-race", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(4.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["pglab: interrupted; nothing was written for the unfinished run"]
    assert not out.exists()


def test_markdown_cells_escape_pipes():
    table = markdown_table([{"claim": "|grad| >= 0", "value": 1.5}])
    assert table.splitlines()[2] == "| \\|grad\\| >= 0 | 1.5 |"


def test_bench_lists_the_benchmarks(capsys):
    assert main(["bench", "--list"]) == 0
    assert {"bandit", "bugfix", "tabular"} <= {line.split()[0] for line in capsys.readouterr().out.splitlines()}
