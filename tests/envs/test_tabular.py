"""pglab.envs.tabular: exact values and gradients, the lockstep sampler, and FrozenLake against gymnasium."""

import math

import gymnasium as gym
import pytest
import torch

from pglab.envs.tabular import (
    TabularMDP,
    enumerate_trajectories,
    frozen_lake,
    policy_evaluation,
    repair_mdp,
    table_score,
    two_state_problem,
)

SIGMAS = 4.0  # Monte Carlo checks: within 4 standard errors (fixed seeds)


def random_theta(mdp: TabularMDP, seed: int, scale: float = 0.5) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(mdp.n_states, mdp.n_actions, dtype=torch.float64, generator=generator)


def iterative_values(mdp: TabularMDP, pi: torch.Tensor, sweeps: int = 5000) -> torch.Tensor:
    """V by repeated Bellman backups V <- r_pi + gamma P_pi V (no linear algebra)."""
    P_pi = (pi[:, :, None] * mdp.P).sum(1)
    r_pi = (pi * mdp.R).sum(1)
    V = torch.zeros(mdp.n_states, dtype=torch.float64)
    for _ in range(sweeps):
        V = r_pi + mdp.gamma * P_pi @ V
    return V


MDPS = {
    "repair": repair_mdp,
    "lake": frozen_lake,
    "slippery lake": lambda: frozen_lake(is_slippery=True, gamma=0.9),
}


@pytest.mark.parametrize("name", MDPS)
def test_policy_evaluation_matches_iterative_evaluation(name):
    mdp = MDPS[name]()
    pi = mdp.policy(random_theta(mdp, 1))
    V = policy_evaluation(mdp.P, mdp.R, pi, mdp.gamma)
    assert torch.allclose(V, iterative_values(mdp, pi), atol=1e-10)
    assert V[mdp.terminal].abs().max() == 0


@pytest.mark.parametrize("name", MDPS)
def test_exact_gradient_matches_finite_differences(name):
    mdp = MDPS[name]()
    theta = random_theta(mdp, 2)
    grad = mdp.exact_gradient(theta)
    h = 1e-6
    numeric = torch.zeros_like(theta)
    for s in range(mdp.n_states):
        for a in range(mdp.n_actions):
            step = torch.zeros_like(theta)
            step[s, a] = h
            numeric[s, a] = (mdp.exact_value(theta + step) - mdp.exact_value(theta - step)) / (2 * h)
    assert torch.allclose(grad, numeric, atol=1e-8)


def test_horizon_value_equals_enumeration():
    lake = frozen_lake(max_steps=6)
    pi = lake.policy(random_theta(lake, 3, scale=1.0))
    probs, returns, _ = enumerate_trajectories(lake, pi)
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-12)
    assert float((probs * returns).sum()) == pytest.approx(float(lake.start @ lake.values(pi)), abs=1e-12)
    assert float(lake.values(pi)[0]) < float(frozen_lake().values(pi)[0])  # cutting at 6 steps loses return


def test_two_state_problem_layout():
    mdp = two_state_problem()
    theta = torch.zeros(3, 2, dtype=torch.float64)
    probs, returns, counts = enumerate_trajectories(mdp, mdp.policy(theta))
    assert sorted(returns.tolist()) == pytest.approx([0.4, 0.9, 1.1, 1.6])
    assert probs.tolist() == pytest.approx([0.25] * 4)
    assert counts.sum((1, 2)).tolist() == [2.0] * 4
    assert float(mdp.exact_value(theta)) == pytest.approx(1.0)  # mean of the four returns


def expected_visits(mdp: TabularMDP, pi: torch.Tensor) -> torch.Tensor:
    """E[visits of (s, a) per episode] = occupancy(s) pi(a|s), occupancy = start (I - P_pi)^-1; -> [S, A].

    Terminal states are reached but never acted in.
    """
    P_pi = (pi[:, :, None] * mdp.P).sum(1)
    occupancy = torch.linalg.solve(torch.eye(mdp.n_states, dtype=torch.float64) - P_pi.T, mdp.start)
    return (occupancy * ~mdp.terminal)[:, None] * pi


@pytest.mark.parametrize("name", MDPS)
def test_sampler_counts_and_returns_match_exact_within_standard_errors(name):
    mdp = MDPS[name]()
    pi = mdp.policy(random_theta(mdp, 4))
    episodes = mdp.sample(pi, 40_000, torch.Generator().manual_seed(5))
    returns = episodes.episode_returns(mdp.gamma)
    se = float(returns.std()) / math.sqrt(episodes.n)
    assert abs(float(returns.mean()) - float(mdp.start @ mdp.values(pi))) <= SIGMAS * se
    counts = episodes.counts()
    count_se = counts.std(0) / math.sqrt(episodes.n)
    gap = (counts.mean(0) - expected_visits(mdp, pi)).abs()
    assert (gap <= SIGMAS * count_se + 1e-12).all()
    assert torch.equal(counts.sum((1, 2)).long(), episodes.lengths)
    assert not episodes.truncated.any()
    assert mdp.terminal[episodes.states].sum() == 0  # no step is taken from a terminal state


