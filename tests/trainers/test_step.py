"""policy_gradient_step: skips zero and non-finite gradients bit-exactly, clips, and reports the pre-clip norm."""

import copy

import pytest
import torch

from pglab.estimators import reinforce_loss
from pglab.trainers.step import policy_gradient_step


def test_zero_advantage_step_is_skipped():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    x = torch.randn(4, 3)
    logp = torch.log_softmax(model(x), -1)[:, :1]
    stats = policy_gradient_step(model, opt, reinforce_loss(logp, torch.ones(4), torch.ones(4, 1)))
    assert not stats["skipped"] and stats["grad_norm"] > 0
    before = copy.deepcopy(model.state_dict())
    logp = torch.log_softmax(model(x), -1)[:, :1]
    stats = policy_gradient_step(model, opt, reinforce_loss(logp, torch.zeros(4), torch.ones(4, 1)))
    assert stats == {"loss": 0.0, "grad_norm": 0.0, "skipped": True, "reason": "zero gradient"}
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # Without the guard, Adam's momentum moves the parameters on the same zero gradient.
    logp = torch.log_softmax(model(x), -1)[:, :1]
    policy_gradient_step(model, opt, reinforce_loss(logp, torch.zeros(4), torch.ones(4, 1)), skip_zero_grad=False)
    assert not all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_non_finite_gradient_is_skipped():
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    before = copy.deepcopy(model.state_dict())
    loss = model(torch.tensor([[float("inf"), 1.0]])).sum()
    stats = policy_gradient_step(model, opt, loss)
    assert stats["skipped"] and stats["reason"] == "non-finite gradient"
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_clipping_reports_pre_clip_norm():
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    stats = policy_gradient_step(model, opt, model(torch.tensor([[10.0]])).sum(), max_grad_norm=1.0)
    assert stats["grad_norm"] == pytest.approx(10.0)
    assert model.weight.item() == pytest.approx(-1.0)  # the step used the clipped gradient


def test_unguarded_zero_step_moves_each_reached_parameter_by_lr_times_0_670():
    """Adam's second step on a zero gradient moves each parameter by lr m_hat / sqrt(v_hat), where
    m_hat / sqrt(v_hat) = [b1 (1 - b1) / (1 - b1^2)] / sqrt(b2 (1 - b2) / (1 - b2^2)) = 0.670."""
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 4).double()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(8, 6, dtype=torch.float64)
    policy_gradient_step(model, opt, reinforce_loss(torch.log_softmax(model(x), -1)[:, :1], torch.ones(8),
                                                    torch.ones(8, 1, dtype=torch.float64)), max_grad_norm=None)
    before = [p.detach().clone() for p in model.parameters()]
    zero = reinforce_loss(torch.log_softmax(model(x), -1)[:, :1], torch.zeros(8), torch.ones(8, 1, dtype=torch.float64))
    policy_gradient_step(model, opt, zero, skip_zero_grad=False)
    per_param = (0.9 * 0.1 / (1 - 0.9**2)) / (0.999 * 0.001 / (1 - 0.999**2)) ** 0.5
    moves = torch.cat([(p.detach() - b).abs().flatten() for p, b in zip(model.parameters(), before)])
    torch.testing.assert_close(moves, torch.full_like(moves, 1e-3 * per_param), rtol=1e-4, atol=0)
    assert per_param == pytest.approx(0.670, abs=5e-4)
