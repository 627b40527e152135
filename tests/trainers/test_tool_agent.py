"""The tool-use agent (``--model default`` outside BugFixEnv): its corpus, its calls, the generic format cost, the
scripted-play hooks, and train-agent on the docs' calculator at quick size."""

import dataclasses
import json
import math
import random

import pytest
import torch

from pglab.envs.tooluse import VERSION, corpus, prompt_tools, well_formed
from pglab.models.hf import load_causal_lm
from pglab.models.policy import HFPolicy
from pglab.runtime.options import SettingsError
from pglab.sampling.episodes import EpisodeLog, collate, collect_episodes
from pglab.sampling.text_episodes import TextLayout
from pglab.trainers.agent_config import TOOL_AGENT, USER_ENV, AgentConfig
from pglab.trainers.episodes import answer_shape, format_costs, malformed_calls, novelty_bonus
from pglab.trainers.hf_agent import agent_dir, ensure_agent, shipped_agent, train_agent, warm_start
from support.tool_envs import ENVS, Calculator


def test_the_corpus_is_the_same_for_a_seed_and_every_scripted_call_names_a_tool_of_its_prompt():
    first, again, other = corpus(200, 3), corpus(200, 3), corpus(200, 4)
    assert first == again and first != other
    for t in first:
        tools = prompt_tools(t.prompt)
        assert tools and len(t.calls) == len(t.observations) >= 1
        assert all(well_formed(call, tools) for call in t.calls), t


def test_well_formed_wants_one_call_of_a_named_tool():
    tools = prompt_tools("What is 3 + 4? Use <call> add A B </call>, then <call> answer N </call>.")
    assert tools == ("add", "answer")
    assert well_formed("<call> add 3 4 </call>", tools) and well_formed(" <call> answer 7</call>\n", tools)
    for call in ("<call> sub 3 4 </call>", "add 3 4", "<call> add 3 4", "x <call> add 3 4 </call>",
                 "<call> add <call> answer 7 </call>"):
        assert not well_formed(call, tools), call


@pytest.mark.parametrize("kind", ["tool", "default"])
def test_the_shipped_agents_hold_the_current_recipes_and_are_what_the_default_loads(kind):
    for size in ("full", "quick"):
        folder = shipped_agent(kind, size)
        assert folder is not None, f"the shipped agent is another recipe: run scripts/ship_agent.py {kind} {size}"
        assert ensure_agent(kind, size, progress=False) == folder
        stats = json.loads((folder / "agent.json").read_text())
        assert stats["torch"] and stats["cpu"] and stats["recipe"].get("corpus_version", VERSION) == VERSION
        model, tokenizer = load_causal_lm(str(folder))
        assert model.num_parameters() == stats["parameters"] and len(tokenizer) == stats["recipe"]["vocab"]


def test_a_recipe_unlike_the_shipped_one_is_built_on_the_machine_not_loaded(monkeypatch):
    before = agent_dir("tool", "quick")
    monkeypatch.setitem(TOOL_AGENT, "quick", {**TOOL_AGENT["quick"], "corpus": TOOL_AGENT["quick"]["corpus"] + 1})
    assert shipped_agent("tool", "quick") is None and agent_dir("tool", "quick") != before


def first_call_rate(model, tokenizer, n: int) -> float:
    """The share of n first calls, on the unseen prompts of tests/support/tool_envs, that are well formed."""
    layout = TextLayout(tokenizer, chat=False, max_call_tokens=24)
    makes = list(ENVS.values())
    batch = collect_episodes(HFPolicy(model.eval(), pad_id=layout.pad_id), layout, [makes[i % 4]() for i in range(n)],
                             list(range(n)), torch.Generator().manual_seed(0), max_turns=1)
    return sum(well_formed(log.calls[0], prompt_tools(log.prompt)) for log in batch.info) / n


def test_the_quick_tool_agent_calls_a_tool_of_an_unseen_prompt_more_often_than_random_weights():
    model, tokenizer = load_causal_lm(str(ensure_agent("tool", "quick", progress=False)))
    n = 128
    cloned = first_call_rate(model, tokenizer, n)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        fresh = type(model)(model.config)
    blank = first_call_rate(fresh, tokenizer, n)
    # the difference of two binomial shares, each with its own standard error (a floor of one success in n)
    se = math.sqrt(sum(max(p, 1 / n) * (1 - max(p, 1 / n)) / n for p in (cloned, blank)))
    assert cloned > blank + 3 * se, (cloned, blank, se)


def test_the_format_cost_lands_on_the_malformed_calls_last_token_only():
    prompt = "What is 3 + 4? Use <call> add A B </call>, then <call> answer N </call>."
    log = EpisodeLog(prompt, calls=["<call> add 3 4 </call>", "<call> sub 7 </call>", "7"],
                     stops=["closing", "closing", "eos"], call_ends=[3, 7, 9])
    assert malformed_calls(log) == [False, True, False]
    batch = collate([(list(range(10)), [1] + [2] * 9)], [0.0], 0, info=[log])
    costs = format_costs(batch, 0.25).token_rewards
    assert costs[0, 7] == -0.25 and int((costs != 0).sum()) == 1
    assert malformed_calls(EpisodeLog("no tools here", calls=["anything"], stops=["cap"])) == [False]
    assert format_costs(batch, 0.0) is batch


