"""The update in three pieces: UpdateSpec checks its settings, pg_loss is pure, pg_update steps on pg_loss's gradient.

The policy is a bigram table in float64 (logits of the next token = a row of the table), so every
gradient is cheap and exact up to float64 rounding; the batch holds groups of replies of different
lengths, a prompt of two tokens, reference log-probs and a per-token reward.
"""

import copy

import pytest
import torch

from pglab.sampling.replies import reply_batch
from pglab.trainers.update import UpdateSpec, pg_loss, pg_update, reply_advantages, score

VOCAB, PROMPT, REPLY, GROUP, GROUPS = 5, 2, 4, 2, 4
SETTINGS = [  # every path of the loss: plain, k1 in the reward with a ratio, k3 in the loss, constant, seq means
    {"advantage": "rloo"},
    {"advantage": "rloo", "beta": 0.1, "ratio": True, "epsilon": 0.1},
    {"advantage": "grpo", "beta": 0.1, "kl_in": "loss", "unbiased": True, "eps": 1e-4},
    {"advantage": "dr_grpo", "mode": "constant", "norm_const": float(GROUPS * GROUP * REPLY)},
    {"advantage": "reinforce", "mode": "seq_mean_token_sum"},
    {"advantage": "grpo", "mode": "seq_mean_token_mean", "beta": 0.1},
]


class Bigram:
    """A TokenPolicy whose logits for the token after ``a`` are ``table[a]`` (VOCAB x VOCAB, float64)."""

    max_length = None

    def __init__(self, seed: int = 0):
        self.module = torch.nn.Module()
        self.module.table = torch.nn.Parameter(torch.randn(VOCAB, VOCAB, dtype=torch.float64,
                                                           generator=torch.Generator().manual_seed(seed)))

    def logits(self, ids, start=1, group_size=1, attention_mask=None):
        return self.module.table[ids[:, start - 1:-1]]

    def prefixes(self, sequences):
        raise NotImplementedError("these tests only score")


def make_batch(seed: int = 1):
    """GROUPS groups of GROUP replies of 1..REPLY tokens after a prompt of PROMPT tokens; ref_logp, token_rewards."""
    gen = torch.Generator().manual_seed(seed)
    rows = GROUPS * GROUP
    ids = torch.randint(VOCAB, (rows, PROMPT + REPLY), generator=gen)
    lengths = torch.randint(1, REPLY + 1, (rows,), generator=gen)
    mask = torch.zeros(rows, PROMPT + REPLY, dtype=torch.float64)
    for row, length in enumerate(lengths.tolist()):
        mask[row, PROMPT:PROMPT + length] = 1
    batch = reply_batch(ids, mask, PROMPT, GROUP, torch.rand(rows, generator=gen, dtype=torch.float64),
                        ref_logp=-torch.rand(rows, PROMPT + REPLY, generator=gen, dtype=torch.float64) * mask)
    batch.token_rewards = torch.where(torch.rand(rows, PROMPT + REPLY, generator=gen) < 0.2, -0.5, 0.0).double() * mask
    return batch


