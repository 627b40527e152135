"""GAE: the book's one-episode table, tool spans, terminal vs truncated, a plain loop and SB3's convention."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pglab.estimators import discounted_returns, gae
from support.reference import batches, reference_gae, sb3_gae

BOOK_V = torch.tensor([0.850, 0.553, 0.417, 0.572, 0.227, 0.456], dtype=torch.float64)
BOOK_R = torch.tensor([0, 0, 0, 0, 0, 1.0], dtype=torch.float64)
# The book prints V to 3 decimals; GAE's coefficients on V sum to at most 2 in absolute value, so
# input rounding moves an advantage by at most 2 * 0.0005, plus 0.0005 for rounding the output.
TOL = 0.0015


@pytest.mark.parametrize("lam, expected", [
    (0.95, [0.025, 0.340, 0.501, 0.363, 0.746, 0.544]),
    (1.0, [0.15, 0.447, 0.583, 0.428, 0.773, 0.544]),
    (0.0, [-0.298, -0.136, 0.156, -0.345, 0.229, 0.544]),
])
def test_seed_004_one_episode_table(lam, expected):
    advantages, returns = gae(BOOK_R, BOOK_V, 1.0, lam)
    assert advantages.tolist() == pytest.approx(expected, abs=TOL)
    torch.testing.assert_close(returns, advantages + BOOK_V)


def test_lambda_one_is_returns_minus_values_and_lambda_zero_is_td_errors():
    gen = torch.Generator().manual_seed(0)
    rewards, values = torch.randn(3, 7, generator=gen, dtype=torch.float64), torch.randn(3, 7, generator=gen,
                                                                                         dtype=torch.float64)
    adv1, _ = gae(rewards, values, 0.9, 1.0)
    torch.testing.assert_close(adv1, discounted_returns(rewards, 0.9) - values)
    adv0, _ = gae(rewards, values, 0.9, 0.0)
    next_values = torch.cat([values[:, 1:], torch.zeros(3, 1, dtype=torch.float64)], 1)
    torch.testing.assert_close(adv0, rewards + 0.9 * next_values - values)


def test_tool_span_is_invisible():
    """An episode with a mask-0 tool span equals the episode with the span cut out (its reward moved back)."""
    gen = torch.Generator().manual_seed(1)
    rewards = torch.randn(8, generator=gen, dtype=torch.float64)
    values = torch.randn(8, generator=gen, dtype=torch.float64)
    mask = torch.tensor([1, 1, 1, 0, 0, 0, 1, 1], dtype=torch.float64)
    adv, ret = gae(rewards, values, 0.95, 0.9, mask=mask)
    keep = mask.bool()
    cut_rewards = rewards[keep].clone()
    cut_rewards[2] += rewards[3:6].sum()
    cut_adv, cut_ret = gae(cut_rewards, values[keep], 0.95, 0.9)
    torch.testing.assert_close(adv[keep], cut_adv)
    torch.testing.assert_close(ret[keep], cut_ret)
    assert (adv[~keep] == 0).all() and (ret[~keep] == 0).all()


def test_terminated_and_truncated_differ_correctly():
    rewards = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
    values = torch.tensor([[0.5, 0.6, 0.7]], dtype=torch.float64)
    terminated, _ = gae(rewards, values, 0.9, 1.0)
    truncated, _ = gae(rewards, values, 0.9, 1.0, bootstrap=torch.tensor([2.0]))
    assert terminated[0, -1].item() == pytest.approx(1.0 - 0.7)
    assert truncated[0, -1].item() == pytest.approx(1.0 + 0.9 * 2.0 - 0.7)
    # The bootstrap reaches every step, discounted by (gamma * lam)^k from the end.
    torch.testing.assert_close(truncated - terminated, 0.9 * 2.0 * torch.tensor([[0.81, 0.9, 1.0]],
                                                                                 dtype=torch.float64))
    # A done inside the row: nothing flows back across it and no bootstrap reaches the first episode.
    dones = torch.tensor([[0.0, 1.0, 0.0]])
    split, _ = gae(rewards, values, 0.9, 1.0, dones=dones, bootstrap=torch.tensor([2.0]))
    first, _ = gae(rewards[:, :2], values[:, :2], 0.9, 1.0)
    torch.testing.assert_close(split[:, :2], first)


def test_mid_row_cut_is_an_episode_end_with_a_bootstrap():
    """A cut inside the row ends the first episode with V(cut state); the second episode is untouched."""
    rewards = torch.tensor([[0.0, 1.0, 0.0, 1.0]], dtype=torch.float64)
    values = torch.tensor([[0.5, 0.6, 0.7, 0.8]], dtype=torch.float64)
    truncated = torch.tensor([[0.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    next_values = torch.tensor([[0.0, 2.0, 0.0, 0.0]], dtype=torch.float64)
    adv, _ = gae(rewards, values, 0.9, 1.0, truncated=truncated, next_values=next_values)
    first, _ = gae(rewards[:, :2], values[:, :2], 0.9, 1.0, bootstrap=torch.tensor([2.0], dtype=torch.float64))
    second, _ = gae(rewards[:, 2:], values[:, 2:], 0.9, 1.0)
    torch.testing.assert_close(adv, torch.cat([first, second], 1))
    assert adv[0, 1].item() == pytest.approx(1.0 + 0.9 * 2.0 - 0.6)


def test_bootstrap_is_a_cut_after_the_last_position_unless_it_ended():
    gen = torch.Generator().manual_seed(2)
    rewards, values = torch.randn(2, 5, generator=gen, dtype=torch.float64), torch.randn(2, 5, generator=gen,
                                                                                         dtype=torch.float64)
    dones = torch.tensor([[0.0] * 5, [0.0, 0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    bootstrap = torch.tensor([3.0, 7.0], dtype=torch.float64)
    short, _ = gae(rewards, values, 0.9, 0.8, dones=dones, bootstrap=bootstrap)
    truncated = torch.tensor([[0.0] * 4 + [1.0], [0.0] * 5], dtype=torch.float64)
    next_values = torch.zeros(2, 5, dtype=torch.float64)
    next_values[0, -1] = 3.0
    long, _ = gae(rewards, values, 0.9, 0.8, dones=dones, truncated=truncated, next_values=next_values)
    torch.testing.assert_close(short, long)


@settings(max_examples=120, deadline=None)
@given(batches(), st.sampled_from([0.0, 0.5, 0.95, 1.0]))
def test_vectorised_equals_plain_loop(batch, lam):
    rewards, mask, dones, truncated, next_values, gamma = batch
    values = torch.linspace(-1, 1, rewards.numel(), dtype=torch.float64).reshape(rewards.shape)
    adv, ret = gae(rewards, values, gamma, lam, mask=mask, dones=dones, truncated=truncated, next_values=next_values)
    want = reference_gae(rewards, values, mask, dones, gamma, lam, truncated, next_values)
    torch.testing.assert_close(adv, want, atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(ret, (adv + values) * mask)


@settings(max_examples=120, deadline=None)
@given(batches(all_policy=True), st.sampled_from([0.0, 0.5, 0.95, 1.0]), st.floats(-3, 3, width=32))
def test_mid_row_truncation_matches_plain_loop_and_sb3(batch, lam, last_value):
    """Autoreset rows with cuts anywhere, plus a bootstrap after the row: ours = the plain loop = SB3's."""
    rewards, mask, dones, truncated, next_values, gamma = batch
    values = torch.linspace(-1, 1, rewards.numel(), dtype=torch.float64).reshape(rewards.shape)
    bootstrap = torch.full(rewards.shape[:1], last_value, dtype=torch.float64)
    adv, _ = gae(rewards, values, gamma, lam, dones=dones, truncated=truncated, next_values=next_values,
                 bootstrap=bootstrap)
    # The plain loop sees the bootstrap as a cut after the last position of every row still open there.
    open_end = (1 - dones[:, -1] - truncated[:, -1]).bool()
    cut, after = truncated.clone(), next_values.clone()
    cut[open_end, -1], after[open_end, -1] = 1.0, last_value
    torch.testing.assert_close(adv, reference_gae(rewards, values, mask, dones, gamma, lam, cut, after),
                               atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(adv, sb3_gae(rewards, values, dones, truncated, next_values, bootstrap, gamma, lam),
                               atol=1e-9, rtol=1e-9)
