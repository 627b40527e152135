"""The command line and the report files: what a user types, what they see, and what lands on disk."""

import json
import os
import signal
import subprocess
import sys

import pytest

import pglab.experiments.registry as registry
from pglab.cli import main
from pglab.reporting.report import markdown_table


def pglab(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m pglab ARGS` in a fresh process, as a user would."""
    return subprocess.run([sys.executable, "-m", "pglab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "PGLAB_PROGRESS": "0"})


@pytest.mark.experiment
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
    (["bench"], "name one benchmark, or pass --all (or --list)"),
    (["bench", "--list", "bandit"], "--list lists every benchmark: drop the name"),
    (["bench", "bandit", "--size", "small"], "bench bandit takes no --size; drop it (it is a setting of lm-vs-trl)"),
    (["reproduce", "lm-kl", "--set", "betas=(0.1, 0.2)"], "betas must start with 0"),
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


@pytest.mark.integration
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


@pytest.mark.experiment
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


@pytest.mark.integration
def test_ctrl_c_exits_130_in_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    # A shell's background jobs and some test runners' workers ignore SIGINT, and a child inherits that:
    # restore the default so that Python installs its KeyboardInterrupt handler, as in a terminal.
    proc = subprocess.Popen([sys.executable, "-m", "pglab", "reproduce", "frozenlake-race", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline() == "frozenlake-race: running\n"      # the run has started, however slow the machine
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


def one_line(capsys) -> str:
    """The one line a refusal or an interruption printed on stderr."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_out_steps_and_group_size_have_one_name_and_trls_alias():
    from pglab.cli import TRAIN_AGENT, train_agent_parser, train_lm_config, train_lm_parser
    from pglab.runtime.options import RunOptions, settings
    from pglab.trainers.agent_config import AgentConfig

    lm = [train_lm_config(train_lm_parser().parse_args(words)) for words in (
        ["--out", "runs/a", "--steps", "3", "--group-size", "2"],
        ["--output-dir", "runs/a", "--max-steps", "3", "--num-generations", "2"])]
    assert lm[0] == lm[1] and (lm[0].output_dir, lm[0].max_steps, lm[0].num_generations) == ("runs/a", 3, 2)
    assert train_lm_config(train_lm_parser().parse_args([])).output_dir == "runs/train-lm"
    for words in (["--out", "runs/b", "--steps", "3", "--group-size", "2"],
                  ["--output-dir", "runs/b", "--max-steps", "3", "--num-generations", "2"]):
        args = train_agent_parser().parse_args(words)
        cfg, run = settings(AgentConfig, args), settings(RunOptions, args, defaults=TRAIN_AGENT)
        assert (run.out, cfg.steps, cfg.group_size) == ("runs/b", 3, 2)


@pytest.mark.parametrize("words, folder, resume", [
    ([], "runs/{c}", False), (["--resume"], "runs/{c}", True), (["--resume", "old"], "old", True),
    (["--out", "old", "--resume"], "old", True), (["--out", "old", "--resume", "old"], "old", True)])
def test_resume_has_the_same_three_forms_on_every_training_command(words, folder, resume):
    from pglab.apps.demo import DemoSettings
    from pglab.cli import TRAIN_AGENT, demo_parser, train_agent_parser, train_lm_config, train_lm_parser
    from pglab.runtime.options import RunOptions, settings

    lm = train_lm_config(train_lm_parser().parse_args(words))
    agent = settings(RunOptions, train_agent_parser().parse_args(words), defaults=TRAIN_AGENT)
    demo = settings(DemoSettings, demo_parser().parse_args(words), defaults={"out": "runs/demo"})
    assert (lm.output_dir, lm.resume) == (folder.format(c="train-lm"), resume)
    assert (agent.out, agent.resume) == (folder.format(c="train-agent"), resume)
    assert (demo.out, demo.resume) == (folder.format(c="demo"), resume)


@pytest.mark.parametrize("command", ["train-lm", "train-agent", "demo"])
def test_resume_dir_and_another_out_are_refused(command, capsys):
    assert main([command, "--out", "runs/a", "--resume", "runs/b"]) == 2
    assert "--resume runs/b and --out runs/a name two folders" in one_line(capsys)


@pytest.mark.parametrize("command, flag", [("train-lm", "--output-dir"), ("train-lm", "--out"),
                                           ("train-agent", "--out"), ("demo", "--out")])
def test_an_out_that_is_a_file_is_one_line(command, flag, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main([command, flag, str(tmp_path / "file")]) == 2
    assert "is a file; pass a folder" in one_line(capsys)


def test_audit_json_naming_a_folder_is_refused_before_the_audit(tmp_path, capsys, monkeypatch):
    import pglab.audit.report

    monkeypatch.setattr(pglab.audit.report, "run_audit", lambda config: pytest.fail("the audit ran"))
    assert main(["audit", "--preset", "trl-rloo", "--json", str(tmp_path)]) == 2
    assert f"--json {tmp_path} is a folder; pass a file name" in one_line(capsys)


def test_a_negative_format_penalty_is_refused_and_each_environment_gets_its_defaults(tmp_path, capsys):
    assert main(["train-agent", "--env", "calc_env:make_env", "--format-penalty", "-1", "--out", str(tmp_path)]) == 2
    assert "--format-penalty >= 0" in one_line(capsys)
    from pglab.trainers.agent_config import USER_ENV, AgentConfig
    from pglab.trainers.tinyagent import FORMAT_PENALTY

    assert AgentConfig(env="calc_env:make_env").format_penalty == USER_ENV["format_penalty"]
    assert AgentConfig(env="calc_env:make_env", format_penalty=0.25).format_penalty == 0.25
    assert AgentConfig().format_penalty == FORMAT_PENALTY


def stopped_after(folder, step: int | None, lines: int):
    """A stand-in for a run that wrote ``lines`` JSON lines and a checkpoint after ``step``, then saw Ctrl-C."""
    from pglab.trainers.loop import RunDir

    def work(*args, **kwargs):
        if lines:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "train.jsonl").write_text("".join(f'{{"step": {i}}}\n' for i in range(lines)))
        if step is not None:
            RunDir(folder).save_checkpoint({"settings": {}, "step": step})
        raise KeyboardInterrupt
    return work


@pytest.mark.parametrize("command, target, extra", [
    ("demo", "pglab.apps.demo.demo", []),
    ("train-agent", "pglab.apps.train_agent.agent_result", ["--steps", "40", "--quick"]),
    ("train-lm", "pglab.trainers.lm.train_lm", ["--steps", "40", "--beta", "0"]),
])
def test_ctrl_c_says_what_is_on_disk_and_how_to_resume(command, target, extra, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "run"
    monkeypatch.setattr(target, stopped_after(folder, 30, 34))
    assert main([command, "--out", str(folder), *extra]) == 130
    line = one_line(capsys)
    assert line.startswith(f"pglab: interrupted; checkpoint after step 30 in {folder} beside train.jsonl (34 lines); "
                           f"continue with pglab {command} ")
    assert line.endswith(f"--resume {folder}") and all(word in line for word in extra)
    monkeypatch.setattr(target, stopped_after(tmp_path / "other", None, 0))
    assert main([command, "--out", str(tmp_path / "other")]) == 130
    assert one_line(capsys) == "pglab: interrupted; nothing was written"
    monkeypatch.setattr(target, stopped_after(tmp_path / "third", None, 2))
    assert main([command, "--out", str(tmp_path / "third")]) == 130
    assert "train.jsonl (2 lines) but no checkpoint, so there is nothing to resume" in one_line(capsys)


SMOKE = '''
from dataclasses import dataclass
from typing import ClassVar


@dataclass
class Config:
    steps: int = 100
    """Steps."""

    QUICK: ClassVar[dict] = {"steps": 2}


def run(config, result):
    result.tables["t"] = [{"steps": config.steps}]
    result.check_range("holds at any size", 1.0, low=0.0, tolerance="by construction")
    result.check_range("needs the full size", float(config.steps), low=50.0, tolerance="50 steps", full_size=True)
'''


def test_a_quick_run_is_a_smoke_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(registry, "provenance", lambda command: {})   # git and uname would be other processes
    (tmp_path / "smoke_exp.py").write_text(SMOKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import smoke_exp

    monkeypatch.setitem(sys.modules, "pglab.experiments.smoke_exp", smoke_exp)
    monkeypatch.setitem(registry.CATALOGUE, "smoke", ("smoke_exp", "a claim that needs the full size"))
    assert main(["reproduce", "smoke", "--quick", "--out", str(tmp_path / "q")]) == 0
    assert "not evaluated" in capsys.readouterr().out
    payload = json.loads((tmp_path / "q" / "result.json").read_text())
    assert [c["passed"] for c in payload["checks"]] == [True, None] and payload["passed"] and payload["quick"]
    status = "1 claim(s) hold, 1 not evaluated (quick run: they need the full size)"
    assert f"## Claims ({status})" in (tmp_path / "q" / "report.md").read_text()
    assert "| 2 | >= 50 | 50 steps | exact | not evaluated |" in (tmp_path / "q" / "report.md").read_text()
    assert f"Claims ({status})</h2>" in (tmp_path / "q" / "report.html").read_text()
    assert "<td class=\"unjudged\">not evaluated</td>" in (tmp_path / "q" / "report.html").read_text()
    assert main(["reproduce", "smoke", "--set", "steps=20", "--out", str(tmp_path / "full")]) == 1
    assert [c["passed"] for c in json.loads((tmp_path / "full" / "result.json").read_text())["checks"]] == [True,
                                                                                                          False]


@pytest.mark.parametrize("options, says", [(["--device", "cuda"], "trains on the CPU only"),
                                           (["--steps", "0"], "--steps must be at least 1"),
                                           (["--steps", "x"], "expects int")])
def test_demo_takes_the_shared_flags_and_refuses_bad_ones_in_one_line(options, says, capsys, tmp_path):
    assert main(["demo", "--out", str(tmp_path / "run"), *options]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "run").exists()