def test_the_novelty_bonus_raises_the_reads_no_other_call_got_and_sums_to_zero_over_the_reads():
    prompt = "Where is the train to york? <call> departures CITY </call>, <call> announce PLATFORM </call>."
    logs = [EpisodeLog(prompt, calls=["<call> departures york </call>", "<call> announce 7 </call>"],
                       call_ends=[3, 6], observations=["platform 7", "announced"]),
            EpisodeLog(prompt, calls=["<call> departures group </call>", "<call> departures for </call>",
                                      "<call> announce 2 </call>"],
                       call_ends=[2, 5, 8], observations=["no trains to group.", "no trains to for.", "announced"]),
            EpisodeLog(prompt, calls=["<call> go a </call>"], stops=["closing"], call_ends=[4],
                       observations=["error"])]
    batch = collate([(list(range(10)), [1] + [2] * 9)] * 3, [0.0] * 3, 0, info=logs)
    bonus = novelty_bonus(batch, 0.3).token_rewards
    # the answers read: "platform 7" once, "no trains to _." twice (the call's own word blanked); an episode's
    # last answer is never read: u = 1/3 of the reads are unique
    expected = torch.zeros(3, 10)
    expected[0, 3], expected[1, 2], expected[1, 5] = 0.3 * (1 - 1 / 3), -0.3 / 3, -0.3 / 3
    torch.testing.assert_close(bonus, expected)
    assert abs(float(bonus.sum())) < 1e-6
    assert novelty_bonus(batch, 0.0) is batch
    assert answer_shape("<call> departures york </call>", "york: platform 7, york.") == "_ platform 7, _"
    expected[2, 4] -= 0.25       # the malformed call's format cost, beside the bonus
    torch.testing.assert_close(novelty_bonus(format_costs(batch, 0.25), 0.3).token_rewards, expected)


def test_novelty_defaults_to_the_user_setting_and_refuses_a_negative_or_endless_bonus():
    assert AgentConfig(env="support.tool_envs:calculator").novelty == USER_ENV["novelty"]
    assert AgentConfig(env="bugfix").novelty == 0.0
    for bad in (-0.1, float("inf"), float("nan")):
        with pytest.raises(SettingsError, match="--novelty is the bonus of a call with a new answer"):
            AgentConfig(env="support.tool_envs:calculator", novelty=bad)


class Demonstrated(Calculator):
    """The calculator with demonstrations (the oracle's calls), to warm-start on."""

    def demonstrations(self, seed: int) -> list[str]:
        return [f"<call> add {self.a} {self.b} </call>", f"<call> answer {self.a + self.b} </call>"]


class Sampled(Calculator):
    """The calculator with a random well-formed call for its state."""

    def sample_call(self, rng: random.Random) -> str:
        return rng.choice([f"<call> add {self.a} {self.b} </call>", f"<call> answer {rng.randint(20, 198)} </call>"])


def test_the_scripted_play_hooks_warm_start_the_agent_and_nothing_happens_without_them():
    folder = str(ensure_agent("tool", "quick", progress=False))
    for make, hooked in ((Demonstrated, True), (Sampled, True), (Calculator, False)):
        model, tokenizer = load_causal_lm(folder)
        before = [p.detach().clone() for p in model.parameters()]
        stats = warm_start(model, TextLayout(tokenizer, chat=False), lambda split, make=make: make(), seed=0)
        moved = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
        assert (stats is not None) == hooked == moved, make


def test_calls_are_constrained_for_a_module_environment_and_free_where_a_contract_wants_free_text():
    assert AgentConfig(env="support.tool_envs:calculator").calls == "constrained"
    for env in ("bugfix", "trl:counter_env:CounterEnv", "reasoning-gym:chain_sum"):
        assert AgentConfig(env=env).calls == "free", env
    assert AgentConfig(env="bugfix", calls="constrained").calls == "constrained"
    with pytest.raises(SettingsError, match="unknown --calls 'strict'; pass one of free, constrained"):
        AgentConfig(env="support.tool_envs:calculator", calls="strict")


def test_train_agent_on_the_docs_calculator_at_quick_size(tmp_path):
    cfg = AgentConfig(env="support.tool_envs:calculator")
    assert (cfg.learning_rate, cfg.advantage) == (USER_ENV["learning_rate"], USER_ENV["advantage"])
    trained = train_agent(cfg, tmp_path, quick=True, progress=False)
    assert trained["config"].default_size == "quick" and len(trained["run"]["history"]) == 3
    assert all(log.prompt.startswith("What is") for log in trained["after"]["heldout"].info)
    assert (tmp_path / "policy" / "config.json").is_file()


def test_explore_defaults_to_the_user_setting_with_constrained_calls_and_is_refused_with_free_calls():
    assert AgentConfig(env="support.tool_envs:calculator").explore == USER_ENV["explore"]
    for env in ("bugfix", "trl:counter_env:CounterEnv"):
        assert AgentConfig(env=env).explore == 0.0, env
    assert AgentConfig(env="support.tool_envs:calculator", calls="free").explore == 0.0
    for bad in ({"explore": 1.0}, {"explore": -0.1}, {"explore": 0.2, "calls": "free"}):
        with pytest.raises(SettingsError, match="--explore is the share of uniform choice"):
            AgentConfig(env="support.tool_envs:calculator", **bad)


def test_exploring_training_weighs_each_token_by_the_policy_over_the_sampler(tmp_path):
    cfg = AgentConfig(env="support.tool_envs:calculator", explore=0.5, is_correction="token-tis")
    run = train_agent(cfg, tmp_path, quick=True, progress=False)["run"]
    weights = [row["is_weight_mean"] for row in run["history"]]
    assert all(0 < w < 2 and w != 1 for w in weights), weights     # min(pi / mu, 2): the correction acts
    plain = train_agent(dataclasses.replace(cfg, explore=0.0), tmp_path / "plain", quick=True, progress=False)["run"]
    assert all("is_weight_mean" not in row or row["is_weight_mean"] == 1 for row in plain["history"])
