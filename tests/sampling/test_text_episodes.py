"""Token in, token out: an HF agent's episodes keep the ids it sampled; re-tokenising the transcript would not.

The negative control decodes each episode's transcript and tokenises it again, as a trainer that
keeps text instead of ids would. With a byte-level BPE the merges across turn boundaries (and
inside the random model's calls) give other ids, so the invariant check, which holds for the
collector, fails on the control: the check can fail.
"""

import pytest
import torch

pytest.importorskip("transformers")

from pglab.batch import POLICY  # noqa: E402
from pglab.envs.bugfix import CALLS, make_tasks  # noqa: E402
from pglab.envs.text import BugFixText, check_step, env_factory  # noqa: E402
from pglab.models import HFPolicy  # noqa: E402
from pglab.models.default_lm import train_tokenizer  # noqa: E402
from pglab.models.tokenizer import environment_texts  # noqa: E402
from pglab.sampling.episodes import EpisodeLog, collect_episodes, episode_stats  # noqa: E402
from pglab.sampling.scoring import sequence_log_probs  # noqa: E402
from pglab.sampling.text_episodes import TextLayout, encode_text_episode  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def bpe():
    """A byte-level BPE of 400 ids trained on BugFixEnv's own texts and calls."""
    texts = environment_texts(make_tasks("train"), episodes_per_task=1) + list(CALLS) * 20
    return train_tokenizer(texts, 400)


