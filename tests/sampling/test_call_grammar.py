"""Constrained calls (pglab.sampling.call_grammar): the allowed ids against a brute-force check over every valid
call, the collector's renormalised sampling against the update's scoring, and the calls it writes."""

import dataclasses
import itertools
import random

import pytest
import torch

from pglab.envs.tooluse import prompt_tools, well_formed
from pglab.models.hf import load_causal_lm
from pglab.models.policy import HFPolicy
from pglab.sampling.call_grammar import (
    CLOSE,
    OPEN,
    CallGrammar,
    TokenTexts,
    argument_words,
    context_words,
    tool_arities,
)
from pglab.sampling.episodes import collect_episodes, sample_tokens
from pglab.sampling.scoring import sequence_log_probs
from pglab.sampling.text_episodes import TextLayout
from pglab.trainers.hf_agent import ensure_agent
from support.tool_envs import area, calculator, road

PROMPT = "Is 12 -3 more than x? Use <call> add A B </call> or <call> neg [N] </call>; end with <call> say X </call>."


def test_tool_arities_read_the_usages_with_brackets_optional_and_a_bare_name_open():
    assert tool_arities(PROMPT) == {"add": (2, 2), "neg": (0, 1), "say": (1, 1)}
    assert tool_arities("Ask <call> ping </call>, <call> ping X </call> or <call> look") == {"ping": (0, 1),
                                                                                             "look": (0, 3)}


def test_context_words_strip_punctuation_keep_a_minus_and_drop_tags():
    assert context_words('Is it -3, (or "oslo")? <call> a </call> x.') == {"Is", "it", "-3", "or", "oslo", "a", "x"}


def test_argument_words_drop_a_usages_argument_names_and_keep_its_literal_options():
    assert argument_words(PROMPT) == {"Is", "12", "-3", "more", "than", "x", "Use", "or", "end", "with"}
    choice = "Is 42 even? Reply <call> answer yes </call> or <call> answer no </call>."
    assert argument_words(choice) == {"Is", "42", "even", "Reply", "or", "yes", "no"}
    assert argument_words("Say <call> say COLOUR </call> the COLOUR of a kiwi") >= {"COLOUR", "kiwi"}
    assert argument_words("error: try <call> seats DAY </call>") == {"error", "try"}


class CharTokenizer:
    """Every printable character is a token, plus a few merged pieces; id 0 is end-of-text."""

    def __init__(self, pieces=(" 1", "12", " a", "dd", "<call>", " </call>", " </", "call>", "-3")):
        chars = sorted(set("".join(sorted(context_words(PROMPT))) + " <>/ca" + "".join(pieces) + "lsyz"))
        self.vocab = ["<eos>", *chars, *pieces]
        self.eos_token_id, self.all_special_ids = 0, [0]

    def __len__(self):
        return len(self.vocab)

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)


def valid_calls(grammar: CallGrammar) -> list[str]:
    words = sorted(grammar.words)
    return [" ".join([OPEN, tool, *args, CLOSE]) for tool, (low, high) in grammar.arities.items()
            for n in range(low, high + 1) for args in itertools.product(words, repeat=n)]


def test_allowed_ids_are_exactly_those_that_keep_the_text_a_prefix_of_a_valid_call():
    tokenizer = CharTokenizer()
    grammar = CallGrammar(PROMPT, TokenTexts.of(tokenizer))
    grammar.observe("the sum is 9.")
    calls = valid_calls(grammar)
    valid_prefixes = {call[:k] for call in calls for k in range(len(call) + 1)}
    rng = random.Random(0)
    texts = {""} | {call[:k] for call in rng.sample(calls, 60) for k in range(1, len(call))}
    for text in sorted(texts):     # (no token of CharTokenizer spans more than the rest of a word and the next)
        brute = {i for i in range(1, len(tokenizer)) if text + tokenizer.vocab[i] in valid_prefixes}
        assert set(grammar.allowed(text)) == brute | ({0} if text == "" else set()), text
    assert grammar.allowed("<call> add 12 -3 </call>") == ()
    assert grammar.allowed("<call> sub") == () and grammar.allowed("<call>  add") == ()


def test_a_walk_through_allowed_ids_always_writes_a_well_formed_call_of_argument_words():
    tokenizer = CharTokenizer()
    grammar = CallGrammar(PROMPT, TokenTexts.of(tokenizer))
    rng = random.Random(1)
    for _ in range(200):
        text = ""
        while CLOSE not in text:
            choices = [i for i in grammar.allowed(text) if i != 0]
            text += tokenizer.vocab[rng.choice(choices)]
        assert well_formed(text, prompt_tools(PROMPT))
        tool, *args = text.split()[1:-1]
        low, high = grammar.arities[tool]
        assert low <= len(args) <= high and set(args) <= argument_words(PROMPT), text


@pytest.fixture(scope="module")
def quick_agent():
    return load_causal_lm(str(ensure_agent("tool", "quick", progress=False)))


