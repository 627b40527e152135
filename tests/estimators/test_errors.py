"""Every error that SPEC lists raises ValueError with a message that names the fix."""

import pytest
import torch

from pglab.estimators import (
    aggregate_loss,
    discounted_returns,
    gae,
    group_normalize,
    kl_estimate,
    kl_shaped_rewards,
    leave_one_out,
    masked_mean,
    reinforce_loss,
)
from pglab.runner import run_seeds

R = torch.ones(2, 3)
M = torch.ones(2, 3)
NAN = torch.tensor([[1.0, float("nan"), 0.0]])
INF = torch.tensor([[1.0, float("inf"), 0.0]])


def _train(seed):
    yield seed


@pytest.mark.parametrize("call, fix", [
    (lambda: aggregate_loss(R, M, "sum"), "token_mean"),
    (lambda: reinforce_loss(R, torch.ones(2), M, "mean"), "token_mean"),
    (lambda: group_normalize(R, scale="std"), "group, batch, none"),
    (lambda: kl_estimate(R, R, "k4"), "k1, k2, k3"),
    (lambda: run_seeds(_train, [0], backend="threads"), "serial, process, ray"),
], ids=["aggregate_loss", "reinforce_loss", "group_normalize", "kl_estimate", "run_seeds"])
def test_unknown_mode(call, fix):
    with pytest.raises(ValueError, match="unknown") as err:
        call()
    assert fix in str(err.value)


def test_constant_mode_needs_norm_const():
    with pytest.raises(ValueError, match="norm_const"):
        aggregate_loss(R, M, "constant")
    with pytest.raises(ValueError, match="norm_const"):
        reinforce_loss(R, torch.ones(2), M, "constant", norm_const=0)


def test_group_of_one():
    with pytest.raises(ValueError, match="at least 2"):
        leave_one_out(torch.ones(4, 1))
    with pytest.raises(ValueError, match="at least 2"):
        group_normalize(torch.ones(4, 1), unbiased=True)


@pytest.mark.parametrize("call", [
    lambda: discounted_returns(R, 1.0, mask=torch.ones(2, 4)),
    lambda: discounted_returns(R, 1.0, dones=torch.ones(3)),
    lambda: gae(R, torch.ones(2, 4), 1.0, 0.9),
    lambda: gae(R, R, 1.0, 0.9, bootstrap=torch.ones(3)),
    lambda: aggregate_loss(R, torch.ones(3, 3)),
    lambda: masked_mean(R, torch.ones(2, 2)),
    lambda: reinforce_loss(R, torch.ones(3), M),
    lambda: reinforce_loss(R, torch.ones(2, 4), M),
    lambda: kl_estimate(R, torch.ones(2, 4)),
    lambda: kl_shaped_rewards(torch.ones(3), R, R, M, 0.1),
], ids=["mask", "dones", "values", "bootstrap", "agg-mask", "masked_mean", "adv-B", "adv-BT", "kl", "score"])
def test_shape_mismatch(call):
    with pytest.raises(ValueError, match="shape|B="):
        call()


@pytest.mark.parametrize("bad", [NAN, INF], ids=["nan", "inf"])
@pytest.mark.parametrize("call", [
    lambda r: discounted_returns(r),
    lambda r: gae(r, torch.zeros_like(r), 1.0, 0.95),
    lambda r: leave_one_out(r),
    lambda r: group_normalize(r),
    lambda r: reinforce_loss(torch.zeros_like(r), r, torch.ones_like(r)),
    lambda r: kl_shaped_rewards(r[:, 1], torch.zeros_like(r), torch.zeros_like(r), torch.ones_like(r), 0.1),
], ids=["returns", "gae", "loo", "grpo", "reinforce", "kl-score"])
def test_non_finite_rewards(call, bad):
    with pytest.raises(ValueError, match="NaN or inf"):
        call(bad)


def test_mask_must_be_binary():
    with pytest.raises(ValueError, match="only 0 and 1"):
        discounted_returns(R, mask=torch.full((2, 3), 0.5))


def test_parameter_ranges():
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns(R, 1.5)
    with pytest.raises(ValueError, match="lam"):
        gae(R, R, 1.0, -0.1)


CUT = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize("call, fix", [
    (lambda: gae(R, R, 1.0, 0.9, truncated=CUT), "pass both"),
    (lambda: discounted_returns(R, next_values=R), "pass both"),
    (lambda: gae(R, R, 1.0, 0.9, dones=CUT, truncated=CUT, next_values=R), "set one of them to 0"),
    (lambda: discounted_returns(R, truncated=CUT, next_values=torch.ones(2, 4)), "same shape"),
    (lambda: gae(R, R, 1.0, 0.9, truncated=CUT, next_values=torch.full((2, 3), float("nan"))), "NaN or inf"),
    (lambda: discounted_returns(R, truncated=0.5 * CUT, next_values=R), "only 0 and 1"),
], ids=["no-next-values", "no-truncated", "done-and-truncated", "shape", "nan", "not-binary"])
def test_truncation_misuse(call, fix):
    with pytest.raises(ValueError) as err:
        call()
    assert fix in str(err.value)
