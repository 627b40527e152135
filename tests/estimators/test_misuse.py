"""Library misuse: each wrong call is a ValueError saying what to pass, never a silent answer or an AttributeError."""

import math

import pytest
import torch

from pglab.envs.bandit import GaussianBandit
from pglab.estimators import (
    exact_kl,
    gaussian_score,
    group_normalize,
    kl_estimate,
    leave_one_out,
    masked_mean,
    normalize,
    reinforce_loss,
    softmax_score,
    total_variance,
)

NAN, INF = float("nan"), float("inf")
GEN = torch.Generator().manual_seed(0)
BANDIT = GaussianBandit([1.0, 2.0, 4.0])


def test_group_normalize_refuses_groups_of_one():
    with pytest.raises(ValueError, match="at least 2 samples"):
        group_normalize(torch.ones(4, 1))
    with pytest.raises(ValueError, match="at least 2 samples"):
        leave_one_out(torch.ones(4, 1))


@pytest.mark.parametrize("call, name", [
    (lambda: GaussianBandit([1.0, NAN]), "means"),
    (lambda: GaussianBandit([1.0, INF]), "means"),
    (lambda: GaussianBandit([1.0, 2.0], sd=NAN), "sd"),
    (lambda: GaussianBandit([1.0, 2.0], sd=INF), "sd"),
    (lambda: softmax_score(torch.tensor([0.0, NAN]), torch.tensor([0])), "theta"),
    (lambda: gaussian_score(0.0, INF, 1.0), "log_sigma"),
    (lambda: gaussian_score(NAN, 0.0, 1.0), "mu"),
    (lambda: kl_estimate(torch.tensor([[NAN]]), torch.zeros(1, 1)), "logp"),
    (lambda: kl_estimate(torch.zeros(1, 1), torch.tensor([[-INF]])), "ref_logp"),
    (lambda: exact_kl(torch.tensor([[0.0, INF]]), torch.zeros(1, 2)), "logits"),
    (lambda: exact_kl(torch.zeros(1, 2), torch.tensor([[NAN, 0.0]])), "ref_logits"),
    (lambda: BANDIT.exact_total_variance(torch.zeros(3), NAN), "baseline"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_nan_and_inf_are_refused(call, name):
    with pytest.raises(ValueError, match=rf"{name} (contains NaN or inf|must be a finite)"):
        call()


def test_lists_are_accepted_as_tensors():
    assert leave_one_out([1.0, 0.0, 0.0, 1.0]).tolist() == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])
    assert group_normalize([[1.0, 0.0]])[0].tolist() == pytest.approx([1.0, -1.0])
    assert normalize([1.0, 3.0]).tolist() == pytest.approx([-1.0, 1.0])
    assert softmax_score([0.0, 0.0], [1])[0].tolist() == pytest.approx([-0.5, 0.5])
    assert gaussian_score([0.0], [0.0], [1.0])[0].tolist() == pytest.approx([1.0, 0.0])
    assert float(masked_mean([[1.0, 3.0]], [[1, 0]])) == 1.0
    assert float(reinforce_loss([[0.0, -1.0]], [2.0], [[0, 1]])) == 2.0
    assert kl_estimate([[0.0]], [[-1.0]]).tolist() == [[1.0]]
    assert float(total_variance([[0.0], [2.0]])) == 2.0


@pytest.mark.parametrize("call", [
    lambda: leave_one_out("1, 2"),
    lambda: group_normalize(None),
    lambda: normalize([[1.0], [2.0, 3.0]]),
    lambda: softmax_score("theta", [0]),
    lambda: masked_mean([1.0], object()),
], ids=["string", "None", "ragged", "string theta", "object mask"])
def test_what_is_not_a_tensor_is_a_value_error(call):
    with pytest.raises(ValueError, match="must be a tensor"):
        call()


@pytest.mark.parametrize("call", [
    lambda: leave_one_out(torch.ones(2, 3), dim=2),
    lambda: group_normalize(torch.ones(2, 3), dim=-3),
    lambda: masked_mean(torch.ones(2, 3), torch.ones(2, 3), dim=5),
    lambda: leave_one_out(torch.ones(2, 3), dim=1.0),
], ids=["loo", "group_normalize", "masked_mean", "float dim"])
def test_bad_dim_is_a_value_error(call):
    with pytest.raises(ValueError, match="is not an axis"):
        call()


@pytest.mark.parametrize("eps", [-1e-8, NAN, "0"])
def test_negative_eps_is_refused(eps):
    with pytest.raises(ValueError, match="eps must be a number >= 0"):
        group_normalize(torch.ones(2, 3), eps=eps)
    with pytest.raises(ValueError, match="eps must be a number >= 0"):
        normalize(torch.ones(3), eps=eps)


def test_dones_error_describes_dones():
    from pglab.estimators import discounted_returns

    with pytest.raises(ValueError, match=r"dones must hold only 0 and 1 \(1 = the episode ends"):
        discounted_returns(torch.ones(1, 3), dones=torch.tensor([[0.0, 2.0, 0.0]]))


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_sample_actions_needs_a_positive_count(n):
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        BANDIT.sample_actions(torch.zeros(3), GEN, n=n)


@pytest.mark.parametrize("actions", [[3], [-1], [0.5], [True]])
def test_out_of_range_actions_are_refused(actions):
    with pytest.raises(ValueError, match=r"integer arm indices in \[0, 3\)"):
        BANDIT.sample_rewards(torch.tensor(actions), GEN)
    with pytest.raises(ValueError, match=r"integer arm indices in \[0, 3\)"):
        softmax_score(torch.zeros(3), torch.tensor(actions))


def test_theta_of_the_wrong_width_is_refused():
    with pytest.raises(ValueError, match="theta must end in 3 logits"):
        BANDIT.exact_value(torch.zeros(4))
    assert math.isclose(float(BANDIT.exact_value([0.0, 0.0, 0.0])), 7 / 3)


def test_returns_and_gae_accept_lists():
    from pglab.estimators import discounted_returns, gae

    assert discounted_returns([[1.0, 1.0]], 0.5).tolist() == [[1.5, 1.0]]
    advantages, _ = gae([[0.0, 1.0]], [[0.5, 0.5]], 1.0, 1.0, truncated=[[0, 1]], next_values=[[0.0, 0.25]])
    assert advantages.tolist() == [[0.75, 0.75]]
