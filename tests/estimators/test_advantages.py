"""Advantages of token policies: the baseline acts on each reply's score, and pg_update agrees with TRL and verl.

The two bugs of the old LM trainer have regression tests: a finished reply was treated as reward 0
at later positions (equal scores of different lengths got non-zero advantages), and the
zero-advantage share crashed on a non-contiguous tensor. The cross-checks write TRL's GRPO loss
(``loss_type`` grpo, bnpo, dr_grpo; k3 in the loss) and verl's GRPO / RLOO with its aggregation
modes as plain reference losses, and compare their gradients with one ``pg_update`` step on the
same model and batch of variable-length replies, under the conventions of docs/lm.md.
"""

import pytest
import torch

from pglab.estimators import group_normalize, leave_one_out
from pglab.estimators.advantages import KINDS, advantages, token_advantages, zero_advantage_share

pytest.importorskip("transformers")

from pglab.models import HFPolicy  # noqa: E402
from pglab.models.default_lm import save_random_gpt2  # noqa: E402
from pglab.sampling.replies import reply_batch  # noqa: E402
from pglab.sampling.scoring import sequence_log_probs  # noqa: E402
from pglab.trainers.update import UpdateSpec, pg_update  # noqa: E402

PROMPT, REPLY, K, GROUPS = 2, 5, 4, 3


def test_equal_scores_of_different_lengths_get_exactly_zero_advantage():
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]])            # the first reply ended after one token
    for kind in ("rloo", "grpo", "dr_grpo"):
        adv = token_advantages(torch.tensor([1.0, 1.0]), mask, kind, 2)
        assert torch.equal(adv, torch.zeros(2, 2)), kind
    for value in (0.1, 1 / 3, -7.25, 1e-9):                   # values whose mean leaves a rounding residue
        scores = torch.full((6,), value, dtype=torch.float64)
        for kind in ("rloo", "grpo", "dr_grpo"):
            assert torch.equal(advantages(scores, kind, 3), torch.zeros(6, dtype=torch.float64)), (kind, value)
        assert torch.equal(group_normalize(scores.view(2, 3), scale="batch"), torch.zeros(2, 3, dtype=torch.float64))


def test_zero_advantage_share_takes_non_contiguous_input():
    adv = advantages(torch.tensor([1.0, 1.0, 0.0, 1.0, 2.0, 2.0]), "rloo", 2)[:, None].expand(6, 4).t().t()
    assert zero_advantage_share(adv, 2) == pytest.approx(2 / 3)
    one_prompt = token_advantages(torch.randn(3), torch.ones(3, 4), "rloo", 3).t().contiguous().t()
    assert zero_advantage_share(one_prompt, 3) == 0.0


def test_kinds_are_the_estimators_on_the_scores():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 3.0], dtype=torch.float64)
    assert torch.equal(advantages(scores, "reinforce", baseline=0.25), scores - 0.25)
    assert torch.equal(advantages(scores, "rloo", 3), leave_one_out(scores.view(2, 3)).flatten())
    assert torch.equal(advantages(scores, "grpo", 3), group_normalize(scores.view(2, 3)).flatten())
    torch.testing.assert_close(advantages(scores, "dr_grpo", 3),
                               (scores.view(2, 3) - scores.view(2, 3).mean(1, keepdim=True)).flatten())
    sample = advantages(scores, "grpo", 3, unbiased=True, eps=1e-4)
    groups = scores.view(2, 3)
    trl = (groups - groups.mean(1, True)) / (groups.std(1, keepdim=True) + 1e-4)
    torch.testing.assert_close(sample, trl.flatten())


def test_token_rewards_are_added_as_reward_to_go_without_a_baseline():
    mask = torch.tensor([[0.0, 1, 1, 0], [0, 1, 1, 1]], dtype=torch.float64)
    token_rewards = torch.tensor([[0.0, -0.1, -0.2, 0], [0, 0.3, 0, -0.5]], dtype=torch.float64)
    adv = token_advantages(torch.tensor([2.0, 0.0], dtype=torch.float64), mask, "rloo", 2, token_rewards=token_rewards)
    expected = torch.tensor([[0.0, 2 - 0.3, 2 - 0.2, 0], [0, -2 - 0.2, -2 - 0.5, -2 - 0.5]], dtype=torch.float64)
    torch.testing.assert_close(adv, expected)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown advantage 'ppo'"):
        advantages(torch.ones(4), "ppo", 2)
    with pytest.raises(ValueError, match="group_size >= 2"):
        advantages(torch.ones(4), "rloo", 1)
    with pytest.raises(ValueError, match="do not split into groups of 3"):
        advantages(torch.ones(4), "grpo", 3)
    assert set(KINDS) == {"reinforce", "rloo", "grpo", "dr_grpo"}


# ---------------------------------------------------------------------------------- the peers, written by hand


def masked_mean(x, mask, dim=None):
    return (x * mask).sum() / mask.sum() if dim is None else (x * mask).sum(dim) / mask.sum(dim)


def trl_grpo_loss(logp, ref_logp, scores, mask, loss_type, beta):
    """TRL's GRPOTrainer._compute_loss, one iteration (ratio 1 with gradient), k3 in the loss."""
    grouped = scores.view(-1, K)
    adv = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).reshape(-1)
    ratio = torch.exp(logp - logp.detach())
    per_token = -ratio * adv[:, None]
    if beta:
        per_token = per_token + beta * (torch.exp(ref_logp - logp) - (ref_logp - logp) - 1)
    if loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if loss_type == "bnpo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1)
    return (per_token * mask).sum() / (per_token.shape[0] * REPLY)          # dr_grpo


