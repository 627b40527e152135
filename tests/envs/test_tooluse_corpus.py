"""The tool-use corpus's scripted play: every argument is copied from the prompt or an earlier observation, most
calls take the fitting values in order, and invented words are not only syllables."""

import re

from pglab.envs.tooluse import NUMBER_SLOTS, corpus


def arguments(call: str) -> list[str]:
    return call.replace("<call>", "").replace("</call>", "").split()[1:]


def test_every_argument_is_copied_from_the_prompt_or_an_earlier_observation():
    for t in corpus(400, 5):
        seen = re.findall(r"-?\w+", t.prompt)
        for call, observation in zip(t.calls, t.observations):
            assert all(arg in seen for arg in arguments(call)), (t.prompt, call)
            seen += re.findall(r"-?\w+", observation)


def test_two_number_calls_mostly_take_the_questions_numbers_in_order():
    in_order = total = 0
    for t in corpus(20000, 6):
        question_numbers = list(dict.fromkeys(re.findall(r"-?\d+", t.prompt.split("<call>")[0])))
        first = t.calls[0]
        args = arguments(first)
        usage = re.search(rf"<call> {re.escape(first.split()[1])} (\S+) (\S+) </call>", t.prompt)
        number_slots = usage is not None and all(slot in NUMBER_SLOTS for slot in usage.groups())
        if len(t.calls) > 1 and number_slots and len(args) == 2 and len(question_numbers) >= 2:
            total += 1
            in_order += args == question_numbers[:2]
    # Not IN_ORDER itself: some of a question's numbers are not its values (``from 0 to 26``) and a fifth of the
    # calls pick at random. Over corpus seeds 6-8 the share is 0.62-0.74, and 0.17-0.24 with IN_ORDER = 0; the
    # bound lies between, more than 4 se (about 0.04 at 150 calls) from both.
    assert total > 100 and in_order / total >= 0.45, (in_order / total, total)


def test_invented_words_include_letter_strings_that_are_not_syllables():
    words = set(re.findall(r"[a-z]{3,}", " ".join(t.prompt for t in corpus(500, 7))))
    not_syllabic = [w for w in words if re.search(r"[^aeiou]{3}", w)]
    assert len(not_syllabic) >= 20


def test_a_call_without_the_argument_its_prompt_shows_is_malformed():
    from pglab.envs.tooluse import prompt_tools, tools_with_arguments, well_formed

    prompt = "Name the capital of quamor. Ask with <call> capital COUNTRY </call>, or <call> stop </call>."
    tools, shown = prompt_tools(prompt), tools_with_arguments(prompt)
    assert shown == {"capital"}
    assert well_formed("<call> capital quamor </call>", tools, shown)
    assert well_formed("<call> stop </call>", tools, shown)
    assert not well_formed("<call> capital </call>", tools, shown) and not well_formed("<call>capital  </call>", tools,
                                                                                        shown)
    assert well_formed("<call> capital </call>", tools)       # without the prompt's arguments: the name alone
    # every scripted call of the corpus is well formed by the full check
    for t in corpus(300, 8):
        assert all(well_formed(c, prompt_tools(t.prompt), tools_with_arguments(t.prompt)) for c in t.calls), t


def test_long_numbers_and_values_inside_sentences_are_copied_whole_and_fillers_never():
    """Tool answers hold numbers of up to six digits, often inside a sentence (``the total is 6000 units``); the
    calls copy the value whole, and the words of a chatty question or a tool's sentence are never arguments."""
    from pglab.envs.tooluse import FILLERS, UNITS

    long_copies = wrapped_copies = 0
    for t in corpus(3000, 9):
        for call, observation in zip(t.calls[1:], t.observations):
            copied = [a for a in arguments(call) if re.search(rf"(^|\s){re.escape(a)}(\s|,|$)", observation)]
            long_copies += any(len(a) >= 4 and a.isdigit() for a in copied)
            wrapped_copies += bool(copied) and observation not in copied
        options = set(" ".join(re.findall(r"<call>(.*?)</call>", t.prompt)).split())      # a choice's literals
        for call in t.calls:
            assert not (set(arguments(call)) - options) & (set(FILLERS) | {w for u in UNITS for w in u.split()}), t
    assert long_copies >= 50 and wrapped_copies >= 200, (long_copies, wrapped_copies)


def test_a_share_of_tool_answers_hold_two_values_as_the_closed_form_says():
    """A valued answer (three quarters of those not spelling an argument backwards) is a two-value sentence PAIRED
    of the time: (1 - REVERSED) * 0.75 * PAIRED of all answers, within 4 binomial se."""
    import random

    from pglab.envs.tooluse import PAIRED, REVERSED, _observe

    rng, n = random.Random(1), 20000
    share = sum(len(_observe(rng, ("7",))[1]) == 2 for _ in range(n)) / n
    expected = (1 - REVERSED) * 0.75 * PAIRED
    assert abs(share - expected) < 4 * (expected * (1 - expected) / n) ** 0.5, (share, expected)


def test_a_call_after_an_observation_often_takes_that_observations_value():
    """Chaining (RECENT): the first argument of a tool call after a valued observation is a value of that
    observation, not of the prompt, in 0.47-0.50 of such calls over corpus seeds 10-12 and 0.30-0.33 with
    RECENT = 0 (about 1,800 calls, se 0.012); the bound lies more than 5 se from both."""
    took = total = 0
    for t in corpus(4000, 10):
        for i in range(1, len(t.calls) - 1):
            observation, args = t.observations[i - 1], arguments(t.calls[i])
            if not args or observation.startswith("error") or observation in ("ok", "done", "no result"):
                continue
            total += 1
            took += args[0] in re.findall(r"-?\w+", observation) and args[0] not in re.findall(r"-?\w+", t.prompt)
    assert total > 1000 and took / total >= 0.40, (took / total, total)


def test_tasks_of_several_tools_often_call_each_once_in_the_prompts_order():
    """IN_SEQUENCE: half of the tasks of 2-3 distinct tools call each once in order before the answer (0.53 over
    seeds 1-2 at about 1,400 tasks, se 0.013; 0.05 with IN_SEQUENCE = 0)."""
    from pglab.envs.tooluse import prompt_tools

    hit = total = 0
    for t in corpus(4000, 1):
        tools = prompt_tools(t.prompt)[:-1]
        if len(tools) >= 2 and len(set(tools)) == len(tools):
            total += 1
            hit += tuple(c.split()[1] for c in t.calls[:-1]) == tools
    assert total > 1000 and hit / total >= 0.40, (hit / total, total)


def test_negative_numbers_are_copied_with_their_sign():
    """Numbers below zero appear in questions and tool answers; a call copies one whole, sign included (the test of
    copied arguments above finds a dropped sign, as the unsigned digits were never seen)."""
    negatives = [a for t in corpus(4000, 3) for c in t.calls for a in arguments(c) if re.fullmatch(r"-\d+", a)]
    assert len(negatives) >= 100, len(negatives)
