"""scripts/seed_sweep.py on tiny fake experiments (tests/support/sweep_fake*.py): seeds, resume, summary."""

import importlib
import json
import math
from pathlib import Path

import pytest

from pglab.experiments import registry
from pglab.runtime.options import SettingsError

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
FAKE = "support.sweep_fake"
EXACT = "first seed not divisible by fail_every"


@pytest.fixture
def sweep(monkeypatch, request):
    """The script as a module; in a unit test, the provenance and git look-ups (git and uname would be other
    processes) answer a fixed commit."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    module = importlib.import_module("seed_sweep")
    if request.node.get_closest_marker("integration") is None:
        monkeypatch.setattr(registry, "provenance", lambda command: {"commit": "0123456789abcdef"})
        monkeypatch.setattr(module, "source_dirty", lambda: False)
    return module


def test_first_seeds_include_the_stop(sweep):
    assert sweep.parse_first_seeds("10000:29000:1000") == list(range(10000, 29001, 1000))
    assert len(sweep.parse_first_seeds("10000:29000:1000")) == 20
    assert sweep.parse_first_seeds("0,100") == [0, 100]
    for bad in ("10000:9000:1000", "0:10:0", "a,b", "1,1", "-1"):
        with pytest.raises(SettingsError):
            sweep.parse_first_seeds(bad)


def test_summary_counts_the_seeds_where_every_claim_held(sweep, tmp_path):
    """Seeds 0-5 with fail_every 3 (fails at 0 and 3) and flag_every 5 (the statistical claim fails at 0 and 5):
    all claims hold at 1, 2 and 4."""
    result = sweep.sweep_experiment(FAKE, list(range(6)), tmp_path, sets={"flag_every": "5"}, backend="serial")
    row = sweep.summarise(json.loads((tmp_path / f"{FAKE}.json").read_text()))
    assert [run["seed"] for run in result["runs"]] == list(range(6))
    assert (row["runs"], row["held"], row["share"]) == (6, 3, 0.5)
    assert row["se"] == pytest.approx(math.sqrt(0.5 * 0.5 / 6))
    assert row["failures"] == {EXACT: 2, "a statistical claim": 2}
    assert row["size"] == "full, flag_every=5"
    table = "\n".join(sweep.summary_table([result]))
    assert f"{EXACT} (2); a statistical claim (2)" in table and "| 6 | 3 | 0.50 (0.20) |" in table


def test_resume_runs_only_the_missing_seeds(sweep, tmp_path, monkeypatch):
    sweep.sweep_experiment(FAKE, [1, 2], tmp_path, backend="serial")
    ran = []
    run_one = sweep.run_one
    monkeypatch.setattr(sweep, "run_one", lambda spec, seed, *rest: ran.append(seed) or run_one(spec, seed, *rest))
    result = sweep.sweep_experiment(FAKE, [0, 1, 2, 3], tmp_path, backend="serial")
    assert ran == [0, 3]
    assert [run["seed"] for run in result["runs"]] == [0, 1, 2, 3]
    with pytest.raises(SettingsError, match="another size"):
        sweep.sweep_experiment(FAKE, [4], tmp_path, quick=True, backend="serial")


def test_runs_of_a_concurrent_sweep_are_kept(sweep, tmp_path):
    """Two sweeps of the same size into one file: each save keeps the other's runs."""
    path = tmp_path / f"{FAKE}.json"
    sweep.sweep_experiment(FAKE, [1], tmp_path, backend="serial")
    other = json.loads(path.read_text())
    other["runs"] = [{**other["runs"][0], "seed": 7}]
    sweep.save_sweep(path, other)
    assert [run["seed"] for run in json.loads(path.read_text())["runs"]] == [1, 7]


def test_seed_settings_first_seed_else_shifted_else_seed_free(sweep, tmp_path):
    assert sweep.seed_settings(sweep.experiment_for(FAKE), 100, False, {}) == {"first_seed": 100}
    shifted = sweep.sweep_experiment("support.sweep_fake_shifted", [0, 100], tmp_path, backend="serial")
    assert [run["config"]["seed"] for run in shifted["runs"]] == [5, 105]
    assert [run["config"]["draw_seed"] for run in shifted["runs"]] == [7, 107]
    once = sweep.sweep_experiment("support.sweep_fake_seedfree", [0, 100], tmp_path, backend="serial")
    assert [run["seed"] for run in once["runs"]] == [None] and once["seed_free"]
    with pytest.raises(SettingsError, match="first_seed"):
        sweep.sweep_experiment(FAKE, [0], tmp_path, sets={"first_seed": "3"}, backend="serial")


def test_exact_lower_bound_on_the_share(sweep):
    """Clopper-Pearson: all n held gives 0.05 ** (1 / n); P(X >= k) at the bound is 5% for k < n."""
    assert sweep.clopper_pearson_lower(20, 20) == pytest.approx(0.05 ** (1 / 20), abs=1e-12)
    low = sweep.clopper_pearson_lower(17, 20)
    assert sum(math.comb(20, k) * low ** k * (1 - low) ** (20 - k) for k in range(17, 21)) == pytest.approx(0.05)
    assert sweep.clopper_pearson_lower(0, 20) == 0.0


def test_readme_lists_every_json(sweep, tmp_path):
    sweep.sweep_experiment(FAKE, [1, 2, 3], tmp_path, quick=True, backend="serial")
    sweep.sweep_experiment("support.sweep_fake_seedfree", [1], tmp_path, backend="serial")
    path = tmp_path / "support.sweep_fake_seedfree.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "note": "ran once"}))
    assert sweep.main(["--summary", str(tmp_path)]) == 0
    text = (tmp_path / "README.md").read_text()
    assert f"| {FAKE} | QUICK | 1-3 | 3 | 2 |" in text                     # QUICK: fail_every 2 fails at 2
    assert "| support.sweep_fake_seedfree | full | seed-free | 1 | 1 |" in text and "| 0123456 |" in text
    assert "Not swept yet: aggregation, bandit-lab," in text and "- support.sweep_fake_seedfree: ran once" in text
    sweep.sweep_experiment(FAKE, [1], tmp_path / "one", quick=True, backend="serial")
    assert sweep.main(["--timing", str(tmp_path / "one"), str(tmp_path), "--out", str(tmp_path / "elsewhere")]) == 0
    timing = (tmp_path / "elsewhere" / "timing.md").read_text()
    assert f"| {FAKE} | QUICK | 1 | 0.0 | 0.0 | 1 of 1 | 0123456 |" in timing               # from the first folder
    assert "| support.sweep_fake_seedfree | full | 1 |" in timing


@pytest.mark.integration
def test_process_workers_record_the_same_runs(sweep, tmp_path):
    """Two spawned workers record what a serial sweep records; a crash at one seed is that seed's failed run."""
    sets = {"crash_at": "2"}
    serial = sweep.sweep_experiment(FAKE, [1, 2, 3], tmp_path / "serial", sets=sets, backend="serial")
    pooled = sweep.sweep_experiment(FAKE, [1, 2, 3], tmp_path / "pooled", sets=sets, backend="process", workers=2)
    assert [(r["seed"], r["status"], r.get("claims")) for r in pooled["runs"]] == \
        [(r["seed"], r["status"], r.get("claims")) for r in serial["runs"]]
    crashed = pooled["runs"][1]
    assert crashed["status"] == "crashed" and crashed["error"] == "RuntimeError: the fake crashes at first seed 2"
