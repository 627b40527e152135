"""pg_loss with the loss zoo and the mismatch corrections: the glue around pglab.estimators, nothing more.

Every check runs in float64 on log-probs drawn at random, with replies of different lengths in groups, so a
wrong placement (a token off the mask, a reply's advantage on another reply) changes the numbers.
Tolerances: the two sides compute the same float64 operations in a possibly different order (a few ulps
of values of order 1), so 1e-12 relative holds with a wide margin and a real difference (a clip, a weight,
a missing token) is of order 1e-3 or more.
"""

import dataclasses

import pytest
import torch

from pglab.estimators import (
    aggregate_loss,
    cispo,
    dppo,
    geometric_mask,
    gmpo,
    gspo,
    gspo_token,
    masked_is,
    ppo_clip,
    sapo,
    truncated_is,
)
from pglab.estimators.advantages import per_token
from pglab.runtime.options import SettingsError
from pglab.sampling.replies import reply_batch
from pglab.trainers.update import DIAGNOSTICS, IS_CORRECTIONS, LOSSES, UpdateSpec, pg_loss, reply_advantages

PROMPT, REPLY, GROUP, GROUPS = 2, 5, 2, 3
TIGHT = {"rtol": 1e-12, "atol": 1e-12}
BY_HAND = {  # each loss as the pure function with the defaults docs/lm.md states
    "ppo": lambda logp, old, adv, mask: ppo_clip(logp, old, adv, mask, epsilon=0.2, epsilon_high=0.2),
    "gspo": lambda logp, old, adv, mask: gspo(logp, old, adv, mask, epsilon=3e-4, epsilon_high=4e-4),
    "gspo-token": lambda logp, old, adv, mask: gspo_token(logp, old, adv, mask, epsilon=3e-4, epsilon_high=4e-4),
    "gmpo": lambda logp, old, adv, mask: gmpo(logp, old, adv, mask, epsilon=0.4, epsilon_high=0.4),
    "cispo": lambda logp, old, adv, mask: cispo(logp, old, adv, mask, epsilon=None, epsilon_high=0.28),
    "sapo": lambda logp, old, adv, mask: sapo(logp, old, adv, mask),
    "dppo": lambda logp, old, adv, mask: dppo(logp, old, adv, mask, delta=0.2, delta_high=0.2),
}
CAP = 1.1
"""is_cap of these tests: close enough to 1 that every correction acts on the batch (even geo-mask's per-token mean)."""
WEIGHTS = {  # each correction as the pure function
    "token-tis": lambda old, mu, mask: truncated_is(old, mu, mask, cap=CAP, level="token"),
    "sequence-tis": lambda old, mu, mask: truncated_is(old, mu, mask, cap=CAP, level="sequence"),
    "token-mask": lambda old, mu, mask: masked_is(old, mu, mask, low=1 / CAP, high=CAP, level="token"),
    "sequence-mask": lambda old, mu, mask: masked_is(old, mu, mask, low=1 / CAP, high=CAP, level="sequence"),
    "geo-mask": lambda old, mu, mask: geometric_mask(old, mu, mask, low=1 / CAP, high=CAP),
}


def make_batch(seed: int = 0):
    """GROUPS groups of GROUP replies of 1..REPLY tokens; logp [B, T] (leaf, float64), logp_old 0.3 nats from it and
    rollout_logp 0.1 nats from logp_old per token (ratios off 1, so clips, truncations and masks act)."""
    gen = torch.Generator().manual_seed(seed)
    rows = GROUPS * GROUP
    ids = torch.randint(7, (rows, PROMPT + REPLY), generator=gen)
    mask = torch.zeros(rows, PROMPT + REPLY, dtype=torch.float64)
    for row, length in enumerate(torch.randint(1, REPLY + 1, (rows,), generator=gen).tolist()):
        mask[row, PROMPT:PROMPT + length] = 1
    batch = reply_batch(ids, mask, PROMPT, GROUP, torch.rand(rows, generator=gen, dtype=torch.float64))

    def near(x, spread):
        return (x + spread * torch.randn(x.shape, generator=gen, dtype=torch.float64)).clamp(max=-1e-3) * mask

    logp = (-torch.rand(mask.shape, generator=gen, dtype=torch.float64) * 2 * mask).requires_grad_(True)
    batch.logp_old = near(logp.detach(), 0.3)
    batch.rollout_logp = near(batch.logp_old, 0.1)
    return logp, batch


