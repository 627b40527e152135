"""Off-policy audit_loss: batches drawn from a behaviour, the gradient at the policy.

Six off-policy losses against a brute-force enumeration of every ordered batch (plain loops, gradients through
the policy itself), closed forms (sequence-level IS is unbiased under every behaviour of full support, top-p's
token log-ratio is the log of the kept mass, k3 and the ratio-corrected k3 on-policy), the keyword arguments,
zero-probability replies, refusals, and the float32 tolerance.
"""

import itertools
import math

import pytest
import torch

from pglab.audit import audit_loss, placement_loss
from pglab.audit.behaviour import behaviour_pair
from pglab.audit.core import EXACT_TOLERANCE, ROUNDOFF_CONDITION
from pglab.envs.enumerable import EnumerablePolicy
from pglab.estimators import (
    aggregate_loss,
    kl_estimate,
    leave_one_out,
    masked_is,
    ppo_clip,
    ratio_corrected_kl,
    reinforce_loss,
    truncated_is,
)
from pglab.estimators.corrections import mismatch_ratios

GROUP = 2
"""Replies per prompt: 2 prompts x 2 replies of 9 gives 9^4 = 6561 ordered batches to loop over."""

FLOAT64_AGREEMENT = 1e-8
"""Brute force and audit sum the same 6561 float64 terms in other orders (the audit over multisets): roundoff near
1e-14, far under this."""


def advantages(rewards):
    return leave_one_out(rewards.view(-1, GROUP)).view(-1)


def per_token_losses(beta):
    """The six losses of the acceptance as per-token terms [rows, T] of rows that come group by group: leave-one-out
    advantages, the correction, and beta k3 in the loss. Row-wise, so that one call scores many batches at once."""
    def with_kl(per_token, logp, ref_logp):
        return per_token + beta * kl_estimate(logp, ref_logp, "k3")

    def weighted(weights):
        def per_token(logp, ref_logp, rewards, mask, rollout_logp):
            w = weights(logp.detach(), rollout_logp, mask)
            return with_kl(-w * advantages(rewards)[:, None] * logp, logp, ref_logp)
        return per_token

    def ppo(logp, ref_logp, rewards, mask, rollout_logp):
        return with_kl(ppo_clip(logp, rollout_logp, advantages(rewards), mask, epsilon=0.2)[0], logp, ref_logp)

    return {
        "naive": weighted(lambda current, rollout, mask: 1.0),
        "ppo-clip": ppo,
        "token-tis": weighted(lambda current, rollout, mask: truncated_is(current, rollout, mask, cap=1.1)[0]),
        "token-mask": weighted(lambda current, rollout, mask: masked_is(current, rollout, mask, low=0.9,
                                                                        high=1.1)[0]),
        "sequence-is": weighted(lambda current, rollout, mask: mismatch_ratios(current, rollout, mask,
                                                                               "sequence")[0]),
        "sequence-tis": weighted(lambda current, rollout, mask: truncated_is(current, rollout, mask, cap=1.1,
                                                                            level="sequence")[0]),
    }


def as_loss(per_token, name):
    """The audit's loss: the per-token terms summed per reply and averaged over the batch's replies. The naive loss
    takes the five arguments only (its rollout_logp is never read); the others declare rollout_logp."""
    if name == "naive":
        return lambda logp, ref_logp, rewards, mask, group: aggregate_loss(
            per_token(logp, ref_logp, rewards, mask, None), mask, "seq_mean_token_sum")

    def loss_fn(logp, ref_logp, rewards, mask, group, *, rollout_logp):
        return aggregate_loss(per_token(logp, ref_logp, rewards, mask, rollout_logp), mask, "seq_mean_token_sum")
    return loss_fn


def flat(grads):
    return torch.cat([g.flatten() for g in grads])


