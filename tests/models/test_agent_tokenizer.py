"""The word-level tokenizer: built from the environment's own texts, exact on calls, saved as JSON."""

import dataclasses

import pytest

from pglab.envs.bugfix import CALLS, make_tasks
from pglab.models.tokenizer import SPECIALS, Tokenizer, build_tokenizer, environment_texts, split_words

pytestmark = pytest.mark.integration


def test_calls_round_trip_and_special_ids(tok):
    for call in CALLS:
        assert tok.decode(tok.encode(call)) == call
        assert tok.unk_id not in tok.encode(call)
    assert tok.vocab[: len(SPECIALS)] == list(SPECIALS)
    assert (tok.pad_id, tok.start_id, tok.call_id, tok.end_call_id) == (0, 1, 2, 3)
    assert tok.encode("<call> edit fix_init </call>")[0] == tok.call_id
    assert tok.encode("zzqx_never_seen") == [tok.unk_id]
    assert tok.decode([tok.pad_id, tok.call_id, tok.pad_id]) == "<call>"


def test_every_environment_word_is_known(tok):
    texts = environment_texts(make_tasks("all"), episodes_per_task=2, seed=5)
    for text in texts:
        assert tok.unk_id not in tok.encode(text), text
    assert split_words("x >= k:\n    return 10") == ["x", ">", "=", "k", ":", "return", "10"]


def test_vocabulary_follows_the_environment_text():
    task = make_tasks("train")[0]
    renamed = dataclasses.replace(task, issue="Issue: zebra crossing is broken in " + task.name)
    tok = build_tokenizer([renamed], episodes_per_task=1)
    assert "zebra" in tok.vocab and "crossing" in tok.vocab
    assert build_tokenizer([renamed], episodes_per_task=1) == tok          # deterministic


def test_save_and_load(tok, tmp_path):
    tok.save(tmp_path / "tokenizer.json")
    again = Tokenizer.load(tmp_path / "tokenizer.json")
    assert again == tok and again.vocab_size == tok.vocab_size and again.fingerprint() == tok.fingerprint()
    with pytest.raises(ValueError, match="special tokens"):
        Tokenizer(["a", "b"])
