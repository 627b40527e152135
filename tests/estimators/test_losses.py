"""Loss aggregation weights, detaching, and the guarded optimizer step."""


import pytest
import torch

from pglab.estimators import aggregate_loss, masked_mean, reinforce_loss, softmax_score

LENGTHS = torch.tensor([4, 8, 24])
MASK = (torch.arange(24)[None] < LENGTHS[:, None]).double()


def token_weights(mode):
    per_token = torch.zeros(3, 24, dtype=torch.float64, requires_grad=True)
    loss = aggregate_loss(per_token, MASK, mode, norm_const=3 * 24)
    return torch.autograd.grad(loss, per_token)[0]


@pytest.mark.parametrize("mode, per_token, totals", [
    ("token_mean", [1 / 36] * 3, [4 / 36, 8 / 36, 24 / 36]),
    ("seq_mean_token_sum", [1 / 3] * 3, [4 / 3, 8 / 3, 8.0]),
    ("seq_mean_token_mean", [1 / 12, 1 / 24, 1 / 72], [1 / 3] * 3),
    ("constant", [1 / 72] * 3, [4 / 72, 8 / 72, 24 / 72]),
])
def test_seed_000_weight_table(mode, per_token, totals):
    weights = token_weights(mode)
    assert weights[:, 0].tolist() == pytest.approx(per_token, rel=1e-12)
    assert weights.sum(-1).tolist() == pytest.approx(totals, rel=1e-12)
    assert (weights[MASK == 0] == 0).all()


def test_seed_000_weight_table_printed_values():
    printed = {"token_mean": ([0.0278] * 3, [0.111, 0.222, 0.667]),
               "seq_mean_token_mean": ([0.0833, 0.0417, 0.0139], [0.333] * 3),
               "constant": ([0.0139] * 3, [0.056, 0.111, 0.333])}
    for mode, (per_token, totals) in printed.items():
        weights = token_weights(mode)
        assert weights[:, 0].tolist() == pytest.approx(per_token, abs=5e-5)
        assert weights.sum(-1).tolist() == pytest.approx(totals, abs=5e-4)


