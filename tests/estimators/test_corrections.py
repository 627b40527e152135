"""Corrections of the sampler/trainer mismatch: each against a plain loop over rows and tokens, masks that drop exactly
what lies outside their bounds, weights that carry no gradient, and decoupled PPO against PPO times its weight."""

import math

import pytest
import torch

from pglab.estimators import (
    decoupled_ppo,
    geometric_mask,
    masked_is,
    off_policy_sequence_mask,
    ppo_clip,
    truncated_is,
)

B, T = 6, 7


def batch(seed, spread=0.3):
    """old_logp, rollout_logp [B, T] (NaN and -inf off the policy tokens), advantages [B], mask [B, T] with a reply
    of no policy token."""
    gen = torch.Generator().manual_seed(seed)
    old = -3 * torch.rand(B, T, generator=gen, dtype=torch.float64)
    rollout = old + spread * torch.randn(B, T, generator=gen, dtype=torch.float64)
    mask = (torch.rand(B, T, generator=gen) < 0.7).double()
    mask[3] = 0
    adv = torch.randn(B, generator=gen, dtype=torch.float64)
    return torch.where(mask > 0, old, math.nan), torch.where(mask > 0, rollout, -math.inf), adv, mask


def token_ratios(old, rollout, mask):
    """{(b, t): rho_t} over the policy tokens, in Python floats."""
    return {(b, t): math.exp(old[b, t].item() - rollout[b, t].item())
            for b in range(B) for t in range(T) if mask[b, t]}


def reply_ratios(old, rollout, mask):
    """{b: [rho_t of its policy tokens]} for the replies with a policy token."""
    ratios = token_ratios(old, rollout, mask)
    return {b: [ratios[b, t] for t in range(T) if mask[b, t]] for b in range(B) if mask[b].any()}


def spread_over(per_reply, mask):
    """[B, T] with per_reply[b] on each of reply b's policy tokens, 0 elsewhere."""
    out = torch.zeros(B, T, dtype=torch.float64)
    for b, value in per_reply.items():
        out[b] = mask[b] * value
    return out


def loop_truncated(old, rollout, mask, cap, level):
    if level == "token":
        out, flags = torch.zeros(B, T, dtype=torch.float64), []
        for (b, t), rho in token_ratios(old, rollout, mask).items():
            out[b, t], flags = min(rho, cap), flags + [rho > cap]
        return out, sum(flags) / len(flags)
    products = {b: math.prod(r) for b, r in reply_ratios(old, rollout, mask).items()}
    return (spread_over({b: min(p, cap) for b, p in products.items()}, mask),
            sum(p > cap for p in products.values()) / len(products))


def loop_masked(old, rollout, mask, low, high, level):
    if level == "token":
        out, flags = torch.zeros(B, T, dtype=torch.float64), []
        for (b, t), rho in token_ratios(old, rollout, mask).items():
            inside = low <= rho <= high
            out[b, t], flags = rho if inside else 0.0, flags + [not inside]
        return out, sum(flags) / len(flags)
    products = {b: math.prod(r) for b, r in reply_ratios(old, rollout, mask).items()}
    return (spread_over({b: p if low <= p <= high else 0.0 for b, p in products.items()}, mask),
            sum(not low <= p <= high for p in products.values()) / len(products))


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("seed", [0, 1])
def test_truncated_is_matches_its_loop(seed, level):
    old, rollout, _, mask = batch(seed)
    cap = 1.2 if level == "token" else 1.5
    weights, diagnostics = truncated_is(old, rollout, mask, cap=cap, level=level)
    expected, truncated = loop_truncated(old, rollout, mask, cap, level)
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=0)
    assert 0 < truncated < 1 and diagnostics["truncated_fraction"].item() == pytest.approx(truncated, abs=1e-15)


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("seed", [0, 1])
def test_masked_is_matches_its_loop(seed, level):
    old, rollout, _, mask = batch(seed)
    low, high = (0.8, 1.25) if level == "token" else (0.5, 2.0)
    weights, diagnostics = masked_is(old, rollout, mask, low=low, high=high, level=level)
    expected, masked = loop_masked(old, rollout, mask, low, high, level)
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=0)
    assert 0 < masked < 1 and diagnostics["masked_fraction"].item() == pytest.approx(masked, abs=1e-15)


def test_masks_drop_exactly_the_ratios_outside_their_bounds():
    """Token ratios 0.3, 0.6, 1.0, 1.9, 2.2 against [0.5, 2]: IcePop keeps the middle three, weighted by their ratio;
    token TIS at cap 2 truncates the last one only."""
    rho = torch.tensor([[0.3, 0.6, 1.0, 1.9, 2.2]], dtype=torch.float64)
    mask = torch.ones(1, 5)
    weights, diagnostics = masked_is(rho.log(), torch.zeros(1, 5), mask, low=0.5, high=2.0)
    torch.testing.assert_close(weights, torch.tensor([[0.0, 0.6, 1.0, 1.9, 0.0]], dtype=torch.float64))
    assert diagnostics["masked_fraction"].item() == pytest.approx(0.4)
    weights, diagnostics = truncated_is(rho.log(), torch.zeros(1, 5), mask, cap=2.0)
    torch.testing.assert_close(weights, torch.tensor([[0.3, 0.6, 1.0, 1.9, 2.0]], dtype=torch.float64))
    assert diagnostics["truncated_fraction"].item() == pytest.approx(0.2)