def gradient(loss, logp):
    return torch.autograd.grad(loss, logp)[0]


@pytest.mark.parametrize("correction", IS_CORRECTIONS)
@pytest.mark.parametrize("loss", LOSSES[1:])
def test_each_loss_and_correction_is_the_estimator_composed_by_hand(loss, correction):
    logp, batch = make_batch()
    spec = UpdateSpec("rloo", GROUP, loss=loss, is_correction=correction, is_cap=CAP)
    reply_adv = reply_advantages(batch.rewards, spec)
    value, parts = pg_loss(logp, batch, reply_adv, spec)
    mask = batch.action_mask
    adv = reply_adv if loss in ("gspo", "gmpo") else per_token(reply_adv, mask)
    per_tok, diagnostics = BY_HAND[loss](logp, batch.logp_old, adv, mask)
    if correction != "none":
        weights, found = WEIGHTS[correction](batch.logp_old, batch.rollout_logp, mask)
        per_tok = per_tok * weights
        diagnostics = {**diagnostics, **{f"is_{k}": v for k, v in found.items()}}
        assert parts["is_weight_mean"] == pytest.approx(float((weights * mask).sum() / mask.sum()), rel=1e-12)
    expected = aggregate_loss(per_tok, mask, "token_mean")
    torch.testing.assert_close(value, expected, **TIGHT)
    torch.testing.assert_close(gradient(value, logp), gradient(expected, logp), **TIGHT)
    assert all(torch.equal(parts[k], v) for k, v in diagnostics.items())
    assert set(parts) - {"score_loss", "clip_count"} <= set(DIAGNOSTICS)


def test_the_corrections_act_on_this_batch():
    """The by-hand test above would pass for a correction that did nothing if every weight were 1: they are not."""
    _, batch = make_batch()
    for correction, weights in WEIGHTS.items():
        w = weights(batch.logp_old, batch.rollout_logp, batch.action_mask)[0][batch.action_mask.bool()]
        assert (w != 1).any() and (w != w[0]).any(), correction


@pytest.mark.parametrize("correction", IS_CORRECTIONS)
@pytest.mark.parametrize("loss", LOSSES)
def test_at_ratio_one_every_loss_has_the_reinforce_gradient(loss, correction):
    """No logp_old and no rollout_logp: pi_old = mu = pi, every ratio and weight 1, so each loss's gradient is
    -A grad log pi, reinforce's, up to float64 rounding."""
    logp, batch = make_batch()
    batch.logp_old = batch.rollout_logp = None
    spec = UpdateSpec("rloo", GROUP, loss=loss, is_correction=correction)
    reply_adv = reply_advantages(batch.rewards, spec)
    reinforce = gradient(pg_loss(logp, batch, reply_adv, UpdateSpec("rloo", GROUP))[0], logp)
    torch.testing.assert_close(gradient(pg_loss(logp, batch, reply_adv, spec)[0], logp), reinforce, **TIGHT)
    assert reinforce.abs().sum() > 0


@pytest.mark.parametrize("loss", ["reinforce", "ppo", "cispo"])
def test_an_on_policy_correction_is_a_no_op_bit_for_bit(loss):
    """No rollout_logp: the sampler is pi_old exactly, every weight exactly 1, the loss and gradient unchanged."""
    logp, batch = make_batch()
    batch.rollout_logp = None
    spec = UpdateSpec("rloo", GROUP, loss=loss, ratio=loss == "reinforce")
    reply_adv = reply_advantages(batch.rewards, spec)
    plain = pg_loss(logp, batch, reply_adv, spec)[0]
    plain_gradient = gradient(plain, logp)
    for correction in IS_CORRECTIONS[1:]:
        corrected = pg_loss(logp, batch, reply_adv, dataclasses.replace(spec, is_correction=correction))[0]
        assert torch.equal(corrected, plain) and torch.equal(gradient(corrected, logp), plain_gradient)


