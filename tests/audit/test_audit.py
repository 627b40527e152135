"""audit_loss: exact against a brute-force enumeration of whole batches, Monte Carlo against exact, bad losses."""

import itertools
import math

import pytest
import torch

from pglab.audit import SIGNATURE, LossError, audit_loss, placement_loss
from pglab.audit.presets import advantage_loss
from pglab.envs.enumerable import EnumerablePolicy
from pglab.estimators import aggregate_loss, normalize, reinforce_loss


def flat(grads):
    return torch.cat([g.flatten() for g in grads])


def brute_force(loss_fn, policy, group_size):
    """E[g] and E|g - E g|^2 over every ordered batch, with the gradient taken through the policy itself."""
    params = policy.parameters()
    p, n = policy.rewards.shape
    first, second = 0.0, 0.0
    logp, ref = policy.token_logp()
    for rows in itertools.product(range(n), repeat=p * group_size):
        idx = torch.tensor(rows).view(p, group_size)
        prob = float(logp.sum(-1).exp().detach().gather(1, idx).prod())
        x = torch.arange(p)[:, None].expand_as(idx)
        loss = loss_fn(logp[x, idx].reshape(p * group_size, -1), ref[x, idx].reshape(p * group_size, -1),
                       policy.rewards[x, idx].reshape(-1), policy.mask[idx.reshape(-1)],
                       torch.arange(p).repeat_interleave(group_size))
        g = flat(torch.autograd.grad(loss, params, retain_graph=True))
        first = first + prob * g
        second = second + prob * float(g @ g)
    return first, second - float(first @ first)


def order_dependent(logp, ref_logp, rewards, mask, group):
    """Only the first reply of each group of two is used: not symmetric within a group."""
    return -(rewards[::2, None] * logp[::2] * mask[::2]).sum() / 2


def batch_whitened(logp, ref_logp, rewards, mask, group):
    """Rewards normalised over the whole batch: every group's rows depend on the other groups."""
    return reinforce_loss(logp, normalize(rewards), mask, "seq_mean_token_sum")


LOSSES = {
    "k1 in the reward (separable, symmetric)": placement_loss("k1", "reward", 0.5, reward_to_go=True),
    "k3 in the loss, token mean (coupled: variable lengths)": advantage_loss("rloo", "token_mean", beta=0.5),
    "first row of each group (order-dependent)": order_dependent,
}
BRUTE = {"k1 in the reward": LOSSES["k1 in the reward (separable, symmetric)"],
         "batch-whitened rewards (coupled)": batch_whitened, "first row (order-dependent)": order_dependent}


@pytest.mark.parametrize("name", BRUTE)
def test_exact_mode_equals_brute_force_over_whole_batches(name):
    """Two prompts, four replies each, groups of two: all 256 ordered batches."""
    policy = EnumerablePolicy(prompts=2, vocab=2, length=2, seed=0)
    report = audit_loss(BRUTE[name], policy, beta=0.5, group_size=2)
    expected, variance = brute_force(BRUTE[name], policy, 2)
    assert report.exact
    assert torch.allclose(report.gradient, expected, atol=1e-12)
    assert report.total_variance == pytest.approx(variance, rel=1e-10)


def test_structure_is_detected():
    policy = EnumerablePolicy(prompts=2, vocab=3, length=2, eos=True, seed=0)
    structures = {name: audit_loss(fn, policy, beta=0.5, group_size=2).structure for name, fn in LOSSES.items()}
    assert structures == {
        "k1 in the reward (separable, symmetric)": "multisets, group by group",
        "k3 in the loss, token mean (coupled: variable lengths)": "multisets, every combination of groups",
        "first row of each group (order-dependent)": "ordered groups, group by group",
    }


@pytest.mark.parametrize("parametrisation", ["table", "gpt2"])
@pytest.mark.parametrize("eos", [False, True])
def test_k1_in_the_reward_is_unbiased_exactly(parametrisation, eos):
    policy = EnumerablePolicy(prompts=2, vocab=3, length=2, eos=eos, parametrisation=parametrisation, seed=1)
    for rtg in (False, True):
        report = audit_loss(placement_loss("k1", "reward", 0.5, reward_to_go=rtg), policy, beta=0.5, group_size=3)
        assert report.exact and report.relative_bias < 1e-9 and report.follows == "reverse_kl"
        assert report.cosine == pytest.approx(1.0, abs=1e-12) and report.scale == pytest.approx(1.0, abs=1e-10)


