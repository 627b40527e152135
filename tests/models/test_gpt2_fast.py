"""pglab.models.gpt2: GPT-2's blocks written out compute HF's forward, in scoring and in lockstep decoding."""

import pytest
import torch

pytest.importorskip("transformers")

from pglab.models import gpt2  # noqa: E402
from pglab.models.hf_decode import gpt2_decoder, hf_decoder  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=97, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    return GPT2LMHeadModel(config).double().eval()


def _ids(rows=6, group=3, prompt=4, reply=5, seed=0):
    ids = torch.randint(0, 97, (rows, prompt + reply), generator=torch.Generator().manual_seed(seed))
    ids[:, :prompt] = ids[::group, :prompt].repeat_interleave(group, 0)
    return ids


def _grads(model, logits):
    model.zero_grad()
    (logits.logsumexp(-1) * torch.linspace(-1, 1, logits.shape[1], dtype=logits.dtype)).sum().backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("group", [1, 3])
def test_reply_logits_and_their_gradients_are_hfs_forward(model, group):
    ids = _ids(group=group)
    ours = gpt2.reply_logits(model, ids, 4, group)
    theirs = model(input_ids=ids).logits[:, 3:-1]
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)        # float64 rounding of other sum orders
    for a, b in zip(_grads(model, ours), _grads(model, theirs)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_a_group_whose_prompts_differ_is_scored_row_by_row(model):
    ids = _ids()
    ids[1, 0] = (ids[0, 0] + 1) % 97                           # row 1 no longer shares row 0's prompt
    torch.testing.assert_close(gpt2.reply_logits(model, ids, 4, 3), model(input_ids=ids).logits[:, 3:-1],
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("padded", [False, True])
def test_the_decoder_matches_hfs_cache_for_prompts_single_tokens_and_chunks(model, padded):
    ids = _ids(rows=4, group=2, prompt=4, reply=0)
    mask = None
    if padded:
        mask = torch.ones(4, 4, dtype=torch.long)
        mask[:2, :2] = 0
    ours = gpt2_decoder(model, 12, mask, group_size=2)
    theirs = hf_decoder(model, mask, group_size=2)
    steps = torch.randint(0, 97, (4, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, 0), theirs(ids, 0), rtol=0, atol=1e-12)
        for position, chunk in ((4, steps[:, :1]), (5, steps[:, 1:2]), (6, steps[:, 2:5]), (9, steps[:, 5:])):
            torch.testing.assert_close(ours(chunk, position), theirs(chunk, position), rtol=0, atol=1e-12)


def test_only_plain_gpt2_models_take_the_written_out_path(model, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM

    assert gpt2.plain_gpt2(model)
    dropout = GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=16, n_embd=16, n_layer=1, n_head=2))
    assert not gpt2.plain_gpt2(dropout.train()) and gpt2.plain_gpt2(dropout.eval())
    eager = GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=16, n_embd=16, n_layer=1, n_head=2)).eval()
    eager.set_attn_implementation("eager")
    assert not gpt2.plain_gpt2(eager) and gpt2_decoder(eager, 8) is None
    neox = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=97, hidden_size=16, num_hidden_layers=1,
                                            num_attention_heads=2, intermediate_size=32))
    assert not gpt2.plain_gpt2(neox)
    peft = pytest.importorskip("peft")
    lora = peft.get_peft_model(GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=16, n_embd=16, n_layer=1,
                                                          n_head=2)).eval(),
                               peft.LoraConfig(r=2, target_modules=["c_attn"], fan_in_fan_out=True))
    assert not gpt2.plain_gpt2(lora.get_base_model())       # its adapters would be skipped


def test_the_sigmoid_form_gelu_is_gpt2s_gelu_new_with_its_derivative():
    from transformers.activations import NewGELUActivation

    from pglab.models.hf import TanhGELU

    x = torch.linspace(-8, 8, 1001, dtype=torch.float64)
    torch.testing.assert_close(TanhGELU()(x), NewGELUActivation()(x), rtol=0, atol=1e-14)
    torch.testing.assert_close(TanhGELU()(x.float()), NewGELUActivation()(x.float()), rtol=0, atol=2e-6)
    small = torch.randn(40, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(TanhGELU(), (small,))


def test_fused_activations_leave_the_models_function(model):
    import copy

    from pglab.models.hf import TanhGELU, fuse_activations

    fused = fuse_activations(copy.deepcopy(model))
    assert all(isinstance(block.mlp.act, TanhGELU) for block in fused.transformer.h)
    ids = _ids()
    torch.testing.assert_close(fused(input_ids=ids).logits, model(input_ids=ids).logits, rtol=0, atol=1e-12)


def test_gpt2_prefixes_decode_rows_at_their_own_lengths_as_hfs_cache_does(model):
    """GPT2Prefixes (a plain GPT-2 on the CPU) against HFPrefixes and one full forward per row: chunks of
    different lengths (holes), rows with nothing new, dropped rows, and buffers that grow past their first size."""
    from pglab.models.hf_decode import GPT2Prefixes
    from pglab.models.policy import HFPolicy, HFPrefixes

    policy = HFPolicy(model, pad_id=0)
    assert isinstance(policy.prefixes([[]] * 2), GPT2Prefixes)
    gen = torch.Generator().manual_seed(4)
    ids = torch.randint(1, 97, (4, 60), generator=gen)
    ours, theirs = GPT2Prefixes(model, 4), HFPrefixes(policy, 4)
    at = [0, 0, 0, 0]
    schedule = [([0, 1, 2, 3], [5, 3, 1, 7]), ([0, 2], [3, 1]), ([1, 3], [2, 40]), ([0, 1, 2], [1, 1, 30])]
    with torch.no_grad():
        full = model(input_ids=ids).logits
        for step, (rows, sizes) in enumerate(schedule):
            chunks = [ids[r, at[r]:at[r] + n].tolist() for r, n in zip(rows, sizes)]
            for r, n in zip(rows, sizes):
                at[r] += n
            a, b = ours.extend(rows, chunks), theirs.extend(rows, chunks)
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
            torch.testing.assert_close(a, full[rows, [at[r] - 1 for r in rows]], rtol=0, atol=1e-12)
            if step == 2:                                            # row 3 ends: 0, 1, 2 go on
                ours.keep([0, 1, 2])
                theirs.keep([0, 1, 2])
    assert ours.keys[0].shape[2] >= max(at) + 1          # grown past the first size (64 columns)
