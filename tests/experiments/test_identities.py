"""Identities behind the experiments: true by construction, so tests rather than report claims (float64, 1e-12)."""

import math

import numpy as np
import pytest
import torch

from pglab.envs.bandit import GaussianBandit
from pglab.envs.tabular import enumerate_trajectories, frozen_lake, repair_mdp, table_score, two_state_problem
from pglab.envs.tokenworld import TokenWorld
from pglab.estimators import cosine
from pglab.experiments.loo_enumeration import batch_expectations
from pglab.experiments.repair_mdp_gradient import surrogate_value_and_gradient
from pglab.experiments.tokenworld_gae import P_A, WORLD, critic_table, split_errors
from pglab.trainers.tabular import ascent_direction
from pglab.trainers.tokenworld import train_tokenworld

EXACT = 1e-12


def test_repair_mdp_surrogate_moves_by_shift_times_mean_log_prob():
    """mean_n (R_n + c) log p(tau_n) = mean_n R_n log p(tau_n) + c mean_n log p(tau_n), for every c."""
    mdp = repair_mdp()
    theta = 0.5 * torch.randn(mdp.n_states, mdp.n_actions, dtype=torch.float64,
                              generator=torch.Generator().manual_seed(0))
    episodes = mdp.sample(mdp.policy(theta), 500, torch.Generator().manual_seed(1))
    returns = episodes.episode_returns(1.0)
    plain, _ = surrogate_value_and_gradient(theta, episodes, returns)
    mean_logp, mean_score = surrogate_value_and_gradient(theta, episodes, torch.ones_like(returns))
    for shift in (-float(mdp.exact_value(theta)), 5.0):
        value, grad = surrogate_value_and_gradient(theta, episodes, returns + shift)
        assert value == pytest.approx(plain + shift * mean_logp, abs=EXACT * (1 + abs(value)))
        torch.testing.assert_close(grad, surrogate_value_and_gradient(theta, episodes, returns)[1] + shift * mean_score)


def test_gae_lambda_0_with_the_exact_critic_is_the_advantage():
    """Deterministic transitions: delta_t = A(s_t, a_t) exactly, so bias^2 and variance are both zero."""
    replies = WORLD.all_replies()
    exact_critic = critic_table(0.0, torch.Generator())[None]
    bias2, variance, _ = split_errors(exact_critic, replies, WORLD.reply_probs(P_A, replies), 0.0)[0]
    assert bias2 <= 1e-24 and variance <= 1e-24


def test_gae_lambda_1_variance_does_not_depend_on_the_critic():
    """At lambda 1 the critic is only a baseline per state: the spread around E[A_hat | s, a] is the same."""
    gen = torch.Generator().manual_seed(0)
    critics = torch.stack([critic_table(noise, gen) for noise in (0.0, 0.05, 0.15, 0.5)])
    replies = WORLD.all_replies()
    variances = [v for _, v, _ in split_errors(critics, replies, WORLD.reply_probs(P_A, replies), 1.0)]
    assert max(variances) - min(variances) <= EXACT


@pytest.mark.parametrize("n", [2, 3])
def test_leave_one_out_enumeration(n):
    """E[leave-one-out] = grad J and E[centred] = (n-1)/n grad J over all 4^n batches; the sum = autograd's."""
    mdp = two_state_problem()
    table = np.random.default_rng(0).standard_normal((2, 2))
    theta = torch.cat([torch.tensor(table), torch.zeros(1, 2, dtype=torch.float64)])
    probs, returns, counts = enumerate_trajectories(mdp, mdp.policy(theta))
    scores = table_score(theta, counts)
    exact = (probs[:, None, None] * returns[:, None, None] * scores).sum(0)
    torch.testing.assert_close(exact, mdp.exact_gradient(theta), rtol=0, atol=EXACT)
    loo, centred = batch_expectations(probs, returns, scores, n)
    torch.testing.assert_close(loo, exact, rtol=0, atol=EXACT)
    torch.testing.assert_close(centred, (n - 1) / n * exact, rtol=0, atol=EXACT)


def test_course_ch7_closed_forms():
    """The worked example's gradient (-4/9, -1/9, 5/9); exercise 7.6: J = 0.9, b* = 0.1, zero variance at b*."""
    three = GaussianBandit([1.0, 2.0, 4.0], sd=0.0)
    torch.testing.assert_close(three.exact_gradient(torch.zeros(3, dtype=torch.float64)),
                               torch.tensor([-4 / 9, -1 / 9, 5 / 9], dtype=torch.float64), rtol=0, atol=EXACT)
    two = GaussianBandit([1.0, 0.0], sd=0.0)
    theta = torch.tensor([math.log(9.0), 0.0], dtype=torch.float64)
    assert float(two.exact_value(theta)) == pytest.approx(0.9, abs=EXACT)
    b_star = float(two.optimal_baseline(theta))
    assert b_star == pytest.approx(0.1, abs=EXACT)
    assert float(two.exact_total_variance(theta, b_star)) == pytest.approx(0.0, abs=EXACT)


def test_divisors_rescale_or_tilt_the_per_episode_estimate():
    """'total steps' and 'a constant' rescale the per-episode estimate by n/N and n/c; 'own length' tilts it
    when successes differ in length."""
    mdp = frozen_lake(is_slippery=False, gamma=0.95)
    theta = torch.zeros(16, 4, dtype=torch.float64)
    theta[:, 1:3] = 1.5                                        # mostly down and right: frequent successes
    gen = torch.Generator().manual_seed(0)
    while True:
        batch = mdp.sample(mdp.policy(theta), 4, gen)
        won = batch.episode_returns(1.0) > 0
        if len(set(batch.lengths[won].tolist())) >= 2:
            break
    G = batch.reward_to_go(0.95)
    per_episode = ascent_direction(theta, batch, G, "seq_mean_token_sum")
    total = ascent_direction(theta, batch, G, "token_mean")
    constant = ascent_direction(theta, batch, G, "constant", 32.0)
    torch.testing.assert_close(total, per_episode * batch.n / int(batch.lengths.sum()), rtol=1e-12, atol=EXACT)
    torch.testing.assert_close(constant, per_episode * batch.n / 32.0, rtol=1e-12, atol=EXACT)
    assert cosine(ascent_direction(theta, batch, G, "seq_mean_token_mean"), per_episode) < 1 - 1e-9


def test_leave_one_out_training_is_blind_to_a_reward_shift():
    """Rewards 0/1 and 5/6 are exact in float64 and leave-one-out takes differences: the runs are bit-identical."""
    def run(shift: float) -> torch.Tensor:
        return train_tokenworld(TokenWorld(shift=shift), "leave-one-out", None, runs=5, updates=10, episodes=8, lr=0.5,
                                critic_lr=1.0, init_p_a=0.5, generator=torch.Generator().manual_seed(0))

    assert torch.equal(run(0.0), run(5.0))
