"""bench bandit: bandit-variance and bandit-training at full size.

bandit-training is also timed against a plain per-seed Python loop measured in the same run.

Run by ``pglab bench bandit``. The loop replays the vectorised run's own draws for a subset
of seeds, so it does no sampling: the speed-up it reports is a lower bound.
"""

from __future__ import annotations

import time

import torch

from pglab.envs.bandit import GaussianBandit
from pglab.experiments import get_experiment
from pglab.reporting.result import Result
from pglab.trainers.bandit import BASELINES, replay_run, train_bandit


def run(quick: bool = False) -> Result:
    """Time bandit-training (full size unless ``quick``) and the per-seed loop on a subset of its seeds."""
    exp = get_experiment("bandit-training")
    config = exp.config(quick=quick)
    loop_seeds = 2 if quick else 10
    result = Result("bench-bandit", {"experiment": "bandit-training", "seeds": config.seeds, "steps": config.steps,
                                     "loop_seeds": loop_seeds}, summary=(
        "Wall time of the whole bandit-training experiment (three baselines, figure included), and of its "
        "training alone, vectorised over seeds versus a plain Python loop over one seed at a time."))

    start = time.perf_counter()
    exp.run(quick=quick)
    experiment_s = time.perf_counter() - start
    variance_exp = get_experiment("bandit-variance")
    start = time.perf_counter()
    variance_exp.run(quick=quick)
    variance_s = time.perf_counter() - start

    bandit = GaussianBandit(config.means, config.sd)
    vector_s = loop_s = 0.0
    for baseline in BASELINES:
        start = time.perf_counter()
        trajectory = train_bandit(bandit, baseline, config.seeds, config.steps, config.lr,
                           torch.Generator().manual_seed(config.first_seed))
        vector_s += time.perf_counter() - start
        start = time.perf_counter()
        for seed in range(loop_seeds):
            replay_run(bandit, baseline, trajectory.actions[:, seed], trajectory.rewards[:, seed], config.lr)
        loop_s += time.perf_counter() - start

    vector_per_seed, loop_per_seed = vector_s / config.seeds, loop_s / loop_seeds
    result.tables["timing"] = [
        {"what": f"bandit-training experiment, {config.seeds} seeds x {config.steps} steps", "seconds": experiment_s},
        {"what": "bandit-variance experiment" + (" (quick)" if quick else ""), "seconds": variance_s},
        {"what": f"training only, vectorised, {config.seeds} seeds, 3 baselines", "seconds": vector_s},
        {"what": f"plain per-seed loop, {loop_seeds} seeds, 3 baselines", "seconds": loop_s},
        {"what": f"plain per-seed loop, extrapolated to {config.seeds} seeds", "seconds": loop_per_seed * config.seeds},
    ]
    result.metrics.update({"experiment_s": experiment_s, "variance_experiment_s": variance_s,
                           "vectorised_s_per_seed": vector_per_seed, "loop_s_per_seed": loop_per_seed,
                           "speedup": loop_per_seed / vector_per_seed})
    result.check_range("bandit-training wall time (s)", experiment_s, high=10.0,
                       tolerance="speed target: under 10 s on 2 cores")
    result.check_range("bandit-variance wall time (s)", variance_s, high=30.0,
                       tolerance="speed target: under 30 s on 2 cores")
    result.check_range("speed-up of the vectorised trainer over the per-seed loop", loop_per_seed / vector_per_seed,
                       low=1.0, tolerance="ratio measured in the same run")
    return result
