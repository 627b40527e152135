"""aggregate_loss's added modes (token_sum, seq_mean_token_sum_norm, prompt_mean): values against a loop, each token's
weight against the table in losses.py, and the errors; the trainers' MODES stay the four they normalise."""

import pytest
import torch

from pglab.estimators import aggregate_loss, reinforce_loss
from pglab.estimators.losses import EXTRA_MODES, MODES

LENGTHS = [4, 8, 0, 2, 6]
MASK = (torch.arange(8)[None] < torch.tensor(LENGTHS)[:, None]).double()
GROUP = torch.tensor([7, 2, 7, 2, 5])
"""Prompt ids in no order: prompt 7 holds replies 0 and 2 (4 tokens), 2 replies 1 and 3 (10 tokens), 5 reply 4."""


def per_token_terms(seed):
    return torch.randn(5, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def loop(x, mode, norm_const=None):
    """The mode's reduction, one reply and one token at a time."""
    sums = [sum(x[b, t].item() for t in range(8) if MASK[b, t]) for b in range(5)]
    if mode == "token_sum":
        return sum(sums)
    if mode == "seq_mean_token_sum_norm":
        return sum(s / (norm_const or 8) for s in sums) / 5
    prompts = {}
    for b, prompt in enumerate(GROUP.tolist()):
        total, tokens = prompts.get(prompt, (0.0, 0))
        prompts[prompt] = (total + sums[b], tokens + LENGTHS[b])
    return sum(total / max(tokens, 1) for total, tokens in prompts.values()) / len(prompts)


@pytest.mark.parametrize("norm_const", [None, 12.0])
@pytest.mark.parametrize("mode", EXTRA_MODES)
@pytest.mark.parametrize("seed", [0, 1])
def test_added_modes_match_their_loop(seed, mode, norm_const):
    x = per_token_terms(seed)
    x[MASK == 0] = 1e6                                   # what sits off the policy tokens never counts
    value = aggregate_loss(x, MASK, mode, norm_const, group=GROUP).item()
    assert value == pytest.approx(loop(x, mode, norm_const), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("mode, weight", [
    ("token_sum", [1.0, 1.0, 0.0, 1.0, 1.0]),
    ("seq_mean_token_sum_norm", [1 / 40, 1 / 40, 0.0, 1 / 40, 1 / 40]),
    ("prompt_mean", [1 / 12, 1 / 30, 0.0, 1 / 30, 1 / 18]),
])
def test_weight_of_each_token(mode, weight):
    """token_sum 1; seq_mean_token_sum_norm 1 / (B C) with C = T = 8; prompt_mean 1 / (P L_g), P = 3 prompts
    (reply 2 has no policy token, so no weight)."""
    x = torch.zeros(5, 8, dtype=torch.float64, requires_grad=True)
    grad = torch.autograd.grad(aggregate_loss(x, MASK, mode, group=GROUP), x)[0]
    assert grad.max(-1).values.tolist() == pytest.approx(weight, rel=1e-12)
    assert (grad[MASK == 0] == 0).all() and torch.equal(grad, grad.max(-1, keepdim=True).values * MASK)


def test_reinforce_loss_takes_the_modes_that_need_no_group():
    logp = torch.zeros(5, 8, dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0], dtype=torch.float64)
    grad = torch.autograd.grad(reinforce_loss(logp, adv, MASK, "seq_mean_token_sum_norm", norm_const=16.0), logp)[0]
    torch.testing.assert_close(grad, -adv[:, None] * MASK / (5 * 16))


def test_trainers_keep_their_four_modes():
    """pg_update splits its normaliser over micro-batches and ranks for these four only (trainers/update.py)."""
    assert MODES == ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "constant")
    assert not set(MODES) & set(EXTRA_MODES)


@pytest.mark.parametrize("call, fix", [
    (lambda x: aggregate_loss(x, MASK, "prompt_mean"), "needs group"),
    (lambda x: aggregate_loss(x, MASK, "prompt_mean", group=GROUP[:3]), "group must be \\[B\\]"),
    (lambda x: aggregate_loss(x, MASK, "seq_mean_token_sum_norm", norm_const=0.0), "positive norm_const"),
    (lambda x: aggregate_loss(x, MASK, "prompt-mean", group=GROUP), "prompt_mean"),
], ids=["no-group", "group-shape", "norm-const", "spelling"])
def test_errors_name_the_fix(call, fix):
    with pytest.raises(ValueError, match=fix):
        call(per_token_terms(0))
