"""The evaluations' pass@1 and pass@k with standard errors over problems: pglab.stats.pass_summary and
mean_best_at_k against hand computations and enumeration, train-lm's pass_metrics and train-agent's pass_table."""

import math
from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pglab.apps.train_agent import pass_table
from pglab.stats import mean_best_at_k, pass_summary
from pglab.trainers.lm.eval import ScoredReplies, pass_metrics, reply_metrics

TABLE = [[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]]
"""Three problems of four samples: 2, 0 and 4 correct."""


def spread_se(values):
    return float(np.std(values, ddof=1) / math.sqrt(len(values)))


def test_pass_summary_is_the_mean_over_problems_with_the_se_of_their_spread_by_hand():
    found = pass_summary(TABLE, 2)
    at_1, at_2 = [0.5, 0.0, 1.0], [1 - 1 / 6, 0.0, 1.0]          # 1 - C(2, 2) / C(4, 2) for the first problem
    assert found["k"] == 2 and found["samples"] == 4 and found["problems"] == 3
    assert found["pass_at_1"] == pytest.approx(0.5, abs=1e-12)
    assert found["pass_at_1_se"] == pytest.approx(spread_se(at_1), abs=1e-12)
    assert found["pass_at_k"] == pytest.approx(11 / 18, abs=1e-12)
    assert found["pass_at_k_se"] == pytest.approx(spread_se(at_2), abs=1e-12)


def test_pass_summary_of_one_problem_has_se_0_and_refuses_k_above_the_samples():
    assert pass_summary([[1, 0]], 2)["pass_at_k_se"] == 0.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_summary(TABLE, 5)


def test_mean_best_at_k_equals_the_mean_best_of_every_k_subset_per_problem():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(5, 6))
    for k in (1, 2, 4, 6):
        per_problem = [np.mean([max(c) for c in combinations(row, k)]) for row in scores]
        mean, se = mean_best_at_k(scores, k)
        assert mean == pytest.approx(np.mean(per_problem), abs=1e-12)
        assert se == pytest.approx(spread_se(per_problem), abs=1e-12)


def test_train_lm_pass_metrics_count_a_positive_score_as_a_pass_and_cap_k_at_the_generations():
    scores = torch.tensor([0.3, -0.2, 0.0, 0.9, -1.0, -0.5, -0.1, -0.3, 0.2, 0.4, 0.1, 0.8], dtype=torch.float64)
    found = pass_metrics(scores, generations=4, k=2)
    by_hand = pass_summary([[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]], 2)
    assert {k: found[k] for k in by_hand if k in found} == {k: by_hand[k] for k in by_hand if k in found}
    assert (found["best_at_k"], found["best_at_k_se"]) == mean_best_at_k(scores.numpy().reshape(3, 4), 2)
    assert pass_metrics(scores, generations=4, k=8)["k"] == 4
    assert pass_metrics(scores, generations=4, k=8)["pass_at_k"] == pytest.approx(2 / 3, abs=1e-12)


def test_reply_metrics_kl_gap_se_is_the_spread_of_prompt_means_of_k1_minus_exact():
    """k1 - exact per reply: 1, 3 | 5, 7 (two prompts of two replies): prompt means 2 and 6, whose se is 2; the se
    of k1 alone (k1 = 1 at every reply, exact moving against it) is 0, which would let any gap pass as
    significant."""
    exact = torch.tensor([0.0, -2.0, -4.0, -6.0], dtype=torch.float64)
    logp = torch.tensor([[0.0, 1.0]] * 4, dtype=torch.float64)
    replies = ScoredReplies(ids=torch.zeros(4, 2, dtype=torch.long), mask=torch.tensor([[0, 1]] * 4),
                            texts=["a"] * 4, replies=["a"] * 4, scores=torch.zeros(4, dtype=torch.float64), logp=logp,
                            ref_logp=torch.zeros(4, 2, dtype=torch.float64), exact_kl=exact,
                            entropy=torch.zeros(4, dtype=torch.float64))
    found = reply_metrics(replies, reward=None, generations=2)
    assert found["kl_k1_se"] == 0.0
    assert found["kl_gap_se"] == pytest.approx(spread_se([2.0, 6.0]), abs=1e-12) == pytest.approx(2.0, abs=1e-12)
    assert reply_metrics(replies, reward=None)["kl_gap_se"] == pytest.approx(spread_se([1.0, 3.0, 5.0, 7.0]),
                                                                             abs=1e-12)


def test_train_agent_pass_table_groups_episodes_by_task_wherever_they_sit():
    batch = SimpleNamespace(rewards=torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0]),
                            group=torch.tensor([0, 1, 0, 1, 0, 1]))
    assert pass_table(batch).tolist() == [[True, False, False], [False, True, True]]
