"""Negative controls: each experiment's claims, run on a plausible wrong implementation, fail.

One per experiment of design-problems, aggregation, tinyagent-masking, bugfix-scripted, lm-kl, lm-beta-optimum,
kl-placement and grpo-bias (kl-matrix, grpo-weights, offpolicy-bias and framework-matrix have theirs in their own
test files). Quick sizes; the ones that train or clone agents are in the experiment tier.
"""

import pytest
import torch

from pglab.experiments import get_experiment
from pglab.reporting.result import Result
from pglab.runtime.threads import single_torch_thread


def failed(result: Result) -> list[str]:
    return [c.claim for c in result.failed_checks()]


def run(name: str, **overrides) -> Result:
    with single_torch_thread():
        return get_experiment(name).run(**overrides)


def test_design_problems_an_undetached_advantage_fails_the_unbiased_claim(monkeypatch):
    """reinforce_loss that keeps the advantage's graph (the detach bug itself) fails 'the detached estimate is the
    exact gradient'; the right one holds both claims."""
    from pglab.experiments import design_problems as dp

    config = dp.Config(bandit_samples=20_000)
    right = Result("design-problems", {})
    dp.detach_claims(right, dp.detach_errors(config), config)
    assert right.passed, failed(right)

    monkeypatch.setattr(dp, "reinforce_loss", lambda logp, adv, mask: -(adv * logp * mask).sum(-1).mean())
    wrong = Result("design-problems", {})
    dp.detach_claims(wrong, dp.detach_errors(config), config)
    assert any(c.startswith("detached baseline") for c in failed(wrong)), failed(wrong)


def test_aggregation_a_wrong_normaliser_fails_the_book_table(monkeypatch):
    """seq_mean_token_mean dividing by the longest reply instead of each reply's length fails the book's table."""
    from pglab.experiments import aggregation

    right = Result("aggregation", {})
    aggregation.weight_table(aggregation.Config(), right)
    assert right.passed and len(right.checks) == 4, failed(right)

    original = aggregation.aggregate_loss

    def by_longest(x, mask, mode, norm_const=None):
        if mode == "seq_mean_token_mean":
            return (x * mask).sum(-1).div(mask.shape[-1]).mean()
        return original(x, mask, mode, norm_const)

    monkeypatch.setattr(aggregation, "aggregate_loss", by_longest)
    wrong = Result("aggregation", {})
    aggregation.weight_table(aggregation.Config(), wrong)
    assert failed(wrong) == ["weight table, seq_mean_token_mean: per-token weights and trajectory totals"]


@pytest.mark.experiment
def test_tinyagent_masking_a_loss_without_the_action_mask_fails(monkeypatch):
    """Without the action mask every position, tool tokens too, gets a direct gradient: tool / policy is about 1,
    not at most a third. Six base agents (at three, Student's t with 2 dof cannot tell), briefly cloned (60 steps,
    cached on disk: a seventh of the full cloning's time) so that the control stays cheap; on the same agents the
    right loss holds both claims, so it is the mask that the claims detect."""
    from pglab.experiments import tinyagent_masking
    from pglab.trainers.cloning import CloningSettings, make_base_agent

    def brief_agent(tokenizer, seed):
        return make_base_agent(tokenizer, seed=seed, settings=CloningSettings(steps=60, episodes_per_task=2))

    monkeypatch.setattr(tinyagent_masking, "make_base_agent", brief_agent)
    right = run("tinyagent-masking", seeds=6)
    assert right.passed, [(c.claim, c.value, c.p_value) for c in right.checks]
    original = tinyagent_masking.reinforce_loss
    monkeypatch.setattr(tinyagent_masking, "reinforce_loss",
                        lambda logp, adv, mask, mode: original(logp, adv, torch.ones_like(mask), mode))
    wrong = run("tinyagent-masking", seeds=6)
    assert len(failed(wrong)) == 2, [(c.claim, c.value, c.p_value) for c in wrong.checks]


@pytest.mark.experiment
def test_bugfix_scripted_counting_submissions_as_passes_fails(monkeypatch):
    """A pass rate that counts every submitted episode (the hidden tests not read) fails 'measured = exact'."""
    from pglab.experiments import bugfix_scripted

    original = bugfix_scripted.rollout_stats

    def submissions(episodes):
        stats = original(episodes)
        return {**stats, "pass_rate": stats["submit_rate"]}

    monkeypatch.setattr(bugfix_scripted, "rollout_stats", submissions)
    result = run("bugfix-scripted", episodes_per_task=4)
    assert {"random pass rate on train equals its exact expectation",
            "blind pass rate on train equals its exact expectation"} <= set(failed(result)), failed(result)


