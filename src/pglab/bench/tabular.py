"""bench tabular: the lockstep sampler against gymnasium's FrozenLake one episode at a time, and the race's wall time.

Run by ``pglab bench tabular``. Both samplers run the calm lake without a time limit
under the uniform policy on one thread (torch ops and gymnasium's Python loop alike), in
alternating rounds after a warm-up so that a busy machine slows both; the reference loop draws each action by
an inverse-CDF lookup in numpy (cheaper than calling a torch policy per step).
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

from pglab.envs.tabular import frozen_lake
from pglab.experiments import get_experiment
from pglab.reporting.result import Result


def gymnasium_episodes(env: gym.Env, cdf: np.ndarray, episodes: int, rng: np.random.Generator) -> int:
    """Run episodes one at a time with the policy's CDF rows [S, A]; returns the number of steps."""
    steps = 0
    for _ in range(episodes):
        state, _ = env.reset()
        done = False
        while not done:
            action = min(int(np.searchsorted(cdf[state], rng.random(), side="right")), cdf.shape[1] - 1)
            state, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            steps += 1
    return steps


def sampler_rates(rounds: int, gym_episodes: int, lockstep_episodes: int) -> dict[str, float]:
    """Episodes per second of gymnasium's env and of TabularMDP.sample, in alternating rounds."""
    mdp = frozen_lake(is_slippery=False)
    pi = torch.full((mdp.n_states, mdp.n_actions), 1.0 / mdp.n_actions, dtype=torch.float64)
    env = gym.wrappers.TimeLimit(gym.make("FrozenLake-v1", is_slippery=False).env, max_episode_steps=10_000)
    env.reset(seed=0)
    rng, generator = np.random.default_rng(0), torch.Generator().manual_seed(0)
    cdf = np.cumsum(pi.numpy(), -1)
    gym_s = lockstep_s = 0.0
    gym_steps = lockstep_steps = 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gymnasium_episodes(env, cdf, gym_episodes // 10, rng)  # warm-up, not timed
        mdp.sample(pi, lockstep_episodes, generator)
        for _ in range(rounds):
            start = time.perf_counter()
            gym_steps += gymnasium_episodes(env, cdf, gym_episodes, rng)
            gym_s += time.perf_counter() - start
            start = time.perf_counter()
            lockstep_steps += len(mdp.sample(pi, lockstep_episodes, generator).rewards)
            lockstep_s += time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    return {"gym_eps_per_s": rounds * gym_episodes / gym_s,
            "lockstep_eps_per_s": rounds * lockstep_episodes / lockstep_s,
            "gym_steps_per_episode": gym_steps / (rounds * gym_episodes),
            "lockstep_steps_per_episode": lockstep_steps / (rounds * lockstep_episodes)}


def run(quick: bool = False) -> Result:
    """Sampler episodes/s against gymnasium (ratio >= 100), and frozenlake-race wall time with backend process."""
    rounds, gym_episodes, lockstep_episodes = (2, 500, 50_000) if quick else (5, 2000, 200_000)
    result = Result("bench-tabular", {"rounds": rounds, "gym_episodes_per_round": gym_episodes,
                                      "lockstep_episodes_per_round": lockstep_episodes, "quick": quick}, summary=(
        "FrozenLake (calm, no time limit, uniform policy): TabularMDP.sample running every episode in lockstep "
        "against gymnasium's env stepped one episode at a time, both on one thread, in alternating rounds; "
        "then the wall time of frozenlake-race with backend process" + (" at reduced size." if quick else ".")))
    rates = sampler_rates(rounds, gym_episodes, lockstep_episodes)
    ratio = rates["lockstep_eps_per_s"] / rates["gym_eps_per_s"]
    result.tables["sampler"] = [
        {"sampler": "gymnasium FrozenLake-v1, one episode at a time", "episodes/s": rates["gym_eps_per_s"],
         "steps per episode": rates["gym_steps_per_episode"]},
        {"sampler": f"TabularMDP.sample, {lockstep_episodes} episodes in lockstep",
         "episodes/s": rates["lockstep_eps_per_s"], "steps per episode": rates["lockstep_steps_per_episode"]},
    ]
    result.check_range("lockstep sampler / gymnasium, episodes per second", ratio, low=100.0,
                       tolerance="speed target: at least 100 times; both measured in this run")

    race = get_experiment("frozenlake-race")
    config = race.config(quick=quick, backend="process")
    start = time.perf_counter()
    race_result = race.run(quick=quick, backend="process")
    race_s = time.perf_counter() - start
    size = f"{len(config.variants)} variants x {config.seeds} seeds x {config.updates} updates"
    result.tables["race"] = [{"experiment": f"frozenlake-race, {size}, backend process", "seconds": race_s,
                              "claims held": race_result.passed}]
    if not quick:
        result.check_range("frozenlake-race at full size, backend process (s)", race_s, high=300.0,
                           tolerance="speed target: under 5 minutes on 2 cores")
    result.metrics.update({**rates, "ratio": ratio, "race_s": race_s})
    return result
