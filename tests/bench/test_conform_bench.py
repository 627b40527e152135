"""bench conform: a quick run times each phase of pglab conform trl on the default GRPOConfig (no command)."""

import pytest

pytest.importorskip("trl")

from pglab.bench import BENCHMARKS, run_benchmark  # noqa: E402


@pytest.mark.experiment
def test_a_quick_run_times_the_loss_level_the_numerics_and_one_trainer_setting():
    assert "conform" in BENCHMARKS
    result = run_benchmark("conform", quick=True)
    m = result.metrics
    assert {"loss_level_s", "numerics_s", "trainer_level_s", "trainer_setting_median_s"} <= set(m)
    assert m["trainer_settings"] == 1 and m["trainer_level_s"] == m["trainer_setting_median_s"] > 0
    phases = [row["phase"] for row in result.tables["phases"]]
    assert phases[:2] == ["loss level", "numerics"] and phases[2].startswith("trainer: as configured")
    assert "command_s" not in m and not result.checks                # quick: no command, so no speed claim
