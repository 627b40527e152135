"""TinyAgent: size, causality, the KV cache against full recomputation, save/load."""

import pytest
import torch

from pglab.models import KVCache, TinyAgent, TinyConfig
from pglab.runtime.threads import single_torch_thread


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_torch_thread():
        yield


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyAgent(261).eval()


def test_size_and_names(model):
    assert 140_000 <= model.num_parameters() <= 180_000           # the book's has 157,244
    assert isinstance(model.tok_emb, torch.nn.Embedding)
    with pytest.raises(ValueError, match="multiple of n_head"):
        TinyAgent(10, n_embd=30, n_head=4)


def test_causal(model):
    ids = torch.randint(0, 261, (2, 30), generator=torch.Generator().manual_seed(1))
    changed = ids.clone()
    changed[:, 20:] = (changed[:, 20:] + 1) % 261
    with torch.no_grad():
        assert torch.allclose(model(ids)[:, :20], model(changed)[:, :20], atol=1e-6)


def test_kv_cache_matches_recompute_on_ragged_rows(model):
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 261, (3, 40), generator=gen)
    with torch.no_grad():
        full = model(ids)
        cache = KVCache(model.config, 3, 64)
        lengths = torch.tensor([5, 9, 2])
        first = model(ids[:, :9], cache, lengths=lengths)            # padded prefill of unequal prompts
        for b in range(3):
            assert torch.allclose(first[b, : lengths[b]], full[b, : lengths[b]], atol=1e-5)
        # row 1 alone advances 3 tokens, then rows 0 and 2 advance one each
        out = model(ids[1:2, 9:12], cache, rows=torch.tensor([1]))
        assert torch.allclose(out[0], full[1, 9:12], atol=1e-5)
        step = model(torch.stack([ids[0, 5:6], ids[2, 2:3]]), cache, rows=torch.tensor([0, 2]))
        assert torch.allclose(step[0, 0], full[0, 5], atol=1e-5) and torch.allclose(step[1, 0], full[2, 2], atol=1e-5)
        assert cache.length.tolist() == [6, 12, 3]
        cache.keep(torch.tensor([1]))
        out = model(ids[1:2, 12:13], cache)
        assert torch.allclose(out[0, 0], full[1, 12], atol=1e-5)
        model(torch.zeros(1, 60, dtype=torch.long), cache)                    # the cache grows past 64
        assert cache.size >= 73 and cache.length.tolist() == [73]
        with pytest.raises(ValueError, match="block_size"):
            model(torch.zeros(1, model.config.block_size, dtype=torch.long), cache)


def test_save_and_load(model, tmp_path):
    model.save_pretrained(tmp_path / "agent")
    again = TinyAgent.from_pretrained(tmp_path / "agent")
    assert again.config == model.config
    ids = torch.randint(0, 261, (2, 10))
    with torch.no_grad():
        assert torch.equal(again.eval()(ids), model(ids))
    assert TinyConfig(5).block_size >= 512