@pytest.fixture(scope="module")
def agent(bpe):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    eos = bpe.eos_token_id
    config = GPT2Config(vocab_size=len(bpe), n_positions=1024, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    return GPT2LMHeadModel(config).eval()


def play(agent, bpe, n=6, seed=0, **options):
    seeds = [i // 2 for i in range(n)]                               # groups of two episodes per task
    layout = TextLayout(bpe, max_obs_tokens=48, max_call_tokens=12)
    return collect_episodes(HFPolicy(agent, pad_id=bpe.eos_token_id), layout, [BugFixText("train") for _ in seeds],
                            seeds, torch.Generator().manual_seed(seed), **options)


def sampled_ids_are_scored(ids: torch.Tensor, owner: torch.Tensor, info: list[EpisodeLog]) -> bool:
    """The invariant: row b's policy-owned ids are exactly the ids sampled in its calls, in order."""
    for b, row in enumerate(info):
        policy_ids = ids[b][owner[b] == POLICY].tolist()
        if policy_ids != [t for call in row.call_ids for t in call]:
            return False
    return True


def retokenised(batch, tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """The negative control: decode each transcript, tokenise it again, give each new id its first char's owner."""
    rows, owners = [], []
    for b in range(batch.batch_size):
        n = int(batch.attention_mask[b].sum())
        ids, owner = batch.ids[b, :n].tolist(), batch.owner[b, :n].tolist()
        text, char_owner = "", []
        for k, o in enumerate(owner):
            longer = tokenizer.decode(ids[:k + 1])
            char_owner += [o] * (len(longer) - len(text))
            text = longer
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        rows.append(encoded["input_ids"])
        owners.append([char_owner[start] if start < len(char_owner) else 0 for start, _ in encoded["offset_mapping"]])
    width = max(map(len, rows))
    pad = lambda xs: torch.tensor([x + [0] * (width - len(x)) for x in xs])  # noqa: E731
    return pad(rows), pad(owners)


def test_the_ids_scored_are_the_ids_sampled_and_retokenising_breaks_it(agent, bpe):
    batch = play(agent, bpe)
    assert sampled_ids_are_scored(batch.ids, batch.owner, batch.info)
    rescored = sequence_log_probs(HFPolicy(agent), batch).detach()
    torch.testing.assert_close(rescored * batch.action_mask, batch.logp_old, atol=1e-5, rtol=0)
    control_ids, control_owner = retokenised(batch, bpe)
    assert not sampled_ids_are_scored(control_ids, control_owner, batch.info), \
        "re-tokenising gave the sampled ids back: the control lost its point (train another tokenizer)"


def test_stopping_rules_are_recorded(agent, bpe):
    batch = play(agent, bpe, n=4, seed=1)
    for row in batch.info:
        assert len(row.stops) == len(row.calls) == row.record.n_turns
        assert set(row.stops) <= {"closing", "cap", "eos"} and row.end in ("env", "eos", "turns", "length")
        for stop, ids in zip(row.stops, row.call_ids):
            assert (stop == "cap") == (len(ids) == 12 and "</call>" not in bpe.decode(ids) and bpe.eos_token_id
                                       not in ids)
            assert (stop == "eos") == (ids[-1] == bpe.eos_token_id)
    stats = episode_stats(batch, call_stops=True)
    assert 0 <= stats["valid_calls"] <= 1 and stats["closed_calls"] + stats["capped_calls"] <= 1


def test_scripted_episodes_encode_to_the_collected_layout(bpe):
    from pglab.envs.bugfix import BugFixEnv, scripted_policy, scripted_rollout

    episode = scripted_rollout(scripted_policy("oracle"), BugFixEnv("train"), "clamp")
    ids, owner = encode_text_episode(TextLayout(bpe), episode.prompt, episode.calls, episode.observations)
    policy = [i for i, o in zip(ids, owner) if o == POLICY]
    assert policy == [t for call in episode.calls for t in bpe(call, add_special_tokens=False)["input_ids"]]
    assert ids[0] == bpe.bos_token_id and bpe.decode(ids, skip_special_tokens=True).startswith(episode.prompt)


def test_user_environments_are_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "badenv.py").write_text(
        "class Env:\n    def reset(self, seed):\n        return 'x'\n"
        "    def step(self, text):\n        return 'x', 1.0\n"
        "def make_env():\n    return Env()\ndef not_an_env():\n    return 3\n")
    env = env_factory("badenv:make_env")("train")
    with pytest.raises(ValueError, match=r"must return \(observation: str, reward: float, done: bool, info: dict\)"):
        check_step(env.step("hi"), "Env.step")
    with pytest.raises(ValueError, match="not a text-turn environment"):
        env_factory("badenv:not_an_env")("train")
    with pytest.raises(ValueError, match="cannot import nothing from badenv"):
        env_factory("badenv:nothing")
    with pytest.raises(ValueError, match="pass bugfix or module:factory"):
        env_factory("badenv")


def test_a_format_cost_sits_on_the_malformed_call_not_in_the_score(agent, bpe):
    from pglab.trainers.episodes import format_costs

    seeds = [0, 0, 1, 1]
    layout = TextLayout(bpe, max_obs_tokens=32, max_call_tokens=8)
    plain = collect_episodes(HFPolicy(agent, pad_id=bpe.eos_token_id), layout, [BugFixText("train") for _ in seeds],
                             seeds, torch.Generator().manual_seed(3))
    batch = format_costs(plain, 0.5)
    invalid = sum(row.record.n_invalid for row in batch.info)
    assert invalid > 0, "the random agent wrote no malformed call: the test lost its point"
    assert batch.token_rewards is not None and float(batch.token_rewards.sum()) == -0.5 * invalid
    placed = batch.token_rewards.nonzero()
    assert bool((batch.action_mask[placed[:, 0], placed[:, 1]] == 1).all())          # on the calls' own tokens
    for b, row in enumerate(batch.info):
        assert float(batch.rewards[b]) == float(row.record.passed)                  # the score is unshaped


def test_a_prompt_longer_than_the_agent_takes_is_refused_before_any_episode(agent, bpe):
    from pglab.runtime.options import SettingsError

    class Long:
        def reset(self, seed):
            return "fix the test " * 600

        def step(self, text):
            raise AssertionError("no call is made")

    layout = TextLayout(bpe, max_obs_tokens=48, max_call_tokens=12)
    with pytest.raises(SettingsError, match="shorten the environment's prompt"):
        collect_episodes(HFPolicy(agent, pad_id=bpe.eos_token_id), layout, [Long()], [0], torch.Generator())
