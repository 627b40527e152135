"""tinyagent-reinforce's claims on per-seed rows: they hold on the committed run's rows (first seed 100) and fail on
a plausible wrong implementation's (an update that learns nothing)."""

import pytest

from pglab.experiments.tinyagent_reinforce import Config, claims, seed_mean
from pglab.reporting.result import Result

LEVELS = {"train": {"random": 0.0969, "blind": 0.2}, "heldout": {"random": 0.0983, "blind": 0.2}}
"""The scripted levels (tinyagent-reinforce's reference_levels table; their exact values run the sandbox)."""

COLUMNS = ("base_train_pass", "trained_train_pass", "base_heldout_pass", "trained_heldout_pass", "base_train_valid",
           "base_train_submit", "base_heldout_valid", "base_heldout_submit", "loss_per_reward_change",
           "reward_change")
COMMITTED = [(0.1375, 0.825, 0.1375, 0.5469, 0.9723, 0.6734, 0.976, 0.7281, -0.1255, 0.4781),
             (0.1719, 0.8656, 0.1281, 0.3031, 0.9854, 0.7297, 0.9867, 0.6969, -0.0826, 0.6203),
             (0.1141, 0.7578, 0.1, 0.6062, 0.972, 0.6906, 0.9772, 0.6469, -0.0893, 0.6531),
             (0.1484, 0.5375, 0.1562, 0.1531, 0.9739, 0.7172, 0.9717, 0.6531, -0.1727, 0.3484),
             (0.1437, 0.5531, 0.1, 0.1969, 0.976, 0.7531, 0.9823, 0.7188, -0.1562, 0.3406)]
"""docs/results/two-first-seeds/first-seed-100/tinyagent-reinforce.md, table per_seed (seeds 100-104)."""


def judged(rows: list[dict]) -> Result:
    result = Result("tinyagent-reinforce", {})
    claims(result, rows, LEVELS, {"train": 640, "heldout": 320}, Config())
    return result


def committed() -> list[dict]:
    return [dict(zip(COLUMNS, row)) for row in COMMITTED]


def test_the_committed_rows_hold_every_claim_all_statistical():
    result = judged(committed())
    assert result.passed and len(result.checks) == 15
    assert all(c.p_value is not None for c in result.checks)


def test_an_update_that_learns_nothing_fails_the_learning_claims():
    """A plausible wrong implementation: the update's sign flipped or detached, so the trained agent stays the base
    agent and the batch reward does not climb. The book's gain as one more seed alone would still pass (the seeds'
    spread is wide); the at-least-half-the-book's claims fail."""
    rows = [{**row, "trained_train_pass": row["base_train_pass"], "trained_heldout_pass": row["base_heldout_pass"],
             "reward_change": 0.01 * (-1) ** k} for k, row in enumerate(committed())]
    failed = [c.claim for c in judged(rows).failed_checks()]
    assert any("pass rate (train): at least half" in claim for claim in failed)
    assert any("the batch reward rises" in claim for claim in failed)


def test_seed_mean_floors_the_standard_error_at_the_binomial_resolution():
    assert seed_mean([0.5, 0.5, 0.5], 100) == (0.5, pytest.approx((1e-4 / 300) ** 0.5, rel=1e-12))
    assert seed_mean([0.2, 0.4], 10**6)[1] == pytest.approx(0.1, rel=1e-12)