def test_constrained_episodes_are_scored_as_they_were_sampled_and_their_calls_are_well_formed(quick_agent):
    model, tokenizer = quick_agent
    layout = TextLayout(tokenizer, chat=False, max_call_tokens=24, calls="constrained")
    makes = (calculator, area, road)
    envs = [makes[i % 3]() for i in range(12)]
    batch = collect_episodes(HFPolicy(model.eval(), pad_id=layout.pad_id), layout, envs, [i // 3 for i in range(12)],
                             torch.Generator().manual_seed(0), max_turns=3)
    assert batch.allowed is not None and bool(batch.allowed.table[0].all())
    policy_positions = batch.action_mask.bool()
    assert bool((batch.allowed.index[policy_positions] > 0).all())      # every sampled id was constrained
    assert bool((batch.allowed.index[~policy_positions] == 0).all())
    scored = sequence_log_probs(HFPolicy(model, pad_id=layout.pad_id), batch)
    gap = (scored - batch.logp_old)[policy_positions].abs().max()
    assert gap < 1e-4, gap
    unconstrained = sequence_log_probs(HFPolicy(model, pad_id=layout.pad_id), dataclasses.replace(batch, allowed=None))
    assert (unconstrained - batch.logp_old)[policy_positions].abs().max() > 100 * gap   # the negative control
    for log in batch.info:
        seen = argument_words(log.prompt)
        for call, stop, observation in zip(log.calls, log.stops, log.observations):
            if stop == "closing":       # (a call can also end at end-of-text, or be cut at the token cap)
                assert well_formed(call, prompt_tools(log.prompt)), call
                assert set(call.split()[2:-1]) <= seen, (call, seen)
            seen |= argument_words(layout.shown(observation))
    assert sum(stop == "closing" for log in batch.info for stop in log.stops) >= 12


def test_free_calls_leave_the_batch_unconstrained(quick_agent):
    model, tokenizer = quick_agent
    layout = TextLayout(tokenizer, chat=False, calls="free")
    batch = collect_episodes(HFPolicy(model.eval(), pad_id=layout.pad_id), layout, [calculator() for _ in range(2)],
                             [0, 1], torch.Generator().manual_seed(0), max_turns=1)
    assert batch.allowed is None
    with pytest.raises(ValueError, match="calls must be one of"):
        TextLayout(tokenizer, chat=False, calls="strict")


def test_exploring_sampler_draws_from_the_uniform_mixture_and_returns_its_log_probabilities():
    n, share = 6000, 0.3
    logits = torch.tensor([[10.0, 0.0, 0.0, 5.0, 0.0]]).repeat(n, 1)
    allowed = torch.tensor([[True, True, True, False, False]]).repeat(n, 1)
    policy = torch.softmax(logits[0].masked_fill(~allowed[0], -torch.inf), -1)
    mixture = (1 - share) * policy + share * allowed[0].float() / 3
    tokens, logps = sample_tokens(logits, torch.Generator().manual_seed(0), allowed=allowed,
                                  explore=torch.full((n,), share))
    counts = torch.bincount(torch.tensor(tokens), minlength=5).float() / n
    se = (mixture * (1 - mixture) / n).sqrt()
    assert bool(((counts - mixture).abs() <= 4 * se).all()), (counts, mixture)      # 4 binomial standard errors
    assert counts[3] == counts[4] == 0
    assert torch.allclose(torch.tensor(logps), mixture.log()[torch.tensor(tokens)])
    plain, _ = sample_tokens(logits[:200], torch.Generator().manual_seed(0), allowed=allowed[:200])
    assert plain.count(0) >= 199       # the negative control: pi alone almost never leaves token 0 (p 9e-5 each)


def test_exploring_episodes_record_the_mixture_where_a_call_chooses_a_word_and_the_policy_elsewhere(quick_agent):
    model, tokenizer = quick_agent
    layout = TextLayout(tokenizer, chat=False, max_call_tokens=24, calls="constrained")
    policy, share = HFPolicy(model.eval(), pad_id=layout.pad_id), 0.5
    batch = collect_episodes(policy, layout, [calculator() for _ in range(8)], list(range(8)),
                             torch.Generator().manual_seed(0), max_turns=3, explore=share)
    scored = sequence_log_probs(policy, batch)
    sizes = batch.allowed.table.sum(-1).float()[batch.allowed.index]
    mixture = ((1 - share) * scored.exp() + share / sizes).log()
    chooses = torch.zeros_like(batch.action_mask, dtype=torch.bool)
    for b, log in enumerate(batch.info):
        grammar = layout.grammar(log.prompt)
        for end, ids, observation in zip(log.call_ends, log.call_ids, log.observations):
            for j in range(len(ids)):
                chooses[b, end - len(ids) + 1 + j] = grammar.between_words(layout.call_text(ids[:j]))
            grammar.observe(layout.shown(observation))
    policy_tokens = batch.action_mask.bool()
    assert (batch.logp_old - mixture)[chooses].abs().max() < 1e-4
    assert (batch.logp_old - scored)[policy_tokens & ~chooses].abs().max() < 1e-4
    assert (batch.logp_old - scored)[chooses & (sizes > 1)].abs().max() > 0.1      # the mixture is not pi there
    assert int(chooses.sum()) >= 16 and int((policy_tokens & ~chooses).sum()) >= 16


def test_a_call_chooses_after_its_opening_its_tool_and_each_whole_argument():
    grammar = CallGrammar("What is 12 + 30? Use <call> add A B </call>, then <call> answer N </call>.",
                          TokenTexts({}, None))
    chooses = ["<call>", "<call> add", "<call> add 12", "<call> add 12 30", "<call> answer 30"]
    writes = ["", "<ca", "<call> ad", "<call> add 1", "<call> add 12 30 </call>", "<call> add A"]
    assert all(grammar.between_words(text) for text in chooses)
    assert not any(grammar.between_words(text) for text in writes)