def brute_force(per_token, policy, behaviour):
    """(E[g], E|g - E g|^2) over every ordered batch of GROUP replies per prompt drawn from the behaviour.

    Each batch's probability is the product of its replies' behaviour probabilities; its gradient is
    sum_{b,t} d loss / d logp[b, t] grad log pi(y_bt), with grad log pi of every token slot taken by its own
    backward pass through the policy. The loss of every batch is the mean over its rows of their token sums,
    evaluated for all batches in one call (the per-token terms are row-wise) and differentiated per batch.
    """
    params = policy.parameters()
    logp, ref = policy.token_logp()
    p, n, length = logp.shape
    slots = logp.reshape(-1)
    jacobian = torch.stack([flat(torch.autograd.grad(slots[m], params, retain_graph=True)) for m in range(len(slots))])
    with torch.no_grad():
        rollout = behaviour.token_logp()[0]
    batches = torch.tensor(list(itertools.product(range(n), repeat=p * GROUP))).view(-1, p, GROUP)   # [C, P, K]
    x = torch.arange(p)[None, :, None].expand_as(batches)
    probs = rollout.sum(-1).exp()[x, batches].prod(-1).prod(-1)                                      # [C]
    rows = logp.detach()[x, batches].reshape(-1, length).requires_grad_(True)                       # [C B, L]
    mask = policy.mask[batches.reshape(-1)]
    terms = per_token(rows, ref[x, batches].reshape(-1, length), policy.rewards[x, batches].reshape(-1), mask,
                      rollout[x, batches].reshape(-1, length))
    losses = (terms * mask).sum(-1).view(len(batches), -1).mean(-1)                                 # [C]
    row_weights = torch.autograd.grad(losses.sum(), rows)[0].view(len(batches), -1)                  # [C, B L]
    where = ((x * n + batches)[..., None] * length + torch.arange(length)).view(len(batches), -1)
    weights = torch.zeros(len(batches), len(slots), dtype=torch.float64).scatter_add_(1, where, row_weights)
    gradients = weights @ jacobian                                                                   # [C, D]
    mean = probs @ gradients
    return mean, float(probs @ (gradients ** 2).sum(-1)) - float(mean @ mean)


def moved_pair(staleness):
    """(policy, behaviour): EnumerablePolicy(2, 3, 2, seed 0)'s net samples, a copy moved `staleness` steps is
    trained. Built the obvious way: policy = behaviour.copy(), then its parameters changed in place."""
    behaviour = EnumerablePolicy(prompts=2, vocab=3, length=2, seed=0)
    policy = behaviour.copy()
    moved, _ = behaviour_pair(behaviour, f"stale:{staleness}", beta=0.1)
    with torch.no_grad():
        policy.net.theta.copy_(moved.net.theta)
    return policy, behaviour


def check_agreement(report, expected, variance):
    target = report.target
    assert report.exact and report.off_policy
    bias = float((expected - target).norm()) / float(target.norm())
    scale = float(expected @ target) / float(target @ target)
    assert report.relative_bias == pytest.approx(bias, rel=FLOAT64_AGREEMENT, abs=1e-14)
    assert report.scale == pytest.approx(scale, rel=FLOAT64_AGREEMENT)
    assert report.total_variance == pytest.approx(variance, rel=FLOAT64_AGREEMENT)
    assert torch.allclose(report.gradient, expected, rtol=FLOAT64_AGREEMENT, atol=1e-14)


@pytest.mark.parametrize("staleness", [1, 3])
def test_six_offpolicy_losses_agree_with_brute_force_enumeration(staleness):
    """Every ordered batch, two KL prices: relative bias, scale and total variance to 1e-8."""
    policy, behaviour = moved_pair(staleness)
    for beta in (0.0, 0.1):
        for name, per_token in per_token_losses(beta).items():
            report = audit_loss(as_loss(per_token, name), policy, beta=beta, group_size=GROUP, behaviour=behaviour)
            check_agreement(report, *brute_force(per_token, policy, behaviour))


def test_the_corrections_act_on_this_policy():
    """The mismatch is large enough at stale:3 for the caps and masks to bite: the six losses differ."""
    policy, behaviour = moved_pair(3)
    gradients = {name: audit_loss(as_loss(fn, name), policy, beta=0.1, group_size=GROUP, behaviour=behaviour).gradient
                 for name, fn in per_token_losses(0.1).items()}
    for a, b in itertools.combinations(gradients, 2):
        assert (gradients[a] - gradients[b]).norm() > 1e-3 * gradients[a].norm(), (a, b)