def lm_kl_evals(learn: bool, priced: bool = True) -> dict[tuple[int, float], list[dict]]:
    """Evaluations of three seeds x three betas at steps 0, 150, 300: a run that learns (collapse at beta 0, the KL
    ordered by beta, the reward up), one whose optimiser step was never applied (every evaluation the start), or
    (``priced`` False) one whose KL penalty was never added to the reward (the same KL at every beta)."""
    start = {"step": 0, "reward": 0.0, "kl_exact": 0.0, "kl_exact_se": 0.1, "kl_k1": 0.0, "kl_k1_se": 0.1,
             "kl_gap_se": 0.1, "entropy": 3.4, "ref_perplexity": 29.0, "distinct_1": 0.18}
    evals = {}
    for seed in (0, 1, 2):
        for beta in (0.0, 0.05, 0.2):
            kl = (40.0 / (1 + 10 * beta * priced) + seed) if learn else 0.0
            end = {**start, "reward": 6.0 + 0.1 * seed if learn else 0.0, "kl_exact": kl, "kl_k1": kl,
                   "entropy": 0.3 + 0.05 * seed if learn and beta == 0 else 3.4,
                   "ref_perplexity": 9.0 + seed if learn and beta == 0 else 29.0,
                   "distinct_1": 0.007 + 0.001 * seed if learn and beta == 0 else 0.18}
            evals[seed, beta] = [start, {**end, "step": 150, "kl_exact": kl + (1.0 if learn else 0.0)},
                                 {**end, "step": 300}]
    return evals


def test_lm_kl_a_run_that_never_steps_fails_the_collapse_and_the_gain():
    from pglab.experiments.lm_kl import Config, claims

    right = Result("lm-kl", {})
    claims(right, lm_kl_evals(learn=True), Config())
    assert right.passed, failed(right)
    wrong = Result("lm-kl", {})
    claims(wrong, lm_kl_evals(learn=False), Config())
    assert {"beta = 0: entropy falls at least 3-fold (log of start / end, mean over seeds)",
            "beta = 0.05: held-out reward rises by at least 1 (end - start, mean over seeds)"} <= set(failed(wrong))
    unpriced = Result("lm-kl", {})
    claims(unpriced, lm_kl_evals(learn=True, priced=False), Config())
    assert sum("final exact KL falls" in claim for claim in failed(unpriced)) == 6, failed(unpriced)


@pytest.mark.experiment
def test_lm_beta_optimum_without_the_kl_penalty_fails(monkeypatch):
    """The KL price a thousand times too small in the trainer (a per-token price where the sequence's is meant,
    say): the policy goes past pi* towards the reward's maximum, and the claim that it ends as close to pi* as a
    fit fails (the claim's pi* is still the one at the configured beta)."""
    import pglab.trainers.lm.toy as toy

    original = toy.train_toward_optimum
    monkeypatch.setattr(toy, "train_toward_optimum", lambda model, reward, beta, *args, **kw:
                        original(model, reward, beta / 1000, *args, **kw))
    result = run("lm-beta-optimum", quick=True)
    assert failed(result), [(c.claim, c.value, c.p_value) for c in result.checks]


@pytest.mark.experiment
def test_kl_placement_k3_computed_as_k2_fails(monkeypatch):
    """k3 in the loss computed with k2's formula (a slip between the two): the claim that k3 in the loss follows the
    tokenwise forward KL, and the verdicts against the derivations, fail."""
    from pglab.experiments import kl_placement

    original = kl_placement.placement_loss
    monkeypatch.setattr(kl_placement, "placement_loss", lambda kind, place, beta, **kw:
                        original("k2" if (kind, place) == ("k3", "loss") else kind, place, beta, **kw))
    result = run("kl-placement", quick=True, train_steps=20, fixed_point_steps=50, betas=(0.5,))
    assert "k3 in the loss: largest |E[g] - grad(-J_tokenwise forward)| / |grad J|" in failed(result)
    assert "audit verdicts ('follows') that disagree with the derivations in docs/audit.md" in failed(result)


@pytest.mark.experiment
def test_grpo_bias_leave_one_out_with_its_own_reward_fails(monkeypatch):
    """'rloo' that subtracts the group mean with the reply's own reward (Dr. GRPO's advantage): leave-one-out's
    unbiasedness claim fails."""
    from pglab.experiments import grpo_bias

    original = grpo_bias.advantage_loss
    monkeypatch.setattr(grpo_bias, "advantage_loss", lambda kind, mode, **kw:
                        original("dr_grpo" if kind == "rloo" else kind, mode, **kw))
    result = run("grpo-bias", group_sizes=(2, 4))
    assert "leave-one-out: largest relative bias over K" in failed(result), failed(result)
