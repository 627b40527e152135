"""bench audit: a quick run times the on-policy and the off-policy audit, in-process and as a command."""

import pytest

from pglab.bench import BENCHMARKS, run_benchmark


@pytest.mark.experiment
def test_a_quick_run_records_medians_ratios_and_the_two_speed_targets():
    assert "audit" in BENCHMARKS
    result = run_benchmark("audit", quick=True)
    m = result.metrics
    assert {"audit_onpolicy_s", "audit_offpolicy_s", "command_onpolicy_s", "command_offpolicy_s",
            "ratio_audit_offpolicy", "ratio_command_offpolicy"} <= set(m)
    assert m["ratio_audit_offpolicy"] == pytest.approx(m["audit_offpolicy_s"] / m["audit_onpolicy_s"])
    assert m["command_onpolicy_s"] > m["audit_onpolicy_s"] > 0           # the command also starts Python and torch
    assert [(row["what"], row["case"]) for row in result.tables["timing"]] == [
        ("audit", "on-policy"), ("audit", "off-policy"), ("command", "on-policy"), ("command", "off-policy")]
    assert [check.claim for check in result.checks] == ["pglab audit at the CLI defaults, command wall time (s)",
                                                        "pglab audit --behaviour stale:2, command wall time (s)"]