def verl_loss(logp, scores, mask, estimator, agg):
    """verl's compute_{grpo,rloo}_outcome_advantage and agg_loss (torch.std, eps 1e-6), no KL."""
    grouped = scores.view(-1, K)
    if estimator == "grpo":
        adv = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)
    else:
        adv = (grouped * K / (K - 1) - grouped.mean(1, keepdim=True) * K / (K - 1))
    per_token = -adv.reshape(-1)[:, None] * mask * logp
    if agg == "token-mean":
        return masked_mean(per_token, mask)
    if agg == "seq-mean-token-sum":
        return (per_token * mask).sum(-1).mean()
    return masked_mean(per_token, mask, -1).mean()                         # seq-mean-token-mean


@pytest.fixture(scope="module")
def model_and_batch(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("xcheck-gpt2")
    save_random_gpt2(folder, vocab=64, layers=1, width=16, heads=2, positions=PROMPT + REPLY)
    model = AutoModelForCausalLM.from_pretrained(folder).double().eval()
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(1, 64, (GROUPS, PROMPT), generator=gen).repeat_interleave(K, 0)
    ids = torch.cat([prompts, torch.randint(1, 64, (GROUPS * K, REPLY), generator=gen)], 1)
    mask = torch.zeros_like(ids)
    lengths = torch.randint(1, REPLY + 1, (GROUPS * K,), generator=gen)
    for b, n in enumerate(lengths.tolist()):
        mask[b, PROMPT:PROMPT + n] = 1                                     # right-padded, variable length
    scores = torch.randn(GROUPS * K, generator=gen, dtype=torch.float64)
    scores[K:2 * K] = 0.5                                                  # a tied group
    batch = reply_batch(ids, mask, PROMPT, K, scores)
    batch.ref_logp = (sequence_log_probs(model, ids, start=PROMPT).detach()
                      + 0.1 * torch.randn(ids.shape, generator=gen, dtype=torch.float64)) * mask
    return folder, batch


def pglab_gradient(folder, batch, **settings):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder).double().eval()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    pg_update(HFPolicy(model), optimizer, batch, UpdateSpec(group_size=K, max_grad_norm=None, chunk_tokens=0,
                                                            **settings), start=PROMPT)
    return torch.cat([(b - p.detach()).flatten() for b, p in zip(before, model.parameters())])


def reference_gradient(folder, batch, loss_of):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder).double().eval()
    logp = torch.where(batch.action_mask.bool(), sequence_log_probs(model, batch.ids, start=PROMPT), 0.0)
    grads = torch.autograd.grad(loss_of(logp, batch.action_mask.double()), list(model.parameters()))
    return torch.cat([g.flatten() for g in grads])


@pytest.mark.parametrize("loss_type,mode", [("grpo", "seq_mean_token_mean"), ("bnpo", "token_mean"),
                                            ("dr_grpo", "constant")])
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_pg_update_matches_trl_grpo(model_and_batch, loss_type, mode, beta):
    folder, batch = model_and_batch
    ours = pglab_gradient(folder, batch, advantage="grpo", unbiased=True, eps=1e-4, beta=beta, kl_in="loss",
                          mode=mode, norm_const=GROUPS * K * REPLY)
    theirs = reference_gradient(folder, batch, lambda logp, mask: trl_grpo_loss(
        logp, batch.ref_logp, batch.rewards, mask, loss_type, beta))
    torch.testing.assert_close(ours, theirs, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("estimator,kind", [("grpo", "grpo"), ("rloo", "rloo")])
@pytest.mark.parametrize("agg,mode", [("token-mean", "token_mean"), ("seq-mean-token-sum", "seq_mean_token_sum"),
                                      ("seq-mean-token-mean", "seq_mean_token_mean")])
def test_pg_update_matches_verl(model_and_batch, estimator, kind, agg, mode):
    folder, batch = model_and_batch
    ours = pglab_gradient(folder, batch, advantage=kind, unbiased=True, eps=1e-6, mode=mode)
    theirs = reference_gradient(folder, batch, lambda logp, mask: verl_loss(logp, batch.rewards, mask, estimator, agg))
    torch.testing.assert_close(ours, theirs, atol=1e-10, rtol=1e-8)


def test_tied_group_of_different_lengths_moves_nothing(model_and_batch):
    folder, batch = model_and_batch
    tied = batch.select(list(range(K, 2 * K)))
    assert tied.action_mask.sum(-1).unique().numel() > 1, "the tied group must have replies of different lengths"
    moved = pglab_gradient(folder, tied, advantage="rloo")
    assert torch.equal(moved, torch.zeros_like(moved))


def test_trl_std_is_the_book_std_times_the_bessel_factor():
    scores = torch.tensor([0.0, 1.0, 3.0, 7.0, 2.0, 2.5, 9.0, -1.0], dtype=torch.float64)
    book, trl = advantages(scores, "grpo", 4), advantages(scores, "grpo", 4, unbiased=True, eps=1e-4)
    torch.testing.assert_close(trl / book, torch.full((8,), (3 / 4) ** 0.5, dtype=torch.float64), rtol=1e-4, atol=0)
