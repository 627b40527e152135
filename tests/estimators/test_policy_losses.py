"""The loss zoo: each vectorised loss against a plain loop over rows and tokens (values, gradients, diagnostics),
gradient isolation, and the closed form at ratio 1 (the on-policy REINFORCE gradient under every aggregation)."""

import math

import pytest
import torch

from pglab.estimators import (
    aggregate_loss,
    cispo,
    dppo,
    entropy_bonus,
    entropy_from_logits,
    gmpo,
    gspo,
    gspo_token,
    ppo_clip,
    sapo,
    trust_region_mask,
)
from pglab.estimators.losses import EXTRA_MODES, MODES

B, T = 6, 7
GROUP = torch.tensor([3, 3, 1, 1, 8, 8])
ZERO = torch.zeros((), dtype=torch.float64)


def batch(seed, *, spread=0.3, pad=-math.inf):
    """logp [B, T] (a leaf with grad; ``pad`` off the policy tokens), old_logp [B, T] (NaN off them), advantages
    [B] with an exact 0, mask [B, T] with a reply of no policy token."""
    gen = torch.Generator().manual_seed(seed)
    logp = -3 * torch.rand(B, T, generator=gen, dtype=torch.float64) - 1e-3
    old = (logp + spread * torch.randn(B, T, generator=gen, dtype=torch.float64)).clamp(max=-1e-3)
    mask = (torch.rand(B, T, generator=gen) < 0.7).double()
    mask[3] = 0
    adv = torch.randn(B, generator=gen, dtype=torch.float64)
    adv[4] = 0.0
    logp = torch.where(mask > 0, logp, pad).requires_grad_()
    return logp, torch.where(mask > 0, old, math.nan), adv, mask


def token_loop(logp, mask, term):
    """[B, T] built one policy token at a time from term(b, t) (0-dim tensors, so the gradient is the loop's own)."""
    return torch.stack([torch.stack([term(b, t) if mask[b, t] else ZERO for t in range(T)]) for b in range(B)])


def reply_loop(logp, mask, reply_term):
    """[B, T] with reply_term(b, [its policy positions]) on each of reply b's policy tokens."""
    rows = []
    for b in range(B):
        positions = [t for t in range(T) if mask[b, t]]
        value = reply_term(b, positions) if positions else ZERO
        rows.append(torch.stack([value if t in positions else ZERO for t in range(T)]))
    return torch.stack(rows)


def clip(x, low, high):
    return min(max(x, low), high)


def advantage(adv, b, t):
    """The advantage of token t of reply b, from [B] or [B, T]."""
    return adv[b, t] if adv.dim() == 2 else adv[b]


def loop_ppo(logp, old, adv, mask, epsilon=0.2, epsilon_high=None, dual_clip=None):
    high = epsilon if epsilon_high is None else epsilon_high

    def term(b, t):
        r, a = torch.exp(logp[b, t] - old[b, t]), advantage(adv, b, t)
        value = -min(r * a, clip(r, 1 - epsilon, 1 + high) * a)
        return min(value, -dual_clip * a) if dual_clip is not None and a < 0 else value
    return token_loop(logp, mask, term)


def loop_gspo(logp, old, adv, mask, epsilon=3e-4, epsilon_high=4e-4):
    def reply_term(b, positions):
        s = torch.exp(sum(logp[b, t] - old[b, t] for t in positions) / len(positions))
        return -min(s * adv[b], clip(s, 1 - epsilon, 1 + epsilon_high) * adv[b])
    return reply_loop(logp, mask, reply_term)


def loop_gspo_token(logp, old, adv, mask, epsilon=3e-4, epsilon_high=4e-4):
    def term(b, t):
        positions = [u for u in range(T) if mask[b, u]]
        s = torch.exp(sum(logp[b, u] - old[b, u] for u in positions) / len(positions)).detach()
        s_t = s * torch.exp(logp[b, t] - logp[b, t].detach())
        a = advantage(adv, b, t)
        return -min(s_t * a, clip(s_t, 1 - epsilon, 1 + epsilon_high) * a)
    return token_loop(logp, mask, term)


def loop_gmpo(logp, old, adv, mask, epsilon=0.4, epsilon_high=None):
    high = epsilon if epsilon_high is None else epsilon_high

    def reply_term(b, positions):
        kept = []
        for t in positions:
            log_r = logp[b, t] - old[b, t]
            bounded = clip(log_r, -epsilon, high)
            kept.append(min(log_r, bounded) if adv[b] > 0 else max(log_r, bounded) if adv[b] < 0 else log_r)
        return -adv[b] * torch.exp(sum(kept, ZERO) / len(positions))
    return reply_loop(logp, mask, reply_term)