def unbiased_sequence_is(beta):
    """Sequence-level IS with k1 in the reward: -w_i (R_i - mean_{j != i} R_j) sum_t log pi, R = r - beta l,
    w_i = pi(y_i) / mu(y_i). E_mu[w (R - b) S] = E_pi[R S] = grad J, since b does not depend on reply i."""
    def loss_fn(logp, ref_logp, rewards, mask, group, rollout_logp):
        w, _ = mismatch_ratios(logp.detach(), rollout_logp, mask, "sequence")
        shaped = rewards - beta * ((logp - ref_logp).detach() * mask).sum(-1)
        return reinforce_loss(logp, w[:, 0] * leave_one_out(shaped.view(-1, GROUP)).view(-1), mask,
                              "seq_mean_token_sum")
    return loss_fn


@pytest.mark.parametrize("spec", ["noise:0.5", "temperature:1.7", "stale:2", "stale:1,noise:0.3,temperature:0.8"])
def test_sequence_level_importance_sampling_is_unbiased_for_a_behaviour_of_full_support(spec):
    policy, behaviour = behaviour_pair(EnumerablePolicy(prompts=2, vocab=3, length=2, eos=True, seed=4), spec,
                                       beta=0.2)
    report = audit_loss(unbiased_sequence_is(0.2), policy, beta=0.2, group_size=GROUP, behaviour=behaviour)
    assert report.exact and report.off_policy and report.relative_bias < 1e-9 and report.follows == "reverse_kl"
    naive = audit_loss(placement_loss("k1", "reward", 0.2), policy, beta=0.2, group_size=GROUP, behaviour=behaviour)
    assert naive.relative_bias > 1e-3                   # without the weights the behaviour's samples bias it


def test_under_top_p_the_token_log_ratio_is_the_log_of_the_kept_mass():
    """Every kept token: log pi - log mu = log (mass of the nucleus at its state); dropped replies never appear."""
    policy = EnumerablePolicy(prompts=2, vocab=4, length=2, seed=5)
    audited, behaviour = behaviour_pair(policy, "top-p:0.7", beta=0.1)
    assert audited is policy
    with torch.no_grad():
        logits = policy.net()
        logp, _ = policy.token_logp()
        mu, _ = behaviour.token_logp()
    probs = torch.softmax(logits, -1)
    kept_mass = torch.zeros(probs.shape[:-1], dtype=torch.float64)
    for index in itertools.product(*(range(d) for d in probs.shape[:-1])):     # plain loop over every state
        ranked = sorted(probs[index].tolist(), reverse=True)
        mass = 0.0
        for q in ranked:
            mass += q
            if mass >= 0.7:
                break
        kept_mass[index] = mass
    kept = torch.isfinite(mu) & (policy.mask > 0)
    assert (~kept & (policy.mask > 0)).any()             # top-p:0.7 drops some tokens here
    assert torch.allclose((logp - mu)[kept], kept_mass.log()[kept], rtol=0, atol=1e-12)

    seen = []

    def recording(logp, ref_logp, rewards, mask, group, rollout_logp):
        seen.append(rollout_logp)
        return reinforce_loss(logp, rewards, mask, "seq_mean_token_sum")

    report = audit_loss(recording, policy, beta=0.1, group_size=2, behaviour=behaviour)
    assert report.exact and all(torch.isfinite(r).all() for r in seen)
    assert math.isfinite(report.total_variance) and torch.isfinite(report.gradient).all()


def test_on_policy_k3_follows_the_tokenwise_forward_kl_and_corrected_k3_equals_k2():
    policy = EnumerablePolicy(prompts=2, vocab=3, length=2, eos=True, seed=6)

    def kl_loss(kind, corrected=False):
        def loss_fn(logp, ref_logp, rewards, mask, group, old_logp):
            kl = ratio_corrected_kl(logp, old_logp, ref_logp, kind) if corrected else kl_estimate(logp, ref_logp, kind)
            return reinforce_loss(logp, advantages(rewards), mask, "seq_mean_token_sum") + 0.1 * aggregate_loss(
                kl, mask, "seq_mean_token_sum")
        return loss_fn

    k3 = audit_loss(kl_loss("k3"), policy, beta=0.1, group_size=GROUP)
    assert k3.follows == "tokenwise_forward_kl" and not k3.off_policy
    k2 = audit_loss(kl_loss("k2"), policy, beta=0.1, group_size=GROUP)
    corrected = audit_loss(kl_loss("k3", corrected=True), policy, beta=0.1, group_size=GROUP)
    assert torch.allclose(corrected.gradient, k2.gradient, rtol=1e-10, atol=1e-14)
    assert corrected.follows == k2.follows == "tokenwise_reverse_kl"


