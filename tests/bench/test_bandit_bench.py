"""bench bandit: a quick run times both experiments and the per-seed loop, and records what docs/bandit.md quotes."""

import pytest

from pglab.bench import run_benchmark


@pytest.mark.experiment
def test_a_quick_run_records_the_wall_times_and_the_speedup():
    result = run_benchmark("bandit", quick=True)
    m = result.metrics
    assert {"experiment_s", "variance_experiment_s", "vectorised_s_per_seed", "loop_s_per_seed", "speedup"} <= set(m)
    assert m["speedup"] == pytest.approx(m["loop_s_per_seed"] / m["vectorised_s_per_seed"])
    assert [row["what"] for row in result.tables["timing"]][:2] == [
        "bandit-training experiment, 60 seeds x 400 steps", "bandit-variance experiment (quick)"]
