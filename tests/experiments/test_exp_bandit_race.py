"""bandit-race: the triangle geometry, the commitment rule, and the race's claim at reduced size."""

import math

import pytest
import torch

from pglab.experiments import get_experiment
from pglab.experiments.bandit_race import barycentric
from pglab.trainers.bandit import committed_arm
from support.experiments import check_quick


def test_barycentric_maps_corners_and_uniform_to_the_centroid():
    pi = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float64)
    points = barycentric(pi)
    expected = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.5, math.sqrt(3) / 2], [0.5, math.sqrt(3) / 6]],
                            dtype=torch.float64)
    torch.testing.assert_close(points, expected)


def test_committed_arm_is_minus_one_below_the_threshold():
    pi = torch.tensor([[0.6, 0.3, 0.1], [0.4, 0.4, 0.2], [0.05, 0.05, 0.9]])
    assert committed_arm(pi, 0.5).tolist() == [0, -1, 2]


def test_rate_runs_below_seeds_is_a_value_error():
    with pytest.raises(ValueError, match="raise rate_runs"):
        get_experiment("bandit-race").run(quick=True, seeds=12, rate_runs=10)


@pytest.mark.experiment("bandit-race")
def test_quick_race_locks_runs_only_without_a_baseline():
    result = check_quick("bandit-race")
    without, with_baseline = result.tables["race"]
    assert without["all runs: wrong rate"] > 0.2
    assert with_baseline["all runs: wrong rate"] == 0.0
    assert with_baseline["demo: best arm"] == result.config["seeds"]
    assert len(result.figures["paths_on_triangle"].axes) == 2
