"""The KL matrix's estimators: sequence level against a loop, verl's straight-through forms, the ratio-corrected k3
(unbiased off-policy, k2's gradient on-policy), and k3 written stably with expm1."""

import math

import pytest
import torch

from pglab.estimators import exact_kl, kl_estimate, ratio_corrected_kl, sequence_kl

B, T = 5, 6
KINDS = ("k1", "k2", "k3", "k1+", "k3+")


def batch(seed):
    """logp [B, T] (a leaf with grad), ref_logp [B, T], mask [B, T] with a reply of no policy token; 0 off the mask."""
    gen = torch.Generator().manual_seed(seed)
    logp = -2 * torch.rand(B, T, generator=gen, dtype=torch.float64)
    ref = logp + 0.5 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    mask = (torch.rand(B, T, generator=gen) < 0.7).double()
    mask[2] = 0
    return (logp * mask).requires_grad_(), ref * mask, mask


def naive(log_ratio, kind):
    """Schulman's estimators of KL(pi || ref) from one log-ratio l, as first written: r = pi_ref / pi = exp(-l)."""
    r = math.exp(-log_ratio)
    return {"k1": log_ratio, "k2": log_ratio ** 2 / 2, "k3": r - 1 - math.log(r)}[kind.rstrip("+")]


@pytest.mark.parametrize("kind", KINDS)
def test_sequence_kl_matches_its_loop(kind):
    logp, ref, mask = batch(0)
    value = sequence_kl(logp, ref, mask, kind)
    expected = [naive(sum(logp[b, t].item() - ref[b, t].item() for t in range(T) if mask[b, t]), kind)
                for b in range(B)]
    assert value.tolist() == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert value[2] == 0                                           # no policy token, no KL


def test_sequence_k1_is_the_token_k1_summed():
    logp, ref, mask = batch(1)
    torch.testing.assert_close(sequence_kl(logp, ref, mask, "k1"), (kl_estimate(logp, ref, "k1") * mask).sum(-1),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("kind", ["k1", "k3"])
def test_straight_through_forms_have_the_value_of_k_and_the_gradient_of_k2(kind, level):
    logp, ref, mask = batch(2)
    estimate = (lambda k: kl_estimate(logp, ref, k) * mask) if level == "token" else (
        lambda k: sequence_kl(logp, ref, mask, k))
    plus, plain, k2 = estimate(kind + "+"), estimate(kind), estimate("k2")
    torch.testing.assert_close(plus, plain, rtol=1e-14, atol=1e-15)
    weights = torch.rand(plus.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    grad = lambda x: torch.autograd.grad((weights * x).sum(), logp, retain_graph=True)[0]  # noqa: E731
    assert torch.equal(grad(plus), grad(k2))


def test_ratio_corrected_k3_on_policy_is_k3_with_the_gradient_of_k2():
    logp, ref, mask = batch(3)
    corrected = ratio_corrected_kl(logp, logp.detach(), ref, "k3")
    torch.testing.assert_close(corrected, kl_estimate(logp, ref, "k3"), rtol=0, atol=0)
    weights = torch.rand(B, T, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * mask
    grad = lambda x: torch.autograd.grad((weights * x).sum(), logp, retain_graph=True)[0]  # noqa: E731
    torch.testing.assert_close(grad(corrected), grad(kl_estimate(logp, ref, "k2")), rtol=1e-12, atol=1e-15)


def test_ratio_corrected_kl_matches_its_loop_off_policy():
    logp, ref, mask = batch(4)
    old = logp.detach() + 0.3 * torch.randn(B, T, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    value = ratio_corrected_kl(logp, old, ref, "k3")
    expected = [[math.exp(logp[b, t].item() - old[b, t].item()) * naive(logp[b, t].item() - ref[b, t].item(), "k3")
                 for t in range(T)] for b in range(B)]
    torch.testing.assert_close(value, torch.tensor(expected, dtype=torch.float64), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kind", ["k1", "k3"])
def test_ratio_corrected_estimate_is_unbiased_on_tokens_from_the_old_policy(kind):
    """Exact over a vocabulary of 6: sum_x pi_old(x) (pi / pi_old)(x) k(x) = KL(pi || ref)."""
    gen = torch.Generator().manual_seed(6)
    logits, old_logits, ref_logits = (torch.randn(6, generator=gen, dtype=torch.float64) for _ in range(3))
    logp, old, ref = (torch.log_softmax(z, -1)[None] for z in (logits, old_logits, ref_logits))
    expected = (old.exp() * ratio_corrected_kl(logp, old, ref, kind)).sum()
    assert expected.item() == pytest.approx(exact_kl(logits, ref_logits).item(), rel=1e-12)


def test_kl_terms_pass_no_gradient_to_the_frozen_policies():
    logp, ref, mask = batch(5)
    old, ref = logp.detach().clone().requires_grad_(), ref.clone().requires_grad_()
    (sequence_kl(logp, ref, mask, "k3").sum() + ratio_corrected_kl(logp, old, ref).sum()).backward()
    assert old.grad is None and ref.grad is None and logp.grad is not None


def test_k3_stable_form_equals_the_naive_one_where_both_are_finite():
    for log_ratio in (-30.0, -5.0, -0.7, -0.01, 0.01, 0.3, 4.0, 30.0):
        stable = kl_estimate(torch.tensor([log_ratio], dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
                             "k3").item()
        assert stable == pytest.approx(naive(log_ratio, "k3"), rel=1e-9)


def test_k3_stable_form_stays_finite_where_the_naive_one_overflows():
    """log pi = -750, log ref = -700: pi underflows to 0, so the ratio of probabilities pi_ref / pi overflows and
    r - 1 - log r is inf - inf; the log-ratio -50 gives k3 = e^50 - 51."""
    logp, ref = torch.tensor([-750.0], dtype=torch.float64), torch.tensor([-700.0], dtype=torch.float64)
    ratio = ref.exp() / logp.exp()
    assert math.isinf(ratio.item()) and not math.isfinite((ratio - 1 - ratio.log()).item())
    assert kl_estimate(logp, ref, "k3").item() == pytest.approx(math.exp(50) - 51, rel=1e-12)


def test_k3_stable_form_keeps_its_digits_near_zero():
    """At l = 1e-6, k3 = l^2/2 - l^3/6 + ...: expm1 keeps it to 1e-9, exp(-l) - 1 + l loses four digits to
    cancellation."""
    l = 1e-6  # noqa: E741
    series = l ** 2 / 2 - l ** 3 / 6 + l ** 4 / 24
    stable = kl_estimate(torch.tensor([l], dtype=torch.float64), torch.zeros(1, dtype=torch.float64), "k3").item()
    assert stable == pytest.approx(series, rel=1e-9, abs=0)
    assert (math.exp(-l) - 1 + l) != pytest.approx(series, rel=1e-6, abs=0)
