"""grpo-weights' closed forms on their own (arithmetic that no audit enters, moved here from the experiment's
claims): GRPO's w(p) is symmetric about 1/2 and strictly decreasing on (0, 1/2] for G >= 3, its supremum is the
edge weight w(0+) = (1 - 1/G) / (s_1 + eps), and at p = 1/2 it approaches the large-G limit 1 / sqrt(p (1 - p)) = 2."""

import pytest

from pglab.experiments.grpo_weights import Config, curve_rows, edge_weight, shape_failures

CONFIG = Config()
CURVES = curve_rows(CONFIG)
GRPO = ("GRPO (population std)", "GRPO (sample std)")


@pytest.mark.parametrize("estimator", GRPO)
def test_grpo_weight_is_symmetric_and_largest_at_the_edges(estimator):
    assert shape_failures(CURVES, estimator) == 0
    sample = "sample" in estimator
    ratios = [r["weight"] / edge_weight(r["G"], CONFIG.eps, sample) for r in CURVES if r["estimator"] == estimator]
    assert max(ratios) <= 1 + CONFIG.tolerance          # equality (to roundoff) only at G = 2, where w is constant


def test_grpo_weight_at_one_half_approaches_two():
    middle = sorted((r for r in CURVES if r["estimator"] == GRPO[0] and abs(r["p"] - 0.5) < 1e-12),
                    key=lambda r: r["G"])
    gaps = [abs(r["weight"] - 2.0) for r in middle]
    assert len(gaps) == len(CONFIG.group_sizes) and all(b < a for a, b in zip(gaps, gaps[1:]))


def test_negative_control_a_flat_curve_is_not_decreasing():
    """Dr. GRPO's constant weight fails the shape check at every G >= 3 (the check can fail)."""
    assert shape_failures(CURVES, "Dr. GRPO") == sum(g >= 3 for g in CONFIG.group_sizes)
