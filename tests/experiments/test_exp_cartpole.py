"""cartpole: episode collection from the vector env, the three weightings, and the ordering at reduced size."""

import pytest
import torch

from pglab.experiments import get_experiment
from pglab.trainers.cartpole import collect_episodes, make_envs, mlp, weights_and_targets
from support.experiments import check_quick


@pytest.fixture(scope="module")
def batch():
    envs = make_envs(4, max_episode_steps=12)
    torch.manual_seed(0)
    try:
        yield collect_episodes(envs, mlp([4, 8, 2]), torch.Generator().manual_seed(0), seed=0)
    finally:
        envs.close()


def test_one_complete_episode_per_environment(batch):
    """Each row is one episode: ones then zeros in the mask, ended by exactly one done or truncation."""
    mask = batch.mask
    assert mask.shape[0] == 4 and (mask[:, 0] == 1).all()
    assert ((mask[:, 1:] - mask[:, :-1]) <= 0).all()                 # no step after the episode ends
    ends = batch.dones + batch.truncated
    assert (ends.sum(1) == 1).all() and (ends * (1 - mask) == 0).all()
    assert (batch.rewards == mask).all()                               # CartPole pays 1 per step
    cut = batch.truncated.sum(1).bool()
    assert (batch.lengths[cut] == 12).all()                            # the time limit is a truncation
    assert (batch.final_obs[~cut] == 0).all()


def test_weightings(batch):
    gamma = 0.9
    g0, _ = weights_and_targets(batch, "return", gamma, None)
    gt, _ = weights_and_targets(batch, "reward_to_go", gamma, None)
    torch.testing.assert_close(g0, gt[:, :1] * batch.mask)
    value = mlp([4, 8, 1])
    adv, targets = weights_and_targets(batch, "advantage", gamma, value)
    with torch.no_grad():
        v = value(batch.obs)[..., 0] * batch.mask
        boot = (batch.truncated * value(batch.final_obs)[:, None, 0]).sum(1)
    # G_t - V(s_t), where a cut episode's G_t continues with gamma^k V(state it was cut in)
    k = batch.lengths[:, None] - torch.arange(batch.mask.shape[1])[None, :]
    expected = (gt + gamma**k * boot[:, None]) * batch.mask - v
    torch.testing.assert_close(adv, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(targets, (adv + v) * batch.mask)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown weightings"):
        get_experiment("cartpole").run(quick=True, weightings=("returns",))
    with pytest.raises(ValueError, match="vector must be"):
        get_experiment("cartpole").run(quick=True, vector="threads")


@pytest.mark.experiment("cartpole")
def test_quick_run_orders_whole_return_below_the_learned_baseline():
    result = check_quick("cartpole")
    assert result.passed, result.failed_checks()
    medians = {row["weighting"]: row["median over seeds"] for row in result.tables["final_return"]}
    assert medians["G_0 (whole return)"] < medians["G_t - V(s_t)"]
    assert result.metrics["env steps per second (all workers)"] > 0