@pytest.mark.parametrize("seed", [0, 1])
def test_geometric_mask_matches_its_loop(seed):
    old, rollout, _, mask = batch(seed)
    keep, diagnostics = geometric_mask(old, rollout, mask, low=0.95, high=1.05)
    replies = reply_ratios(old, rollout, mask)
    geometric = {b: math.prod(r) ** (1 / len(r)) for b, r in replies.items()}
    kept = {b: float(0.95 <= g <= 1.05) for b, g in geometric.items()}
    assert torch.equal(keep, spread_over(kept, mask))
    dropped = sum(1 - k for k in kept.values()) / len(kept)
    assert 0 < dropped < 1 and diagnostics["masked_fraction"].item() == pytest.approx(dropped, abs=1e-15)


def test_geometric_mask_does_not_grow_with_length():
    """Each token ratio 1.02: the product passes 2 at 36 tokens, the geometric mean stays 1.02."""
    log_rho = torch.full((2, 40), math.log(1.02), dtype=torch.float64)
    mask = torch.ones(2, 40)
    mask[0, 5:] = 0
    keep, _ = geometric_mask(log_rho, torch.zeros(2, 40), mask, low=0.98, high=1.03)
    assert torch.equal(keep, mask.double())
    weights, _ = masked_is(log_rho, torch.zeros(2, 40), mask, low=0.5, high=2.0, level="sequence")
    assert weights[0, :5].gt(0).all() and (weights[1] == 0).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_off_policy_sequence_mask_matches_its_loop(seed):
    rollout, logp, adv, mask = batch(seed)
    delta = 0.03
    keep, diagnostics = off_policy_sequence_mask(logp, rollout, adv, mask, delta=delta)
    expected = torch.zeros(B, T, dtype=torch.float64)
    for b, ratios in reply_ratios(rollout, logp, mask).items():
        drift = sum(math.log(r) for r in ratios) / len(ratios)
        expected[b] = mask[b] * float(not (adv[b] < 0 and drift > delta))
    assert torch.equal(keep, expected)
    dropped = ((expected == 0) & (mask > 0)).sum().item() / mask.sum().item()
    assert 0 < dropped < 1 and diagnostics["masked_fraction"].item() == pytest.approx(dropped, abs=1e-15)
    assert (keep[(adv >= 0)[:, None].expand(B, T) & (mask > 0)] == 1).all()   # positive replies are never dropped


def test_decoupled_ppo_is_ppo_against_the_proximal_policy_times_its_weight():
    proximal, rollout, adv, mask = batch(2)
    gen = torch.Generator().manual_seed(3)
    logp = torch.where(mask > 0, proximal + 0.2 * torch.randn(B, T, generator=gen, dtype=torch.float64), 0.0)
    logp.requires_grad_()
    loss, diagnostics = decoupled_ppo(logp, proximal, rollout, adv, mask, epsilon=0.1, dual_clip=3.0)
    ppo, ppo_diagnostics = ppo_clip(logp, proximal, adv, mask, epsilon=0.1, dual_clip=3.0)
    expected = torch.zeros(B, T, dtype=torch.float64)
    for (b, t), rho in token_ratios(proximal, rollout, mask).items():
        expected[b, t] = rho
    torch.testing.assert_close(loss, ppo * expected, rtol=1e-12, atol=0)
    assert diagnostics.keys() == ppo_diagnostics.keys()
    same, _ = decoupled_ppo(logp, proximal, proximal, adv, mask, epsilon=0.1, dual_clip=3.0)
    assert torch.equal(same, ppo)                    # no mismatch: plain PPO against the proximal policy


def test_corrections_pass_no_gradient():
    old, rollout, adv, mask = batch(4)
    old, rollout, adv = (x.clone().requires_grad_() for x in (old, rollout, adv))
    outputs = [truncated_is(old, rollout, mask, cap=2.0, level="sequence"),
               masked_is(old, rollout, mask, low=0.5, high=2.0),
               geometric_mask(old, rollout, mask, low=0.9, high=1.1),
               off_policy_sequence_mask(old, rollout, adv, mask, delta=0.01)]
    for weights, diagnostics in outputs:
        assert not weights.requires_grad and not any(d.requires_grad for d in diagnostics.values())
        assert torch.isfinite(weights).all() and (weights[mask == 0] == 0).all()


@pytest.mark.parametrize("call, fix", [
    (lambda o, r, m: truncated_is(o, r, m, cap=0.0), "cap must be a number > 0"),
    (lambda o, r, m: truncated_is(o, r, m, cap=2.0, level="batch"), "token, sequence"),
    (lambda o, r, m: masked_is(o, r, m, low=2.0, high=0.5), "low must not exceed high"),
    (lambda o, r, m: geometric_mask(o, r[:, :3], m, low=0.5, high=2.0), "same shape"),
    (lambda o, r, m: off_policy_sequence_mask(o, r, torch.ones(B), m, delta=-1.0), "delta must be a number >= 0"),
], ids=["cap", "level", "bounds", "shape", "delta"])
def test_errors_name_the_fix(call, fix):
    old, rollout, _, mask = batch(0)
    with pytest.raises(ValueError, match=fix):
        call(old, rollout, mask)
