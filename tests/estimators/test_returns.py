"""backward_scan and discounted_returns: the book's numbers, mask, done and truncation semantics, a plain loop."""

import pytest
import torch
from hypothesis import given, settings

from pglab.estimators import backward_scan, discounted_returns
from support.reference import batches, reference_returns


def test_seed_004_discounted_returns():
    rewards = torch.tensor([0.0, 0, 0, 0, 0, 1])
    assert discounted_returns(rewards, 1.0).tolist() == [1.0] * 6
    expected = [0.5905, 0.6561, 0.729, 0.81, 0.9, 1.0]
    assert discounted_returns(rewards, 0.9).tolist() == pytest.approx(expected, abs=5e-5)


def test_seed_000_reward_to_go_under_per_call_cost():
    """Four calls with tool output between them; cost 0.1 at each call's last token, outcome 1 on the last."""
    call_lengths, tool_lengths = [3, 2, 4, 2], [5, 3, 6, 0]
    mask, first_tokens = [], []
    for call, tool in zip(call_lengths, tool_lengths):
        first_tokens.append(len(mask))
        mask += [1] * call + [0] * tool
    mask = torch.tensor(mask, dtype=torch.float64)
    call_end = mask * (1 - torch.cat([mask[1:], torch.zeros(1, dtype=torch.float64)]))
    rewards = -0.1 * call_end
    rewards[call_end.nonzero().max()] += 1.0
    to_go = discounted_returns(rewards, 1.0, mask=mask)
    assert rewards.sum().item() == pytest.approx(0.6)
    assert to_go[first_tokens].tolist() == pytest.approx([0.6, 0.7, 0.8, 0.9], abs=1e-12)
    assert (to_go[mask == 0] == 0).all()


def test_reward_on_tool_token_is_credited_to_the_previous_action():
    rewards = torch.tensor([[5.0, 0.0, 2.0, 0.0, 1.0]])
    mask = torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.0]])
    # 5 before any action is ignored; 2 belongs to position 1, 1 belongs to position 3.
    assert discounted_returns(rewards, 0.5, mask=mask).tolist() == [[0.0, 2.5, 0.0, 1.0, 0.0]]


def test_dones_stop_the_scan():
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    dones = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    assert discounted_returns(rewards, 0.5, dones=dones).tolist() == [[1.5, 1.0, 1.5, 1.0]]


def test_backward_scan_per_position_factor():
    x = torch.tensor([1.0, 1.0, 1.0])
    factor = torch.tensor([2.0, 3.0, 99.0])  # the factor at t multiplies y_{t+1}
    assert backward_scan(x, factor).tolist() == [1 + 2 * (1 + 3 * 1), 1 + 3 * 1, 1]


@settings(max_examples=150, deadline=None)
@given(batches())
def test_vectorised_equals_plain_loop(batch):
    rewards, mask, dones, truncated, next_values, gamma = batch
    got = discounted_returns(rewards, gamma, mask=mask, dones=dones, truncated=truncated, next_values=next_values)
    want = reference_returns(rewards, mask, dones, gamma, truncated, next_values)
    torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9)


def test_truncation_bootstraps_the_cut_episode():
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    truncated = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    next_values = torch.tensor([[99.0, 10.0, 99.0, 99.0]])   # read only where truncated
    got = discounted_returns(rewards, 0.5, truncated=truncated, next_values=next_values)
    assert got.tolist() == [[1 + 0.5 * (1 + 0.5 * 10), 1 + 0.5 * 10, 1.5, 1.0]]


def test_cut_on_a_tool_position_bootstraps_the_action_before_it():
    """Mask-0 positions are not time steps: the value after the cut is discounted once, like a reward would be."""
    rewards = torch.tensor([[1.0, 2.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    truncated = torch.tensor([[0.0, 0.0, 1.0]])
    next_values = torch.tensor([[0.0, 0.0, 4.0]])
    got = discounted_returns(rewards, 0.5, mask=mask, truncated=truncated, next_values=next_values)
    assert got.tolist() == [[1 + 0.5 * (2 + 0.5 * 4), 2 + 0.5 * 4, 0.0]]


def test_leading_dims_and_dtype():
    rewards = torch.ones(2, 3, 4, dtype=torch.float64)
    out = discounted_returns(rewards, 1.0)
    assert out.shape == (2, 3, 4) and out.dtype == torch.float64
    assert out[..., 0].eq(4).all()