@pytest.mark.parametrize("loss", LOSSES)
def test_old_rollout_and_reference_log_probs_pass_no_gradient(loss):
    logp, batch = make_batch()
    batch.ref_logp = -torch.rand(batch.ids.shape, dtype=torch.float64) * batch.action_mask
    for name in ("logp_old", "rollout_logp", "ref_logp"):
        getattr(batch, name).requires_grad_(True)
    spec = UpdateSpec("rloo", GROUP, loss=loss, is_correction="token-tis", beta=0.1, kl_in="reward")
    value = pg_loss(logp, batch, reply_advantages(batch.rewards, spec), spec)[0]
    grads = torch.autograd.grad(value, [logp, batch.logp_old, batch.rollout_logp, batch.ref_logp], allow_unused=True)
    assert grads[0].abs().sum() > 0 and all(g is None for g in grads[1:])


def test_reinforce_with_ratio_is_ppo_clip_and_counts_the_clipped_tokens():
    """train-lm's --num-iterations > 1: reinforce's ratio is ppo_clip (the surrogate it replaced), clip_count the
    policy tokens where -min(r A, clip(r) A) takes the clipped branch."""
    logp, batch = make_batch()
    spec = UpdateSpec("rloo", GROUP, ratio=True, epsilon=0.1)
    reply_adv = reply_advantages(batch.rewards, spec)
    value, parts = pg_loss(logp, batch, reply_adv, spec)
    mask, adv = batch.action_mask, per_token(reply_adv, batch.action_mask)
    expected = aggregate_loss(ppo_clip(logp, batch.logp_old, adv, mask, epsilon=0.1)[0], mask, "token_mean")
    assert torch.equal(value, expected)
    ratio = torch.exp(logp.detach() - batch.logp_old)
    clipped = (ratio.clamp(0.9, 1.1) * adv < ratio * adv) & mask.bool()
    assert 0 < int(clipped.sum()) == float(parts["clip_count"])
    assert set(parts) == {"score_loss", "clip_count"}             # reinforce's metrics are today's


def test_the_clip_range_defaults_are_each_loss_own():
    assert UpdateSpec("rloo", GROUP).clip_range == (0.2, 0.2)
    assert UpdateSpec("rloo", GROUP, loss="gspo").clip_range == (3e-4, 4e-4)
    assert UpdateSpec("rloo", GROUP, loss="gmpo").clip_range == (0.4, 0.4)
    assert UpdateSpec("rloo", GROUP, loss="cispo").clip_range == (None, 0.28)
    assert UpdateSpec("rloo", GROUP, loss="ppo", epsilon=0.1).clip_range == (0.1, 0.1)
    assert UpdateSpec("rloo", GROUP, loss="ppo", epsilon=0.1, epsilon_high=0.3).clip_range == (0.1, 0.3)


@pytest.mark.parametrize("options,fix", [
    ({"loss": "grpo"}, "unknown loss 'grpo'"),
    ({"is_correction": "tis"}, "unknown is_correction 'tis'"),
    ({"loss": "sapo", "epsilon": 0.2}, "sapo has no clip range"),
    ({"loss": "cispo", "dual_clip": 3.0}, "pass loss ppo or drop dual_clip"),
    ({"loss": "ppo", "dual_clip": 1.0}, "a number > 1"),
    ({"is_cap": 0.5}, "is_cap must be at least 1"),
    ({"epsilon": -0.1}, "epsilon must be a number >= 0"),
    ({"loss": "ppo", "ratio": True}, "drop ratio"),
])
def test_update_spec_refuses_bad_loss_settings_in_one_line(options, fix):
    with pytest.raises(SettingsError, match=fix) as err:
        UpdateSpec("rloo", GROUP, **options)
    assert "\n" not in str(err.value)