def loss_of(policy, batch, spec):
    """pg_loss on the policy's log-probs of the whole batch, as a single process without micro-batches sees it."""
    logp = score(policy, batch, spec, PROMPT, batch.ids.numel())
    return pg_loss(logp, batch, reply_advantages(batch.rewards, spec), spec)


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_pg_loss_is_pure(options):
    policy, batch = Bigram(), make_batch()
    spec = UpdateSpec(group_size=GROUP, **options)
    table, rows = policy.module.table.detach().clone(), copy.deepcopy(batch)
    first, second = loss_of(policy, batch, spec), loss_of(policy, batch, spec)
    assert torch.equal(first[0], second[0])
    assert all(torch.equal(first[1][k], second[1][k]) for k in first[1])
    assert torch.equal(policy.module.table, table) and policy.module.table.grad is None   # no step, no backward
    assert batch.logp_old is None                                                         # the batch is as it was
    assert all(torch.equal(getattr(batch, k), getattr(rows, k)) for k in ("rewards", "ref_logp", "token_rewards"))


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_pg_loss_passes_no_gradient_to_advantages_old_or_reference_log_probs(options):
    batch = make_batch()
    spec = UpdateSpec(group_size=GROUP, **options)
    logp = torch.where(batch.action_mask.bool(), -torch.rand(batch.ids.shape, dtype=torch.float64), 0.0)
    logp.requires_grad_(True)
    batch.logp_old = (logp.detach() - 0.05 * batch.action_mask).requires_grad_(True)   # ratios off 1: the clip acts
    batch.ref_logp.requires_grad_(True)
    batch.token_rewards.requires_grad_(True)
    reply_adv = reply_advantages(batch.rewards, spec).requires_grad_(True)
    loss, parts = pg_loss(logp, batch, reply_adv, spec)
    grads = torch.autograd.grad(loss, [logp, reply_adv, batch.logp_old, batch.ref_logp, batch.token_rewards],
                                allow_unused=True)
    assert grads[0] is not None and grads[0].abs().sum() > 0
    assert all(g is None for g in grads[1:])
    assert not parts["score_loss"].requires_grad and not parts["clip_count"].requires_grad


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_pg_update_steps_on_the_gradient_of_pg_loss(options):
    policy, batch = Bigram(), make_batch()
    spec = UpdateSpec(group_size=GROUP, max_grad_norm=None, **options)
    loss, parts = loss_of(policy, batch, spec)
    expected = torch.autograd.grad(loss, policy.module.table)[0]
    metrics = pg_update(policy, torch.optim.SGD(policy.module.parameters(), lr=0.0), batch, spec, start=PROMPT)
    assert torch.equal(policy.module.table.grad, expected)
    assert metrics["loss"] == float(loss.detach()) and metrics["score_loss"] == float(parts["score_loss"])


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_two_micro_batches_give_the_gradient_of_one(options):
    def step(micro_batches):
        policy, batch = Bigram(), make_batch()
        spec = UpdateSpec(group_size=GROUP, max_grad_norm=None, micro_batches=micro_batches, **options)
        metrics = pg_update(policy, torch.optim.SGD(policy.module.parameters(), lr=0.0), batch, spec, start=PROMPT)
        return policy.module.table.grad, metrics

    (one, one_metrics), (two, two_metrics) = step(1), step(2)
    # Sums in another order and token_mean as a constant over the same count: float64 rounding, a few ulps of
    # values of order 1, so 1e-12 holds with a wide margin.
    torch.testing.assert_close(two, one, rtol=1e-12, atol=1e-12)
    for key in ("loss", "score_loss", "kl_k1", "reward", "zero_adv_groups"):
        assert two_metrics[key] == pytest.approx(one_metrics[key], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("options,fix", [
    ({"advantage": "rlo"}, "unknown advantage"),
    ({"advantage": "rloo", "group_size": 1}, "group_size >= 2"),
    ({"advantage": "reinforce", "group_size": 0}, "group_size must be at least 1"),
    ({"advantage": "grpo", "group_size": 2, "scale": "std"}, "unknown scale"),
    ({"advantage": "reinforce", "kl_in": "logits"}, "pass kl_in one of reward, loss"),
    ({"advantage": "reinforce", "mode": "sum"}, "mode one of token_mean"),
    ({"advantage": "reinforce", "mode": "constant"}, "needs a positive norm_const"),
    ({"advantage": "reinforce", "mode": "constant", "norm_const": 0.0}, "needs a positive norm_const"),
    ({"advantage": "reinforce", "micro_batches": 0}, "micro_batches must be at least 1"),
])
def test_update_spec_refuses_bad_settings_in_one_line(options, fix):
    with pytest.raises(ValueError, match=fix) as err:
        UpdateSpec(**options)
    assert "\n" not in str(err.value)


def test_micro_batches_must_divide_the_groups():
    policy, spec = Bigram(), UpdateSpec("rloo", GROUP, micro_batches=3)
    with pytest.raises(ValueError, match=f"micro_batches must divide the {GROUPS} groups"):
        pg_update(policy, torch.optim.SGD(policy.module.parameters(), lr=0.0), make_batch(), spec, start=PROMPT)
