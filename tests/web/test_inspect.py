"""pglab inspect without a browser: what it reads of a run folder, its JSON API, and the one-line errors of hostile
input (a folder that is not a run, damaged files, a bad port, a bad query)."""

import json
import socket

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install '.[web]'")

from starlette.testclient import TestClient  # noqa: E402

from pglab.apps.inspect import load_run  # noqa: E402
from pglab.cli import main  # noqa: E402
from pglab.runtime.options import SettingsError  # noqa: E402
from pglab.web.inspect import check_port, create_inspect_app  # noqa: E402

ROW = {"step": 0, "row": 0, "group": 0, "reward": 1.0, "passed": True, "end": "env", "advantage": 0.5,
       "truncated": False, "ids": [5, 6, 7], "text": ["a ", "b ", "c "], "owner": [1, 2, 2], "logp": [0.0, -0.1, -0.2],
       "adv": [0.0, 0.5, 0.5], "clipped": [0, 0, 1]}


def run_folder(tmp_path, name="run", steps=3, samples=True):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps({"step": s, "reward": s / 2, "skipped": s == 1,
                                                            "heldout_pass_rate": None, "kl_k1": float("nan")}) + "\n"
                                                for s in range(steps)))
    (folder / "result.json").write_text(json.dumps({"warnings": ["warning: every step was skipped"]}))
    if samples:
        (folder / "samples.jsonl").write_text("".join(json.dumps({**ROW, "step": s}) + "\n" for s in (0, 2)))
    return folder


def test_load_run_reads_steps_warnings_and_samples(tmp_path):
    run = load_run(run_folder(tmp_path))
    summary = run.summary()
    assert summary["metrics"] == ["reward", "skipped"]              # None and NaN are no numbers to draw
    assert [r["skipped"] for r in run.steps] == [0.0, 1.0, 0.0]
    assert summary["warnings"] == ["warning: every step was skipped"] and summary["sample_steps"] == [0, 2]
    assert load_run(run_folder(tmp_path, "bare", samples=False)).samples == {}


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "train.jsonl").unlink() or (f / "samples.jsonl").unlink(), "not a run folder"),
    (lambda f: (f / "train.jsonl").write_text('{"step": 0}\n{"step": \n'), r"train.jsonl:2 is not JSON"),
    (lambda f: (f / "train.jsonl").write_text("[1, 2]\n"), "is not a JSON object"),
    (lambda f: (f / "result.json").write_text("{oops"), "result.json is not a JSON object"),
    (lambda f: (f / "samples.jsonl").write_text('{"step": "x", "owner": []}\n'), "row 1 has no integer step"),
])
def test_a_folder_that_is_not_a_run_is_one_line(tmp_path, damage, message):
    folder = run_folder(tmp_path)
    damage(folder)
    with pytest.raises(SettingsError, match=message) as err:
        load_run(folder)
    assert "\n" not in str(err.value)


def test_cli_refuses_hostile_input_in_one_line(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nowhere"), "--no-browser"]) == 2
    assert "is not a folder; pass a run folder" in capsys.readouterr().err
    folder = run_folder(tmp_path)
    for port, expected in (("80", "from 1024 to 65535"), ("70000", "from 1024 to 65535")):
        assert main(["inspect", str(folder), "--port", port, "--no-browser"]) == 2
        assert expected in capsys.readouterr().err
    assert main(["inspect", str(folder), str(folder), str(folder), "--no-browser"]) == 2
    assert "at most 2" in capsys.readouterr().err
    assert main(["inspect", str(folder), "--model", str(tmp_path), "--no-browser"]) == 2
    assert "drop --model" in capsys.readouterr().err


def test_a_taken_port_is_refused(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(SettingsError, match="pass another --port"):
            check_port("127.0.0.1", taken.getsockname()[1])


def test_api_gives_runs_and_one_step_of_samples(tmp_path):
    client = TestClient(create_inspect_app([load_run(run_folder(tmp_path, "a")), load_run(run_folder(tmp_path, "b"))]))
    runs = client.get("/api/runs").json()["runs"]
    assert [r["name"] for r in runs] == ["a", "b"] and runs[1]["sample_steps"] == [0, 2]
    rows = client.get("/api/samples", params={"run": 1, "step": 2}).json()["rows"]
    assert rows == [{**ROW, "step": 2}]
    assert "inspect.js" in client.get("/").text
    for params, status, message in (({"run": 2, "step": 0}, 400, "run must be a whole number below 2"),
                                    ({"run": "-1", "step": 0}, 400, "run must be"),
                                    ({"run": 0, "step": "x"}, 400, "step must be"),
                                    ({"run": 0, "step": 1}, 404, "step 1 has no recorded samples")):
        answer = client.get("/api/samples", params=params)
        assert answer.status_code == status and message in answer.json()["error"]
