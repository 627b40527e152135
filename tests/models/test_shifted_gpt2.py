"""The previous-token GPT-2: its shift against a plain loop, and incremental decoding equal to one full forward
(ragged chunks, holes, row selection, a shared prompt repeated for a group, left padding, a save/load round trip)."""

import pytest
import torch

pytest.importorskip("transformers")

from pglab.models.hf import load_causal_lm, reply_logits  # noqa: E402
from pglab.models.logits import positions_of  # noqa: E402
from pglab.models.policy import HFPolicy  # noqa: E402
from pglab.models.shifted_gpt2 import ShiftedGPT2Config, ShiftedGPT2LMHeadModel, previous_real  # noqa: E402

TOL = 1e-5   # float32 logits of a 2-layer model: the same sums in another order


@pytest.fixture(scope="module", params=[1, 2, 3], ids=["one-back", "two-back", "three-back"])
def model(request):
    torch.manual_seed(0)
    config = ShiftedGPT2Config(vocab_size=50, n_positions=64, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                               embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, pad_token_id=0,
                               previous_tokens=request.param)
    return ShiftedGPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_previous_real_matches_a_loop(k):
    gen = torch.Generator().manual_seed(k)
    ids = torch.randint(0, 9, (6, 10), generator=gen)
    real = torch.rand(6, 10, generator=gen) < 0.6
    carried = torch.tensor([[-1] * k, [3] + [-1] * (k - 1), [-1] * k, [7, 4, 1][:k], [2, 8, 6][:k], [-1] * k])
    previous, last = previous_real(ids, real, carried)
    assert previous.shape == (6, 10, k) and last.shape == (6, k)
    for r in range(6):
        before = [int(c) for c in carried[r]]          # the latest first
        for t in range(10):
            assert previous[r, t].tolist() == before
            if real[r, t]:
                before = [int(ids[r, t])] + before[:-1]
        assert last[r].tolist() == before


@pytest.mark.parametrize("k", [2, 3])
def test_k_back_changes_the_logits_where_fewer_back_agree(k):
    torch.manual_seed(0)
    config = ShiftedGPT2Config(vocab_size=50, n_positions=64, n_embd=32, n_layer=1, n_head=2, bos_token_id=0,
                               eos_token_id=0, pad_token_id=0, previous_tokens=k)
    model = ShiftedGPT2LMHeadModel(config).eval()
    a = torch.tensor([[5, 6, 7, 8]])
    b = a.clone()
    b[0, 3 - k] = 9                  # position 3: the same token and k - 1 back, another token k back
    with torch.no_grad():
        assert (model(input_ids=a).logits[0, 3] - model(input_ids=b).logits[0, 3]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="previous_tokens"):
        ShiftedGPT2Config(previous_tokens=ShiftedGPT2Config.MAX_PREVIOUS + 1)


def test_the_previous_token_changes_the_logits(model):
    a = torch.tensor([[5, 6, 7, 8]])
    b = torch.tensor([[9, 6, 7, 8]])     # the same token at position 1, another before it
    with torch.no_grad():
        assert (model(input_ids=a).logits[0, 1] - model(input_ids=b).logits[0, 1]).abs().max() > 1e-3


def test_incremental_decoding_equals_one_forward(model):
    ids = torch.randint(1, 50, (4, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(input_ids=ids).logits
        prefixes = HFPolicy(model, pad_id=0).prefixes([[]] * 4)
        out = prefixes.extend([0, 1, 2, 3], [ids[r, :5].tolist() for r in range(4)])
        assert (out - full[:, 4]).abs().max() < TOL
        out = prefixes.extend([0, 2], [ids[0, 5:8].tolist(), ids[2, 5:6].tolist()])   # rows 1, 3 get holes
        assert (out[0] - full[0, 7]).abs().max() < TOL and (out[1] - full[2, 5]).abs().max() < TOL
        prefixes.keep([0, 2])
        out = prefixes.extend([0, 2], [ids[0, 8:9].tolist(), ids[2, 6:9].tolist()])
        assert (out[0] - full[0, 8]).abs().max() < TOL and (out[1] - full[2, 8]).abs().max() < TOL


def test_a_shared_prompt_and_left_padding_score_as_one_forward(model):
    gen = torch.Generator().manual_seed(3)
    prompt = torch.randint(1, 50, (1, 6), generator=gen)
    ids = torch.cat([prompt.repeat(3, 1), torch.randint(1, 50, (3, 5), generator=gen)], 1)
    with torch.no_grad():
        assert (reply_logits(model, ids, 6, group_size=3) - reply_logits(model, ids, 6)).abs().max() < TOL
        padded = torch.cat([torch.zeros(3, 2, dtype=torch.long), ids], 1)
        mask = (torch.arange(padded.shape[1]) >= 2).long().expand(3, -1)
        left = model(input_ids=padded, attention_mask=mask, position_ids=positions_of(mask)).logits[:, 2:]
        assert (left - model(input_ids=ids).logits).abs().max() < TOL


def test_another_cache_is_refused(model):
    from transformers import DynamicCache

    with torch.no_grad():
        out = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
        plain = DynamicCache()
        plain.update(*[(layer.keys, layer.values) for layer in out.past_key_values.layers][0], 0)
        with pytest.raises(ValueError, match="ShiftedCache"):
            model(input_ids=torch.tensor([[4]]), cache=plain)


def test_saved_and_loaded_through_the_auto_classes(model, tmp_path):
    from pglab.models.default_lm import save_random_gpt2

    save_random_gpt2(tmp_path / "tok", vocab=257)      # any tokenizer: load_causal_lm loads a folder's pair
    model.save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "tokenizer.json").write_bytes((tmp_path / "tok" / "tokenizer.json").read_bytes())
    (tmp_path / "m" / "tokenizer_config.json").write_bytes((tmp_path / "tok" / "tokenizer_config.json").read_bytes())
    loaded, _ = load_causal_lm(str(tmp_path / "m"))
    ids = torch.tensor([[3, 4, 5, 6]])
    assert type(loaded) is ShiftedGPT2LMHeadModel
    with torch.no_grad():
        assert (loaded(input_ids=ids).logits - model(input_ids=ids).logits).abs().max() < TOL