def test_masked_mean():
    x = torch.tensor([[1.0, 2.0, 9.0], [3.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert masked_mean(x, mask).item() == 2.0
    assert masked_mean(x, mask, dim=-1).tolist() == [1.5, 3.0]


def test_reinforce_loss_gradient_is_minus_advantage_times_weight():
    logp = torch.zeros(3, 24, dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    grad = torch.autograd.grad(reinforce_loss(logp, adv, MASK, "seq_mean_token_sum"), logp)[0]
    torch.testing.assert_close(grad, -adv[:, None] * MASK / 3)


def test_gradient_isolation_of_advantages():
    """Advantages computed from the model's own outputs pass no gradient into the model."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).double()
    x = torch.randn(5, 4, dtype=torch.float64)
    mask = torch.ones(5, 1, dtype=torch.float64)
    logits = model(x)
    advantages = torch.softmax(logits, -1)[:, 0] - 0.3          # attached to the model on purpose
    logp = torch.log_softmax(logits, -1)[:, :1]
    assert not reinforce_loss(logp.detach(), advantages, mask).requires_grad   # no path through A at all
    params = list(model.parameters())
    got = torch.autograd.grad(reinforce_loss(logp, advantages, mask), params, retain_graph=True)
    reference = torch.autograd.grad(-(advantages.detach() * logp[:, 0]).mean(), params, retain_graph=True)
    leaky = torch.autograd.grad(-(advantages * logp[:, 0]).mean(), params)
    for g, r, bad in zip(got, reference, leaky):
        torch.testing.assert_close(g, r, atol=0, rtol=0)
        assert not torch.allclose(g, bad)


def test_detached_baseline_is_unbiased_attached_is_not():
    """agents-ch6 §6.8: a five-call bandit whose baseline is read off the policy's own probabilities."""
    theta = torch.tensor([0.5, -0.2, 0.1, 0.0, 0.3], dtype=torch.float64, requires_grad=True)
    passes = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    pi = torch.softmax(theta, -1)
    true_grad = pi.detach() * (passes - (pi.detach() * passes).sum())       # pi_k (r_k - J), closed form
    n = 200_000
    sampled = torch.multinomial(pi.detach(), n, replacement=True, generator=torch.Generator().manual_seed(0))
    logp = torch.log_softmax(theta, -1)[sampled][:, None]
    baseline = pi[0]                                                         # depends on theta: attached
    advantages = passes[sampled] - baseline
    estimate = -torch.autograd.grad(reinforce_loss(logp, advantages, torch.ones(n, 1, dtype=torch.float64)),
                                    theta, retain_graph=True)[0]
    per_sample = advantages.detach()[:, None] * softmax_score(theta.detach(), sampled)
    se = per_sample.std(0) / n**0.5
    assert ((estimate - true_grad).abs() <= 4 * se).all()
    leaky = torch.autograd.grad((advantages * logp[:, 0]).mean(), theta)[0]   # the bug reinforce_loss prevents
    assert ((leaky - true_grad).norm() / true_grad.norm()).item() > 0.5


def closed_form(mask, mode, norm_const=None):
    """The losses docstring's per-token weight of each mode on policy positions [B, T]."""
    lengths, batch = mask.sum(-1, keepdim=True), mask.shape[0]
    per = {"token_mean": 1 / lengths.sum(), "seq_mean_token_sum": 1 / batch,
           "seq_mean_token_mean": 1 / (batch * lengths), "constant": 1 / (norm_const or 1.0)}[mode]
    return per * mask


def weights_of(mask, mode, norm_const=None, advantages=None):
    """dL / d(per-token term) of aggregate_loss, or of reinforce_loss w.r.t. log pi when advantages [B] are given."""
    x = torch.zeros_like(mask, requires_grad=True)
    loss = (aggregate_loss(x, mask, mode, norm_const) if advantages is None
            else reinforce_loss(x, advantages, mask, mode, norm_const))
    return torch.autograd.grad(loss, x)[0]


MODES = ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "constant")
PROBE_LENGTHS = torch.tensor([9, 12, 5, 20, 7, 18, 6, 25, 10, 4])
PROBE_REWARDS = torch.tensor([1.0, 0, 0, 0, 1, 0, 0, 0, 1, 0], dtype=torch.float64)
PROBE_MASK = (torch.arange(25)[None] < PROBE_LENGTHS[:, None]).double()


@pytest.mark.parametrize("mode", MODES)
def test_reinforce_loss_weight_is_minus_advantage_times_the_closed_form(mode):
    adv = PROBE_REWARDS - PROBE_REWARDS.mean()
    w = weights_of(PROBE_MASK, mode, norm_const=250.0, advantages=adv)
    torch.testing.assert_close(w, -adv[:, None] * closed_form(PROBE_MASK, mode, 250.0), rtol=0, atol=1e-15)


def test_pushes_on_a_probe_batch_with_centred_advantages():
    """token_mean pushes down / up as failures' mean length / successes'; seq_mean_token_mean balances them."""
    adv = PROBE_REWARDS - PROBE_REWARDS.mean()
    success = PROBE_REWARDS > 0
    length = PROBE_MASK.sum(-1)
    w = weights_of(PROBE_MASK, "token_mean", advantages=adv)
    ratio = w[~success].sum() / -w[success].sum()
    torch.testing.assert_close(ratio, length[~success].mean() / length[success].mean(), rtol=1e-12, atol=0)
    w = weights_of(PROBE_MASK, "seq_mean_token_mean", advantages=adv)
    torch.testing.assert_close(w[~success].sum(), -w[success].sum(), rtol=1e-12, atol=0)
    per_token = w.sum(-1) / length                           # one failure's push per token is 1 / (B L) times p
    long, short = ~success & (length > 10), ~success & (length <= 10)
    torch.testing.assert_close(per_token[long].mean() / per_token[short].mean(),
                               (1 / length[long]).mean() / (1 / length[short]).mean(), rtol=1e-12, atol=0)


def test_only_token_mean_weight_depends_on_the_rest_of_the_batch():
    """One 10-token trajectory among 63 others of 40 tokens: token_mean's weight falls to 64 * 10 / (10 + 63 * 40)."""
    def first_weight(other, mode):
        mask = (torch.arange(40)[None] < torch.tensor([10] + [other] * 63)[:, None]).double()
        return float(weights_of(mask, mode, norm_const=64 * 40.0)[0, 0])

    assert first_weight(40, "token_mean") / first_weight(10, "token_mean") == pytest.approx(640 / 2530, rel=1e-12)
    for mode in MODES[1:]:
        assert first_weight(40, mode) == pytest.approx(first_weight(10, mode), rel=1e-12)
