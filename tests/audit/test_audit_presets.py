"""The first audit presets against a hand-written reference: the peer's own loss code, transcribed line by line.

The pglab presets run the trainer's own ``pg_loss``; their reference is the update as the book
defines it. The references of the others follow TRL's GRPOTrainer._compute_loss and RLOOTrainer, verl's core_algos (GRPO
advantage, vanilla PPO loss, agg_loss, kl_penalty) and dp_actor, and OpenRLHF's compute_reward,
get_cumulative_returns, advantage normalisation and PolicyLoss (docs/audit.md gives files and
options). Presets are built from pglab's estimators; the audit uses only d loss / d logp, so that
is what must agree, on a batch with replies of different lengths.
"""

import pytest
import torch

from pglab.audit.presets import PRESETS, TRL_LOSS_TYPES, VERL_KL, VERL_MODES, by_group, get_preset

GROUPS, K, T = 3, 4, 5


@pytest.fixture(scope="module")
def batch():
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, T + 1, (GROUPS * K,), generator=gen)
    mask = (torch.arange(T) < lengths[:, None]).double()
    logp = -torch.rand(GROUPS * K, T, generator=gen, dtype=torch.float64) * 2 * mask
    ref = -torch.rand(GROUPS * K, T, generator=gen, dtype=torch.float64) * 2 * mask
    rewards = torch.randn(GROUPS * K, generator=gen, dtype=torch.float64)
    return logp, ref, rewards, mask, torch.arange(GROUPS).repeat_interleave(K)


def grad_of(loss_fn, batch):
    logp, *rest = batch
    logp = logp.clone().requires_grad_(True)
    return torch.autograd.grad(loss_fn(logp, *rest), logp)[0] * batch[3]


def trl_grpo_reference(loss_type, beta, bias_correction):
    def loss(per_token_logps, ref_per_token_logps, rewards, mask, group):
        grouped = rewards.view(-1, K)
        mean_grouped_rewards = grouped.mean(dim=1).repeat_interleave(K, dim=0)
        std_rewards = grouped.std(dim=1).repeat_interleave(K, dim=0)        # nanstd: Bessel-corrected
        advantages = ((rewards - mean_grouped_rewards) / (std_rewards + 1e-4)).unsqueeze(1)
        old_per_token_logps = per_token_logps.detach()
        coef_1 = torch.exp(per_token_logps - old_per_token_logps)
        per_token_kl = torch.exp(ref_per_token_logps - per_token_logps) - (ref_per_token_logps - per_token_logps) - 1
        if bias_correction:
            per_token_kl = per_token_kl * coef_1
        coef_2 = torch.clamp(coef_1, 1 - 0.2, 1 + 0.2)
        per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
        per_token_loss = per_token_loss + beta * per_token_kl
        if loss_type == "grpo":
            return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
        if loss_type == "bnpo":
            return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
        if loss_type == "dr_grpo":
            return (per_token_loss * mask).sum() / (per_token_loss.size(0) * T)   # max_completion_length = T
        return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)          # dapo: num_items_in_batch
    return loss


def trl_rloo_reference(beta):
    def loss(per_token_logps, ref_per_token_logps, rewards, completion_mask, group):
        old_per_token_logps = per_token_logps.detach()
        per_token_kl = old_per_token_logps - ref_per_token_logps
        kl = (per_token_kl * completion_mask).sum(-1)
        rewards = rewards - beta * kl
        grouped_rewards = rewards.view(-1, K)
        baselines = ((grouped_rewards.sum(1, keepdim=True) - grouped_rewards) / (K - 1)).view(-1)
        advantages = rewards - baselines
        logps = (per_token_logps * completion_mask).sum(1)
        coef_1 = torch.exp(logps - logps.detach())
        coef_2 = torch.clamp(coef_1, 1 - 0.2, 1 + 0.2)
        return (-torch.min(coef_1 * advantages, coef_2 * advantages)).mean()
    return loss


def verl_agg_loss(loss_mat, loss_mask, loss_agg_mode):
    if loss_agg_mode == "token-mean":
        return (loss_mat * loss_mask).sum() / loss_mask.sum()
    if loss_agg_mode == "seq-mean-token-sum":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        seq_mask = (torch.sum(loss_mask, dim=-1) > 0).float()
        return (seq_losses * seq_mask).sum() / seq_mask.sum()
    if loss_agg_mode == "seq-mean-token-mean":
        seq_mask = torch.sum(loss_mask, dim=-1)
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / (seq_mask + 1e-8)
        seq_mask = (seq_mask > 0).float()
        return (seq_losses * seq_mask).sum() / seq_mask.sum()
    seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)                            # seq-mean-token-sum-norm:
    return seq_losses.mean() / loss_mask.shape[-1]                                  # 0.9.1 divides by B too


def verl_kl_penalty_forward(logprob, ref_logprob, kl_penalty):
    if kl_penalty in ("kl", "k1"):
        return logprob - ref_logprob
    if kl_penalty in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    kl = torch.clamp(ref_logprob - logprob, min=-20, max=20)
    return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)


def verl_reference(kl_loss_type, loss_agg_mode, kl_loss_coef):
    def loss(log_prob, ref_log_prob, rewards, response_mask, group):
        scores = rewards.view(-1, K)
        scores = ((scores - scores.mean(1, keepdim=True)) / (scores.std(1, keepdim=True) + 1e-6)).view(-1)
        advantages = scores.unsqueeze(-1) * response_mask
        ratio = torch.exp(log_prob - log_prob.detach())
        pg_losses = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, 0.8, 1.2))
        pg_loss = verl_agg_loss(pg_losses, response_mask, loss_agg_mode)
        kld = verl_kl_penalty_forward(log_prob, ref_log_prob, kl_loss_type)
        return pg_loss + verl_agg_loss(kld, response_mask, loss_agg_mode) * kl_loss_coef
    return loss