def loop_cispo(logp, old, adv, mask, epsilon_high, epsilon=None):
    def term(b, t):
        r = math.exp(logp[b, t].item() - old[b, t].item())
        weight = min(r, 1 + epsilon_high) if epsilon is None else clip(r, 1 - epsilon, 1 + epsilon_high)
        return -weight * advantage(adv, b, t) * logp[b, t]
    return token_loop(logp, mask, term)


def loop_sapo(logp, old, adv, mask, tau_pos=1.0, tau_neg=1.05):
    def term(b, t):
        a = advantage(adv, b, t)
        tau = tau_pos if a > 0 else tau_neg
        r = torch.exp(logp[b, t] - old[b, t])
        return -4 / tau / (1 + torch.exp(-tau * (r - 1))) * a
    return token_loop(logp, mask, term)


def loop_keep(logp, old, adv, mask, delta, delta_high=None, divergence="binary_tv"):
    """DPPO's mask, one token at a time, in Python floats."""
    high = delta if delta_high is None else delta_high
    keep = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            if not mask[b, t]:
                continue
            p, q = math.exp(logp[b, t].item()), math.exp(old[b, t].item())
            if divergence == "binary_tv":
                spread = abs(p - q)
            else:
                spread = q * math.log(q / p) + (1 - q) * math.log((1 - q) / (1 - p))
            a = advantage(adv, b, t).item()
            keep[b, t] = not ((a > 0 and p > q and spread > high) or (a < 0 and p < q and spread > delta))
    return keep


def loop_dppo(logp, old, adv, mask, **bounds):
    keep = loop_keep(logp, old, adv, mask, **bounds)
    return token_loop(logp, mask, lambda b, t: -keep[b, t] * torch.exp(logp[b, t] - old[b, t]) * advantage(adv, b, t))


CASES = {
    "ppo": (ppo_clip, loop_ppo, {}),
    "ppo-clip-higher": (ppo_clip, loop_ppo, {"epsilon": 0.1, "epsilon_high": 0.28}),
    "ppo-dual-clip": (ppo_clip, loop_ppo, {"epsilon": 0.1, "dual_clip": 1.2}),
    "gspo": (gspo, loop_gspo, {"epsilon": 0.01, "epsilon_high": 0.02}),
    "gspo-token": (gspo_token, loop_gspo_token, {"epsilon": 0.01, "epsilon_high": 0.02}),
    "gmpo": (gmpo, loop_gmpo, {"epsilon": 0.1, "epsilon_high": 0.2}),
    "cispo": (cispo, loop_cispo, {"epsilon_high": 0.1}),
    "cispo-both-bounds": (cispo, loop_cispo, {"epsilon": 0.1, "epsilon_high": 0.1}),
    "sapo": (sapo, loop_sapo, {}),
    "sapo-sharp": (sapo, loop_sapo, {"tau_pos": 3.0, "tau_neg": 6.0}),
    "dppo-tv": (dppo, loop_dppo, {"delta": 0.05}),
    "dppo-kl": (dppo, loop_dppo, {"delta": 0.01, "delta_high": 0.02, "divergence": "binary_kl"}),
}
"""name -> (the loss, its loop, keyword arguments); bounds tight enough that every clip or mask acts on the batch."""