def test_monte_carlo_agrees_with_exact_within_three_standard_errors():
    """The sampled scale (a linear statistic of the batch mean) within 3 of its own se of the exact one."""
    policy = EnumerablePolicy(prompts=2, vocab=2, length=2, seed=2)
    loss_fn = advantage_loss("grpo", "seq_mean_token_mean", beta=0.5, unbiased=True, eps=1e-6)
    exact = audit_loss(loss_fn, policy, beta=0.5, group_size=3)
    sampled = audit_loss(loss_fn, policy, beta=0.5, group_size=3, monte_carlo=True, samples=4000, seed=3)
    assert exact.exact and not sampled.exact and sampled.batches == 4000
    se = sampled.standard_errors["scale"]
    assert 0 < se < 0.05 * abs(exact.scale)
    assert abs(sampled.scale - exact.scale) <= 3 * se
    # The sampled gradient differs from the exact one by noise of norm about sqrt(total variance / S).
    noise = (sampled.gradient - exact.gradient).norm() / math.sqrt(exact.total_variance / 4000)
    assert 0.3 < noise < 3
    assert sampled.total_variance == pytest.approx(exact.total_variance, rel=0.15)  # 4000 draws: se of a variance


def test_max_batches_switches_to_monte_carlo():
    policy = EnumerablePolicy(prompts=2, vocab=2, length=2, seed=2)
    report = audit_loss(placement_loss("k1", "reward", 0.5), policy, beta=0.5, group_size=3, max_batches=5,
                        samples=200)
    assert not report.exact and report.structure == "monte carlo" and set(report.standard_errors) == {
        "scale", "relative_bias"}


def bad_losses():
    def non_scalar(logp, ref_logp, rewards, mask, group):
        return -(rewards[:, None] * logp).sum(-1)

    def detached(logp, ref_logp, rewards, mask, group):
        return reinforce_loss(logp, rewards, mask).detach()

    def constant(logp, ref_logp, rewards, mask, group):
        return rewards.mean()

    def nan(logp, ref_logp, rewards, mask, group):
        return aggregate_loss(-rewards[:, None] * logp, mask) * float("nan")

    def nan_gradient(logp, ref_logp, rewards, mask, group):
        return torch.where(mask > -1, logp, torch.sqrt(-logp - 100)).sum()   # finite value, NaN gradient

    def four_arguments(logp, ref_logp, rewards, mask):
        return logp.sum()

    return {"non_scalar": (non_scalar, "not a scalar"), "detached": (detached, "no gradient path"),
            "constant": (constant, "no gradient path"), "nan": (nan, "finite"),
            "nan_gradient": (nan_gradient, "NaN or inf"), "four_arguments": (four_arguments, "five arguments"),
            "not_callable": (3, "not a function")}


@pytest.mark.parametrize("name", bad_losses())
def test_malformed_loss_gets_one_line_naming_the_signature(name):
    loss_fn, words = bad_losses()[name]
    policy = EnumerablePolicy(prompts=1, vocab=2, length=1, seed=0)
    with pytest.raises(LossError) as err:
        audit_loss(loss_fn, policy, beta=0.1, group_size=2)
    message = str(err.value)
    assert words in message and SIGNATURE in message and "\n" not in message


def test_bad_arguments_are_refused():
    policy = EnumerablePolicy(prompts=1, vocab=2, length=1, seed=0)
    fn = placement_loss("k1", "reward", 0.1)
    with pytest.raises(ValueError, match="group_size"):
        audit_loss(fn, policy, beta=0.1, group_size=0)
    with pytest.raises(ValueError, match="beta"):
        audit_loss(fn, policy, beta=float("nan"), group_size=2)
    with pytest.raises(ValueError, match="samples >= 2"):
        audit_loss(fn, policy, beta=0.1, group_size=2, samples=1)