def openrlhf_reference(estimator, kl_coef):
    def loss(action_log_probs, base_action_log_probs, r, action_mask, group):
        rewards = r.reshape(-1, K)
        if estimator == "rloo":
            rewards = rewards - (rewards.sum(-1, keepdim=True) - rewards) / (K - 1)
        elif estimator == "group_norm":
            rewards = (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-9)
        rewards = rewards.reshape(-1).clamp(-10, 10)                               # compute_reward clips after
        kl = (action_log_probs - base_action_log_probs).detach()
        eos_indices = action_mask.size(1) - 1 - action_mask.long().fliplr().argmax(dim=1, keepdim=True)
        last_reward = torch.zeros_like(kl).scatter_(dim=1, index=eos_indices, src=rewards.unsqueeze(1))
        reward = (last_reward - kl_coef * kl) * action_mask
        returns = torch.zeros_like(reward)
        cumulative = torch.zeros(reward.size(0), dtype=reward.dtype)
        for t in reversed(range(reward.size(1))):
            cumulative = reward[:, t] + 1.0 * cumulative
            returns[:, t] = cumulative
        advantages = returns
        if estimator == "reinforce":
            num_actions = action_mask.sum()
            mean = (advantages * action_mask).sum() / num_actions
            var = ((advantages - mean).pow(2) * action_mask).sum() / num_actions
            advantages = (advantages - mean) * var.clamp(min=1e-8).rsqrt()
        ratio = (action_log_probs - action_log_probs.detach()).clamp(min=-20.0, max=20.0).exp()
        surr = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages)
        return (surr * action_mask).sum() / action_mask.sum()
    return loss


def pglab_reference(beta, advantage):
    """train-lm's update by its definition (llm-ch6 §6.11-6.12): the advantage on the score, k1 in the reward with
    reward-to-go (rloo, dr_grpo), or k3 in the loss (grpo, TRL's sample std); token_mean (constant B x T: dr_grpo)."""
    def loss(logp, ref, rewards, mask, group):
        grouped = rewards.view(-1, K)
        if advantage == "rloo":
            adv = grouped - (grouped.sum(1, keepdim=True) - grouped) / (K - 1)
        elif advantage == "grpo":
            adv = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
        else:
            adv = grouped - grouped.mean(1, keepdim=True)
        per_token = adv.reshape(-1, 1) * mask
        if advantage != "grpo":
            kl = ((logp - ref).detach() * mask).flip(-1).cumsum(-1).flip(-1)      # reward-to-go of -beta k1
            per_token = per_token - beta * kl * mask
        terms = -per_token * logp
        if advantage == "grpo":
            terms = terms + beta * (torch.exp(ref - logp) - (ref - logp) - 1)
        if advantage == "dr_grpo":
            return (terms * mask).sum() / mask.numel()
        return (terms * mask).sum() / mask.sum()
    return loss


def references(beta):
    refs = {"pglab": pglab_reference(beta, "rloo"), "pglab-grpo": pglab_reference(beta, "grpo"),
            "pglab-dr_grpo": pglab_reference(beta, "dr_grpo")}
    for loss_type in TRL_LOSS_TYPES:
        refs[f"trl-{loss_type}"] = trl_grpo_reference(loss_type, beta, False)
        refs[f"trl-{loss_type}-kl-corrected"] = trl_grpo_reference(loss_type, beta, True)
    refs["trl-rloo"] = trl_rloo_reference(beta)
    for kl_type in VERL_KL:
        for agg_mode in VERL_MODES:
            refs[f"verl-{kl_type}-{agg_mode}"] = verl_reference(kl_type, agg_mode, beta)
    for estimator in ("reinforce", "rloo", "group_norm"):
        refs[f"openrlhf-{estimator}"] = openrlhf_reference(estimator, beta)
    return refs


def test_every_hand_reference_names_a_preset():
    """The presets read before the peers could be imported; tests/audit/test_presets_peers.py runs every peer
    preset against the peer's own code."""
    assert set(references(0.1)) <= set(PRESETS)


@pytest.mark.parametrize("beta", [0.0, 0.3])
@pytest.mark.parametrize("name", sorted(references(0.0)))
def test_preset_gradient_matches_the_peer_code(name, beta, batch):
    ours, theirs = grad_of(get_preset(name, beta), batch), grad_of(references(beta)[name], batch)
    # rtol 1e-8: verl's seq-mean-token-mean divides by (length + 1e-8), a relative change of at most 1e-8
    assert torch.allclose(ours, theirs, rtol=1e-8, atol=1e-13), (ours - theirs).abs().max()
    assert theirs.abs().max() > 0


def test_presets_with_different_options_differ(batch):
    """The references are sharp: loss types, corrections and KL kinds change the gradient on this batch."""
    grads = {name: grad_of(get_preset(name, 0.3), batch) for name in
             ("trl-grpo", "trl-bnpo", "trl-dr_grpo", "trl-grpo-kl-corrected", "verl-k1-token-mean",
              "verl-mse-token-mean", "verl-low_var_kl-token-mean")}
    names = list(grads)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not torch.allclose(grads[a], grads[b], atol=1e-6), (a, b)


def test_by_group_refuses_unsorted_rows():
    with pytest.raises(ValueError, match="group by group"):
        by_group(torch.zeros(4), torch.tensor([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="group by group"):
        by_group(torch.zeros(3), torch.tensor([0, 0, 1]))
