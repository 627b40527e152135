"""tinyagent-reward-to-go's claim, the book's 43% reduction as one more base agent, fails on a plausible wrong
implementation: reward-to-go that is the whole return at every token (no causality, so no reduction)."""

import pytest

from pglab.experiments import tinyagent_reward_to_go as module
from pglab.reporting.result import Result
from pglab.trainers.cloning import CloningSettings, make_base_agent


@pytest.mark.experiment
def test_reward_to_go_that_is_the_whole_return_fails(monkeypatch):
    def brief_agent(tokenizer, seed):                          # seconds, not the full cloning (cached on disk)
        return make_base_agent(tokenizer, seed=seed, settings=CloningSettings(steps=20, episodes_per_task=1))

    def whole_return(rewards, gamma, mask):                  # every policy token weighted by the episode's return
        return rewards.sum(-1, keepdim=True) * mask

    monkeypatch.setattr(module, "make_base_agent", brief_agent)
    monkeypatch.setattr(module, "discounted_returns", whole_return)
    result = Result("tinyagent-reward-to-go", {})
    module.run(module.Config(per_task=1, seeds=3, resamples=20), result)
    reductions = [row["reduction"] for row in result.tables["variance"][:-1]]
    assert reductions == pytest.approx([0.0] * 3, abs=1e-6)          # float32 gradients: roundoff
    assert [c.claim for c in result.failed_checks()] == [result.checks[-1].claim]