def test_sampler_never_draws_impossible_transitions_and_is_reproducible():
    mdp = frozen_lake(is_slippery=True)
    pi = mdp.policy(random_theta(mdp, 6, scale=2.0))
    first = mdp.sample(pi, 5000, torch.Generator().manual_seed(7))
    again = mdp.sample(pi, 5000, torch.Generator().manual_seed(7))
    assert torch.equal(first.states, again.states) and torch.equal(first.actions, again.actions)
    order = torch.argsort(first.episode * (int(first.time.max()) + 1) + first.time)
    states, episode = first.states[order], first.episode[order]
    same = episode[1:] == episode[:-1]
    # Every consecutive pair of steps within an episode follows a transition of positive probability.
    assert (mdp.P[states[:-1][same], first.actions[order][:-1][same], states[1:][same]] > 0).all()


def test_time_limit_truncates():
    mdp = frozen_lake(max_steps=3)
    episodes = mdp.sample(mdp.policy(torch.zeros(16, 4, dtype=torch.float64)), 2000, torch.Generator().manual_seed(0))
    assert episodes.lengths.max() == 3
    assert (episodes.lengths[episodes.truncated] == 3).all() and not episodes.truncated[episodes.lengths < 3].any()
    assert 0 < episodes.truncated.sum() < (episodes.lengths == 3).sum()  # some third steps fall into a hole


def plain_reward_to_go(episodes, gamma):
    """G_t by a Python loop over each episode's steps, from the end backwards."""
    out = torch.zeros_like(episodes.rewards)
    for i in range(episodes.n):
        steps = sorted(((t, k) for k, (e, t) in enumerate(zip(episodes.episode.tolist(), episodes.time.tolist()))
                        if e == i), reverse=True)
        running = 0.0
        for _, k in steps:
            running = float(episodes.rewards[k]) + gamma * running
            out[k] = running
    return out


@pytest.mark.parametrize("gamma", [1.0, 0.95, 0.5])
def test_reward_to_go_and_episode_returns_match_a_plain_loop(gamma):
    mdp = frozen_lake(is_slippery=True)
    episodes = mdp.sample(mdp.policy(random_theta(mdp, 8)), 60, torch.Generator().manual_seed(9))
    expected = plain_reward_to_go(episodes, gamma)
    assert torch.allclose(episodes.reward_to_go(gamma), expected, atol=1e-12)
    first = episodes.time == 0
    assert torch.allclose(episodes.episode_returns(gamma)[episodes.episode[first]], expected[first], atol=1e-12)
    assert torch.equal(episodes.padded(episodes.rewards).sum(1), torch.zeros(60, dtype=torch.float64).index_add_(
        0, episodes.episode, episodes.rewards))


def test_table_score_equals_autograd_of_the_log_likelihood():
    mdp = repair_mdp()
    theta = random_theta(mdp, 10)
    episodes = mdp.sample(mdp.policy(theta), 50, torch.Generator().manual_seed(11))
    weights = torch.linspace(-1, 2, len(episodes.rewards), dtype=torch.float64)
    leaf = theta.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad((weights * episodes.log_probs(leaf)).sum(), leaf)
    assert torch.allclose(table_score(theta, episodes.weighted_counts(weights)).sum(0), grad, atol=1e-12)


def test_frozen_lake_table_matches_gymnasium_env():
    for slippery in (False, True):
        mdp = frozen_lake(is_slippery=slippery)
        env = gym.make("FrozenLake-v1", is_slippery=slippery).unwrapped
        env.reset(seed=0)
        assert mdp.terminal.tolist() == [c in (b"H", b"G") for c in env.desc.ravel().tolist()]
        for s in range(16):
            for a in range(4):
                if mdp.terminal[s]:
                    assert mdp.P[s, a].sum() == 0
                    continue
                if not slippery:
                    env.s = s
                    s2, reward, terminated, _, _ = env.step(a)
                    assert mdp.P[s, a, s2] == 1.0
                    assert mdp.transition_rewards[s, a, s2] == reward
                    assert bool(mdp.terminal[s2]) == terminated
                for prob, s2, reward, _ in env.P[s][a]:
                    assert mdp.P[s, a, s2] >= prob - 1e-12
                    assert mdp.transition_rewards[s, a, s2] == reward


def test_repair_mdp_design():
    mdp = repair_mdp()
    assert mdp.state_names[0] == "unread" and mdp.state_names[-1] == "done"
    assert (mdp.n_states, mdp.n_actions) == (7, 4)
    assert mdp.terminal.tolist() == [False] * 6 + [True]
    theta = 0.5 * torch.randn(7, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert 0.05 < float(mdp.exact_value(theta)) < 0.5  # a random policy passes in a minority of episodes


def test_errors_name_the_fix():
    mdp = repair_mdp()
    with pytest.raises(ValueError, match="pass P"):
        policy_evaluation(mdp.P, mdp.R, torch.ones(3, 4), 1.0)
    absorbing = mdp.P.clone()
    absorbing[6, :, 6] = 1.0  # 'done' loops on itself instead of ending the episode
    with pytest.raises(ValueError, match="terminal states must be all zero"):
        TabularMDP(absorbing, mdp.R, 1.0, mdp.start, mdp.terminal)
    with pytest.raises(ValueError, match="singular"):
        policy_evaluation(absorbing, mdp.R, torch.full((7, 4), 0.25, dtype=torch.float64), 1.0)
    with pytest.raises(ValueError, match="positive number"):
        mdp.sample(mdp.policy(torch.zeros(7, 4)), 0, torch.Generator())
    with pytest.raises(ValueError, match="max_steps"):
        enumerate_trajectories(mdp, mdp.policy(torch.zeros(7, 4)))
    with pytest.raises(ValueError, match="theta must be"):
        mdp.exact_value(torch.zeros(4, 7))