def test_on_policy_both_keyword_arguments_are_the_policys_own_detached_logp():
    policy = EnumerablePolicy(prompts=2, vocab=2, length=2, seed=1)

    def checking(logp, ref_logp, rewards, mask, group, rollout_logp, old_logp):
        assert not rollout_logp.requires_grad and not old_logp.requires_grad
        assert torch.equal(rollout_logp, logp.detach()) and torch.equal(old_logp, logp.detach())
        return reinforce_loss(logp, rewards, mask)

    plain = audit_loss(lambda logp, ref, rewards, mask, group: reinforce_loss(logp, rewards, mask), policy,
                       beta=0.0, group_size=2)
    declared = audit_loss(checking, policy, beta=0.0, group_size=2)
    assert torch.equal(plain.gradient, declared.gradient) and plain.total_variance == declared.total_variance


def test_old_logp_comes_from_the_proximal_policy_else_the_behaviour():
    base = EnumerablePolicy(prompts=1, vocab=2, length=2, seed=2)
    policy, behaviour = behaviour_pair(base, "stale:2", beta=0.0)
    proximal, _ = behaviour_pair(base, "stale:1", beta=0.0)
    with torch.no_grad():
        logs = {name: q.token_logp()[0] for name, q in (("behaviour", behaviour), ("proximal", proximal))}
    seen = {}

    def recording(logp, ref_logp, rewards, mask, group, rollout_logp, old_logp):
        seen.setdefault("pairs", []).append((rollout_logp, old_logp))
        return reinforce_loss(logp, rewards, mask)

    for given, expected in ((None, "behaviour"), (proximal, "proximal")):
        seen.clear()
        audit_loss(recording, policy, beta=0.0, group_size=2, behaviour=behaviour, proximal=given)
        for rollout, old in seen["pairs"]:
            rows = [int(torch.nonzero((logs["behaviour"][0] == r).all(-1))[0]) for r in rollout]
            assert torch.equal(old, logs[expected][0, rows])


def test_a_behaviour_of_another_shape_rewards_or_reference_is_refused():
    policy = EnumerablePolicy(prompts=2, vocab=3, length=2, seed=0)
    fn = placement_loss("k1", "reward", 0.1)
    other_rewards = policy.copy()
    other_rewards.rewards = policy.rewards + 1
    other_reference = EnumerablePolicy(prompts=2, vocab=3, length=2, seed=1)
    other_reference.rewards = policy.rewards
    for behaviour, words in ((EnumerablePolicy(prompts=2, vocab=3, length=2, eos=True), "(prompts, vocab, length"),
                             (other_rewards, "other rewards"), (other_reference, "another reference"),
                             ("stale:1", "pass an EnumerablePolicy")):
        with pytest.raises(ValueError, match=words.replace("(", r"\(")) as err:
            audit_loss(fn, policy, beta=0.1, group_size=2, behaviour=behaviour)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="proximal has other rewards"):
        audit_loss(fn, policy, beta=0.1, group_size=2, proximal=other_rewards)


def test_a_float32_loss_follows_within_its_own_roundoff():
    """An exact loss computed in float32 leaves sines of ~1e-8 (float32 roundoff), over the float64 tolerance."""
    policy = EnumerablePolicy(prompts=2, vocab=3, length=2, eos=True, seed=0)
    exact = placement_loss("k1", "reward", 0.1, reward_to_go=True)

    def in_float32(logp, ref_logp, rewards, mask, group):
        return exact(logp.float(), ref_logp.float(), rewards.float(), mask.float(), group)

    report64 = audit_loss(exact, policy, beta=0.1, group_size=3)
    report32 = audit_loss(in_float32, policy, beta=0.1, group_size=3)
    sine32 = report32.candidates[0]["sine"]
    assert report64.tolerance == EXACT_TOLERANCE and report64.follows == "reverse_kl"
    assert sine32 > EXACT_TOLERANCE                      # the float64 tolerance would call it biased
    assert report32.tolerance == ROUNDOFF_CONDITION * torch.finfo(torch.float32).eps
    assert report32.follows == "reverse_kl" and report32.structure == report64.structure
    assert abs(report32.scale - 1) <= report32.tolerance
