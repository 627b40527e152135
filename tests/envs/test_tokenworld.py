"""TokenWorld: exact values against the seed and the binomial closed form, advantages, sampler, tabular policy."""

import math

import pytest
import torch

from pglab.envs.tokenworld import A, TokenWorld, at_states
from pglab.estimators import discounted_returns, gae, reinforce_loss

WORLD = TokenWorld()
SIGMAS = 4.0


def random_table(seed: int, low: float = 0.1, high: float = 0.9) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return low + (high - low) * torch.rand(WORLD.length, WORLD.length + 1, generator=gen, dtype=torch.float64)


def test_seed_004_exact_values_to_4_digits():
    v, q, adv = WORLD.exact_values(0.6), WORLD.exact_q(0.6), WORLD.exact_advantages(0.6)
    assert round(float(v[0, 0]), 4) == 0.5443
    assert round(float(q[0, 0, A]), 4) == 0.6826
    assert round(float(q[0, 0, 1 - A]), 4) == 0.3370
    assert round(float(adv[0, 0, A]), 4) == 0.1382
    assert round(float(adv[0, 0, 1 - A]), 4) == -0.2074


@pytest.mark.parametrize("p", [0.0, 0.3, 0.6, 1.0])
@pytest.mark.parametrize("length, need", [(6, 4), (5, 0), (3, 3)])
def test_constant_policy_matches_binomial_tail(p, length, need):
    world = TokenWorld(length, need)
    v = world.exact_values(p)
    for t in range(length + 1):
        for k in range(t + 1):
            m = length - t
            tail = sum(math.comb(m, j) * p**j * (1 - p) ** (m - j) for j in range(m + 1) if k + j >= need)
            assert float(v[t, k]) == pytest.approx(tail, abs=1e-12)


def test_advantages_average_to_zero_under_any_policy():
    p = random_table(0)
    adv = WORLD.exact_advantages(p)
    torch.testing.assert_close(p * adv[..., A] + (1 - p) * adv[..., 1 - A], torch.zeros_like(p), atol=1e-14, rtol=0)


@pytest.mark.parametrize("shift", [0.0, 5.0])
def test_exact_values_equal_enumeration_and_the_shift_adds_a_constant(shift):
    world, p = TokenWorld(shift=shift), random_table(1)
    replies = world.all_replies()
    probs = world.reply_probs(p, replies)
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-12)
    assert float(world.exact_values(p)[0, 0]) == pytest.approx(float((probs * world.rewards(replies)[:, -1]).sum()),
                                                               abs=1e-12)
    torch.testing.assert_close(world.exact_values(p), WORLD.exact_values(p) + shift)


def test_exact_values_are_batched_per_policy():
    tables = torch.stack([random_table(2), random_table(3)])
    v = WORLD.exact_values(tables)
    torch.testing.assert_close(v[1], WORLD.exact_values(tables[1]))


def test_sampler_frequencies_match_exact_values():
    p, n = random_table(4), 200_000
    tokens = WORLD.sample(p, n, torch.Generator().manual_seed(0))
    success = WORLD.rewards(tokens)[:, -1]
    v, q = WORLD.exact_values(p), WORLD.exact_q(p)
    target = float(v[0, 0])
    assert abs(float(success.mean()) - target) <= SIGMAS * math.sqrt(target * (1 - target) / n)
    for first in (0, 1):
        chosen = success[tokens[:, 0] == first]
        target = float(q[0, 0, first])
        assert abs(float(chosen.mean()) - target) <= SIGMAS * math.sqrt(target * (1 - target) / len(chosen))
    # Visit frequency of every state (t, k) against its probability by enumeration.
    replies = WORLD.all_replies()
    probs = WORLD.reply_probs(p, replies)
    states, exact_states = WORLD.states(tokens), WORLD.states(replies)
    for t in range(WORLD.length + 1):
        for k in range(t + 1):
            exact = float(probs[exact_states[:, t] == k].sum())
            freq = float((states[:, t] == k).double().mean())
            assert abs(freq - exact) <= SIGMAS * math.sqrt(exact * (1 - exact) / n) + 1e-12


