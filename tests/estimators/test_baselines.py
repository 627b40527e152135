"""Baselines: course-ch7's group of four, leave-one-out identities, EMA, and b*."""

import pytest
import torch

from pglab.estimators import EMABaseline, group_normalize, leave_one_out, normalize, optimal_constant_baseline

GROUP = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=torch.float64)
SIGNS = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)


def test_seed_001_group_of_four():
    torch.testing.assert_close(group_normalize(GROUP, scale="none"), 0.5 * SIGNS)
    torch.testing.assert_close(leave_one_out(GROUP), 2 / 3 * SIGNS)
    assert group_normalize(GROUP).tolist() == pytest.approx(SIGNS.tolist(), abs=1e-6)  # eps = 1e-8
    assert group_normalize(GROUP, unbiased=True).tolist() == pytest.approx((0.8660 * SIGNS).tolist(), abs=5e-5)


def test_leave_one_out_is_rescaled_centring():
    gen = torch.Generator().manual_seed(0)
    rewards = torch.randn(5, 7, 3, generator=gen, dtype=torch.float64)
    for dim in (0, 1, 2, -1):
        n = rewards.shape[dim]
        centred = rewards - rewards.mean(dim, keepdim=True)
        torch.testing.assert_close(leave_one_out(rewards, dim=dim), n / (n - 1) * centred, atol=1e-13, rtol=0)


def test_leave_one_out_is_bit_identical_under_a_shift():
    gen = torch.Generator().manual_seed(0)
    rewards = torch.randint(0, 2, (64, 16), generator=gen).double()
    for shift in (5.0, -3.0, 100.0):
        assert torch.equal(leave_one_out(rewards + shift), leave_one_out(rewards))
    halves = torch.randint(-8, 8, (32, 5), generator=gen).double() / 4  # exactly representable rewards
    assert torch.equal(leave_one_out(halves + 7.25), leave_one_out(halves))


def test_group_normalize_batch_scale():
    rewards = torch.tensor([[0.0, 2.0], [0.0, 4.0]], dtype=torch.float64)
    centred = torch.tensor([[-1.0, 1.0], [-2.0, 2.0]], dtype=torch.float64)
    torch.testing.assert_close(group_normalize(rewards, scale="batch", eps=0.0), centred / rewards.std(correction=0))
    torch.testing.assert_close(group_normalize(rewards, scale="group", eps=0.0), centred.sign())


def test_normalize_has_zero_mean_unit_std():
    x = torch.arange(10, dtype=torch.float64)
    y = normalize(x)
    assert abs(y.mean().item()) < 1e-12
    assert y.std(correction=0).item() == pytest.approx(1.0, abs=1e-7)


def test_ema_baseline():
    ema = EMABaseline(init=0.0, decay=0.5)
    assert [ema.update(x) for x in (4.0, 4.0, 0.0)] == [2.0, 3.0, 1.5]
    running = EMABaseline(init=10.0, decay=None)
    assert [running.update(x) for x in (1.0, 2.0, 6.0)] == [1.0, 1.5, 3.0]


def test_optimal_constant_baseline_exercise_7_6():
    """Two noiseless arms at p = 0.9, enumerated with exact weights: b* = (1-p) q1 + p q2 = 0.1."""
    p = 0.9
    rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)
    scores = torch.tensor([[1 - p, -(1 - p)], [-p, p]], dtype=torch.float64)
    weights = torch.tensor([9, 1])  # the two arms in proportion 0.9 : 0.1
    b = optimal_constant_baseline(rewards.repeat_interleave(weights), scores.repeat_interleave(weights, 0))
    assert b.item() == pytest.approx(0.1, abs=1e-12)