def assert_same_values_and_gradient(value, expected, logp):
    """value and expected [B, T] agree, and so do the gradients of one random weighting of each."""
    torch.testing.assert_close(value, expected, rtol=1e-12, atol=1e-15)
    weights = torch.rand(B, T, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    grad = torch.autograd.grad((weights * value).sum(), logp, retain_graph=True)[0]
    expected_grad = torch.autograd.grad((weights * expected).sum(), logp, retain_graph=True)[0]
    torch.testing.assert_close(grad, expected_grad, rtol=1e-12, atol=1e-15)
    assert torch.isfinite(grad).all()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", CASES)
def test_loss_matches_its_loop(name, seed):
    loss, loop, options = CASES[name]
    logp, old, adv, mask = batch(seed)
    value, diagnostics = loss(logp, old, adv, mask, **options)
    assert_same_values_and_gradient(value, loop(logp, old, adv, mask, **options), logp)
    assert (value[mask == 0] == 0).all() and all(not d.requires_grad for d in diagnostics.values())


def test_token_losses_take_one_advantage_per_token():
    logp, old, _, mask = batch(2)
    adv = torch.randn(B, T, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for name in ("ppo-dual-clip", "gspo-token", "cispo-both-bounds", "sapo", "dppo-kl"):
        loss, loop, options = CASES[name]
        assert_same_values_and_gradient(loss(logp, old, adv, mask, **options)[0],
                                        loop(logp, old, adv, mask, **options), logp)


def shares(flags, mask):
    """Share of the policy tokens where the [B, T] bool flags hold."""
    return (flags & (mask > 0)).sum().item() / mask.sum().item()


def test_ppo_diagnostics_count_the_tokens_each_clip_acts_on():
    logp, old, adv, mask = batch(0)
    _, diagnostics = ppo_clip(logp, old, adv, mask, epsilon=0.1, epsilon_high=0.28, dual_clip=1.2)
    ratio, a = torch.exp(logp.detach() - old), adv[:, None].expand(B, T)
    expected = {"clip_low_fraction": shares((a < 0) & (ratio < 0.9), mask),
                "clip_high_fraction": shares((a > 0) & (ratio > 1.28), mask),
                "dual_clip_fraction": shares((a < 0) & (ratio > 1.2), mask)}
    assert {k: v.item() for k, v in diagnostics.items()} == pytest.approx(expected, abs=1e-15)
    assert all(0 < v < 1 for v in expected.values())


def test_gspo_clips_whole_replies():
    logp, old, adv, mask = batch(1)
    value, diagnostics = gspo(logp, old, adv, mask, epsilon=0.01, epsilon_high=0.02)
    replies = [b for b in range(B) if mask[b].any()]
    s = {b: math.exp(sum((logp[b, t] - old[b, t]).item() for t in range(T) if mask[b, t]) / mask[b].sum().item())
         for b in replies}
    low = [b for b in replies if adv[b] < 0 and s[b] < 0.99]
    high = [b for b in replies if adv[b] > 0 and s[b] > 1.02]
    assert diagnostics["clip_low_fraction"].item() == pytest.approx(len(low) / len(replies), abs=1e-15)
    assert diagnostics["clip_high_fraction"].item() == pytest.approx(len(high) / len(replies), abs=1e-15)
    grad = torch.autograd.grad(value.sum(), logp)[0]
    assert low + high and all((grad[b] == 0).all() for b in low + high)   # a clipped reply passes no gradient


@pytest.mark.parametrize("options", [{"delta": 0.05}, {"delta": 0.01, "delta_high": 0.02, "divergence": "binary_kl"}])
def test_trust_region_mask_drops_exactly_the_tokens_outside_the_region(options):
    logp, old, adv, mask = batch(0)
    keep, diagnostics = trust_region_mask(logp, old, adv, mask, **options)
    expected = loop_keep(logp, old, adv, mask, **options)
    assert torch.equal(keep, expected) and not keep.requires_grad
    dropped = (mask.sum() - expected.sum()).item()
    assert dropped > 0 and diagnostics["masked_fraction"].item() == pytest.approx(dropped / mask.sum().item())


def test_trust_region_mask_binary_tv_by_hand():
    """|pi - pi_old| against delta 0.1, in the direction the advantage pushes only."""
    p = torch.tensor([[0.5, 0.5, 0.5, 0.5, 0.5, 0.5]], dtype=torch.float64)
    q = torch.tensor([[0.35, 0.45, 0.65, 0.35, 0.65, 0.55]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 1.0, -1.0]], dtype=torch.float64)
    keep, _ = trust_region_mask(p.log(), q.log(), adv, torch.ones(1, 6), delta=0.1)
    assert keep.tolist() == [[0.0, 1.0, 0.0, 1.0, 1.0, 1.0]]


@pytest.mark.parametrize("seed", [0, 1])
def test_gspo_token_with_reply_advantages_is_gspo(seed):
    logp, old, adv, mask = batch(seed)
    sequence, _ = gspo(logp, old, adv, mask, epsilon=0.01, epsilon_high=0.02)
    token, _ = gspo_token(logp, old, adv, mask, epsilon=0.01, epsilon_high=0.02)
    assert torch.equal(sequence, token)
    grad = lambda per_token, mode: torch.autograd.grad(  # noqa: E731
        aggregate_loss(per_token, mask, mode), logp, retain_graph=True)[0]
    for mode in ("seq_mean_token_mean", "token_mean"):
        torch.testing.assert_close(grad(sequence, mode), grad(token, mode), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("mode", MODES + EXTRA_MODES)
@pytest.mark.parametrize("name", CASES)
def test_at_ratio_one_the_gradient_is_reinforce(name, mode):
    """logp == old_logp: -A grad log pi, aggregated the same way, for every loss and every aggregation."""
    loss, _, options = CASES[name]
    logp, _, adv, mask = batch(4, pad=0.0)
    value, _ = loss(logp, logp.detach(), adv, mask, **options)
    reduce = lambda per_token: aggregate_loss(per_token, mask, mode, norm_const=11.0, group=GROUP)  # noqa: E731
    grad = torch.autograd.grad(reduce(value), logp)[0]
    reinforce = torch.autograd.grad(reduce(-adv[:, None] * logp), logp)[0]
    torch.testing.assert_close(grad, reinforce, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", CASES)
def test_gradient_isolation(name):
    """old log-probs and advantages with requires_grad pass no gradient; the trained log-probs do."""
    loss, _, options = CASES[name]
    logp, old, adv, mask = batch(5)
    old, adv = old.clone().requires_grad_(), adv.clone().requires_grad_()
    value, diagnostics = loss(logp, old, adv, mask, **options)
    aggregate_loss(value, mask, "token_mean").backward()
    assert old.grad is None and adv.grad is None
    assert logp.grad is not None and torch.isfinite(logp.grad).all() and (logp.grad[mask == 0] == 0).all()


def loop_entropy(logits):
    """-sum_v p log p at every position, one vocabulary entry at a time (0 log 0 = 0)."""
    rows = []
    for b in range(logits.shape[0]):
        row = []
        for t in range(logits.shape[1]):
            z = logits[b, t]
            top = z.max().detach()
            weights = [torch.exp(z[v] - top) for v in range(z.shape[0])]
            total = sum(weights)
            row.append(-sum(w / total * torch.log(w / total) for w in weights if w > 0))
        rows.append(torch.stack(row))
    return torch.stack(rows)


def test_entropy_matches_its_loop_and_survives_masked_vocabulary():
    logits = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    logits[0, 1, 2] = logits[2, 3, :2] = -math.inf
    logits.requires_grad_()
    value = entropy_from_logits(logits)
    expected = loop_entropy(logits)
    torch.testing.assert_close(value, expected, rtol=1e-12, atol=1e-15)
    weights = torch.rand(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grad = torch.autograd.grad((weights * value).sum(), logits, retain_graph=True)[0]
    torch.testing.assert_close(grad, torch.autograd.grad((weights * expected).sum(), logits)[0], rtol=1e-12,
                               atol=1e-15)
    assert torch.isfinite(grad).all()
    torch.testing.assert_close(entropy_bonus(0.01, logits=logits), -0.01 * expected, rtol=1e-12, atol=1e-15)
    assert torch.equal(entropy_bonus(0.5, entropies=value), -0.5 * value)


@pytest.mark.parametrize("call, fix", [
    (lambda x, m: gspo(x, x, torch.ones(B, T), m), "one advantage per reply"),
    (lambda x, m: gmpo(x, x, torch.ones(B, 2), m), "one advantage per reply"),
    (lambda x, m: ppo_clip(x, x, torch.ones(B + 1), m), "pass \\[B\\] or \\[B, T\\]"),
    (lambda x, m: ppo_clip(x, x[:, :2], torch.ones(B), m), "same shape"),
    (lambda x, m: ppo_clip(x, x, torch.ones(B), m, dual_clip=1.0), "dual_clip must be a number > 1"),
    (lambda x, m: ppo_clip(x, x, torch.ones(B), m, epsilon=-0.1), "epsilon must be a number >= 0"),
    (lambda x, m: sapo(x, x, torch.ones(B), m, tau_neg=0.0), "tau_neg must be a number > 0"),
    (lambda x, m: dppo(x, x, torch.ones(B), m, delta=0.1, divergence="tv"), "binary_tv, binary_kl"),
    (lambda x, m: entropy_bonus(0.1), "exactly one of logits"),
    (lambda x, m: entropy_bonus(0.1, entropies=torch.ones(B)), "entropies must be \\[B, T\\]"),
], ids=["gspo-adv", "gmpo-adv", "adv-B", "old-shape", "dual-clip", "epsilon", "tau", "divergence", "entropy-none",
        "entropy-shape"])
def test_errors_name_the_fix(call, fix):
    logp, _, _, mask = batch(0, pad=0.0)
    with pytest.raises(ValueError, match=fix):
        call(logp, mask)