def test_batched_sampler_uses_each_policy():
    tables = torch.stack([torch.full((6, 7), 0.9, dtype=torch.float64), torch.full((6, 7), 0.1,
                                                                                   dtype=torch.float64)])
    tokens = WORLD.sample(tables, 5000, torch.Generator().manual_seed(1))
    assert tokens.shape == (2, 5000, 6)
    share = tokens.double().mean((1, 2))
    assert abs(float(share[0]) - 0.9) < 0.01 and abs(float(share[1]) - 0.1) < 0.01
    assert WORLD.sample(0.0, 3, torch.Generator()).sum() == 0 and WORLD.sample(1.0, 3, torch.Generator()).all()


def test_tabular_policy_log_probs_and_state_lookup():
    p = random_table(5)
    replies = WORLD.all_replies()
    logp = WORLD.log_probs(torch.logit(p), replies)
    torch.testing.assert_close(logp.sum(-1).exp(), WORLD.reply_probs(p, replies))
    values = at_states(WORLD.exact_values(p), WORLD.states(replies))
    # Along every reply, V(s_t+1) - V(s_t) is the exact advantage of the token taken (deterministic transitions).
    adv = WORLD.exact_advantages(p)
    k = WORLD.states(replies)[:, :-1]
    t = torch.arange(WORLD.length)
    torch.testing.assert_close(values[:, 1:] - values[:, :-1], adv[t, k, replies])


def test_reinforce_estimate_is_unbiased_for_the_exact_gradient():
    """The training loss's gradient, averaged over replies, equals d V(start) / d logits within standard errors."""
    logits = torch.logit(random_table(6, 0.3, 0.7)).requires_grad_(True)
    WORLD.exact_values(torch.sigmoid(logits))[0, 0].backward()
    exact = logits.grad.clone()
    n = 100_000
    tokens = WORLD.sample(torch.sigmoid(logits.detach()), n, torch.Generator().manual_seed(2))
    returns = discounted_returns(WORLD.rewards(tokens))
    # Per-reply estimate in closed form: sum_t G_t (a_t - p(s_t)) at the visited state.
    k = WORLD.states(tokens)[:, :-1]
    p = torch.sigmoid(logits.detach())[torch.arange(WORLD.length), k]
    flat = (torch.arange(WORLD.length) * (WORLD.length + 1) + k)
    per_reply = torch.zeros(n, logits.numel(), dtype=torch.float64).scatter_add_(
        1, flat, returns * (tokens - p)).view(n, *logits.shape)
    mean, se = per_reply.mean(0), per_reply.std(0) / math.sqrt(n)
    assert ((mean - exact).abs() <= SIGMAS * se + 1e-12).all()
    # The loss used in training gives exactly minus that mean.
    logits.grad = None
    loss = reinforce_loss(WORLD.log_probs(logits, tokens), returns, torch.ones_like(returns), mode="constant",
                          norm_const=n)
    loss.backward()
    torch.testing.assert_close(-logits.grad, mean)


def test_seed_004_episode_ababaa():
    """Rewards, exact advantages (3 decimals) and GAE(0.95) from the book's printed V column."""
    tokens = torch.tensor([[1, 0, 1, 0, 1, 1]])
    rewards = WORLD.rewards(tokens)[0]
    assert rewards.tolist() == [0, 0, 0, 0, 0, 1]
    values = at_states(WORLD.exact_values(0.6), WORLD.states(tokens))[0]
    exact = values[1:] - values[:-1]
    assert exact.tolist() == pytest.approx([0.138, -0.207, 0.173, -0.288, 0.240, 0.400], abs=5e-4)
    book_v = torch.tensor([0.850, 0.553, 0.417, 0.572, 0.227, 0.456], dtype=torch.float64)
    advantages, _ = gae(rewards, book_v, 1.0, 0.95)
    # V printed to 3 decimals: GAE's coefficients on V sum to <= 2 in absolute value, plus output rounding.
    assert advantages.tolist() == pytest.approx([0.025, 0.340, 0.501, 0.363, 0.746, 0.544], abs=0.0015)


@pytest.mark.parametrize("call, message", [
    (lambda: TokenWorld(6, 7), "need <= length"),
    (lambda: WORLD.exact_values(torch.zeros(5, 7)), "pass a scalar or a table"),
    (lambda: WORLD.exact_values(1.5), "probabilities"),
    (lambda: WORLD.rewards(torch.zeros(2, 5, dtype=torch.int64)), "6-token replies"),
    (lambda: WORLD.sample(0.5, 0, torch.Generator()), "positive number"),
])
def test_errors_say_what_to_pass(call, message):
    with pytest.raises(ValueError, match=message):
        call()
