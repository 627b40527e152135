"""train-lm for TRL users: rewards, datasets and templates, sampling, accumulation, iterations, LoRA, logs, errors."""

import json
import math
import sys

import pytest
import torch

pytest.importorskip("transformers")

from pglab.cli import main  # noqa: E402
from pglab.models import HFPolicy  # noqa: E402
from pglab.models.default_lm import save_random_gpt2  # noqa: E402
from pglab.sampling.replies import plain_sample_replies, reply_batch, sample_replies  # noqa: E402
from pglab.sampling.scoring import sequence_log_probs  # noqa: E402
from pglab.trainers.lm import RLConfig, train_lm  # noqa: E402
from pglab.trainers.lm.logging import escaped  # noqa: E402
from pglab.trainers.lm.rewards import Completions, make_rewards  # noqa: E402
from pglab.trainers.update import UpdateSpec, pg_update  # noqa: E402

PROMPTS = [f"the film number {i} was really quite something" for i in range(64)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = tmp_path_factory.mktemp("tiny-gpt2")
    save_random_gpt2(folder, vocab=300, layers=1, width=32, heads=2)
    return folder, AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def _config(tiny, tmp_path, **overrides) -> RLConfig:
    tmp_path.mkdir(parents=True, exist_ok=True)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS))
    values = dict(model=str(tiny[0]), prompts=str(prompts), reward="vader", max_steps=2, prompts_per_step=4,
                  num_generations=2, prompt_length=4, max_completion_length=5, eval_prompts=2, eval_generations=2,
                  learning_rate=1e-2, output_dir=str(tmp_path / "run"), checkpoint_every=0)
    values.update(overrides)
    return RLConfig(**values)


def _batch(model, tokenizer, *, left_pad=False, rows=8, group=2, prompt=3, reply=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 250, (rows, prompt + reply), generator=gen)
    ids[:, :prompt] = ids[::group, :prompt].repeat_interleave(group, 0)
    mask = torch.zeros_like(ids)
    mask[:, prompt:] = 1
    prompt_mask = torch.ones(rows, prompt, dtype=torch.long)
    if left_pad:
        prompt_mask[:group, 0] = 0
        ids[:group, 0] = tokenizer.eos_token_id
    scores = torch.randn(rows, generator=gen, dtype=torch.float64)
    return reply_batch(ids, mask, prompt, group, scores, prompt_mask=prompt_mask)


def _grads(model, batch, **kwargs):
    model.zero_grad()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    pg_update(HFPolicy(model), optimizer, batch, UpdateSpec("grpo", 2, max_grad_norm=None, chunk_tokens=0, **kwargs),
              start=3)
    return [p.grad.clone() for p in model.parameters()]


# rewards ---------------------------------------------------------------------------------------------------------

def test_trl_reward_signature_columns_weights_and_none(tmp_path, monkeypatch):
    (tmp_path / "myrewards.py").write_text(
        "def trl_len(prompts, completions, **kwargs):\n"
        "    return [float(len(c)) + kwargs['bonus'][i] for i, c in enumerate(completions)]\n"
        "def sometimes(prompts, completions, completion_ids, **kwargs):\n"
        "    return [None if i == 0 else 1.0 for i in range(len(completions))]\n"
        "def texts(texts):\n    return [float(len(t)) for t in texts]\n"
        "def words(prompts, completions, **kw):\n    return ['a'] * len(completions)\n")
    monkeypatch.chdir(tmp_path)                   # the current folder is on the import path, no PYTHONPATH needed
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    rewards = make_rewards(["myrewards:trl_len", "myrewards:sometimes", "myrewards:texts"], (1.0, 2.0, 0.5))
    batch = Completions(["p1", "p2"], ["p1ab", "p2abc"], ["ab", "abc"], [[1, 2], [3, 4, 5]], {"bonus": [10.0, 20.0]})
    scores = rewards.score(batch)
    torch.testing.assert_close(scores, torch.tensor([12.0 + 0.5 * 4, 23.0 + 2.0 + 0.5 * 5], dtype=torch.float64))
    with pytest.raises(ValueError, match="returned str values"):
        make_rewards(["myrewards:words"]).score(batch)


@pytest.mark.experiment
def test_chat_prompts_go_through_the_template_and_columns_reach_the_reward(tiny, tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    from datasets import Dataset
    from transformers import AutoTokenizer

    folder = tmp_path / "chat-model"
    save_random_gpt2(folder, vocab=300, layers=1, width=32, heads=2)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"
    tokenizer.save_pretrained(folder)
    rows = {"prompt": [[{"role": "user", "content": f"tell me about film {i}"}] for i in range(16)],
            "topic": [f"film {i}" for i in range(16)]}
    Dataset.from_dict(rows).save_to_disk(str(tmp_path / "data"))
    seen = []

    def reward(prompts, completions, topic, **kwargs):
        seen.append((prompts[0], completions[0], topic[0]))
        return [0.0] * len(completions)

    cfg = _config((folder,), tmp_path, prompts=str(tmp_path / "data"), prompt_length=None, max_steps=1)
    run = train_lm(cfg, reward=reward, progress=False)
    prompt, completion, topic = seen[-1]
    assert prompt[0]["role"] == "user" and completion[0]["role"] == "assistant" and topic.startswith("film")
    assert run.evals[0]["samples"][0].startswith("<user>tell me about film")


@pytest.mark.experiment
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_dataset_files_and_whole_prompts_of_different_lengths(tiny, tmp_path, suffix):
    pytest.importorskip("datasets")
    from datasets import Dataset

    data = Dataset.from_dict({"prompt": ["short one", *PROMPTS[:15]]})
    path = tmp_path / f"data{suffix}"
    data.to_json(str(path)) if suffix == ".jsonl" else data.to_parquet(str(path))
    cfg = _config(tiny, tmp_path, prompts=str(path), prompt_length=None, max_steps=1)
    run = train_lm(cfg, progress=False)
    assert math.isfinite(run.history[0]["loss"])


# sampling --------------------------------------------------------------------------------------------------------

def test_left_padded_prompts_score_as_unpadded_ones(tiny):
    _, model, tokenizer = tiny
    model = model.double()
    batch = _batch(model, tokenizer, left_pad=True)
    padded = sequence_log_probs(HFPolicy(model), batch, start=3, group_size=2)
    alone = sequence_log_probs(HFPolicy(model), batch.ids[:2, 1:], start=2)
    torch.testing.assert_close(padded[:2, 3:], alone[:, 2:], rtol=0, atol=1e-10)
    grads = _grads(model, batch)
    assert all(torch.isfinite(g).all() for g in grads)
    model.float()


@pytest.mark.parametrize("kind", ["gpt2", "hf"])
def test_decoding_a_left_padded_prompt_gives_the_logits_of_the_prompt_alone(tiny, kind):
    from pglab.models.hf_decode import gpt2_decoder, hf_decoder

    _, model, tokenizer = tiny
    make = (lambda m, mask: gpt2_decoder(m, 12, mask)) if kind == "gpt2" else (lambda m, mask: hf_decoder(m, mask))
    ids = torch.tensor([[tokenizer.eos_token_id, tokenizer.eos_token_id, 40, 41], [50, 51, 52, 53]])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    padded, alone = make(model, mask), make(model, None)
    steps = torch.tensor([[60, 61, 62], [70, 71, 72]])
    with torch.no_grad():
        torch.testing.assert_close(padded(ids, 0)[0], alone(ids[:1, 2:], 0)[0], rtol=0, atol=1e-5)
        for t in range(3):
            torch.testing.assert_close(padded(steps[:, t:t + 1], 4 + t)[0], alone(steps[:1, t:t + 1], 2 + t)[0],
                                       rtol=0, atol=1e-5)     # float32 rounding of a different batch


@pytest.mark.parametrize("ban_eos", [True, False])
def test_the_fast_sampler_draws_the_samples_of_the_plain_loop_bitwise(tiny, ban_eos):
    _, model, tokenizer = tiny
    eos = tokenizer.eos_token_id
    banned = torch.tensor([eos, 7] if ban_eos else [7])
    policy = HFPolicy(model, banned=banned, pad_id=eos)
    prompts = torch.randint(10, 200, (8, 3), generator=torch.Generator().manual_seed(0)).repeat_interleave(4, 0)
    fast = sample_replies(policy, prompts, 30, torch.Generator().manual_seed(1), eos, group_size=4)
    plain = plain_sample_replies(policy, prompts, 30, torch.Generator().manual_seed(1), eos)
    assert torch.equal(fast[0], plain[0]) and torch.equal(fast[1], plain[1])


def test_temperature_and_top_p_shape_sampling_and_scoring_alike(tiny):
    _, model, tokenizer = tiny
    policy = HFPolicy(model, temperature=0.7, top_p=0.5)
    prompts = torch.full((200, 2), 30)
    ids, _ = sample_replies(policy, prompts, 1, torch.Generator().manual_seed(0))
    logits = policy.logits(torch.cat([prompts[:1], ids[:1, 2:]], 1), 2)[0, 0]
    allowed = torch.isfinite(logits)
    assert allowed.sum() < logits.numel()                              # the nucleus cut something
    assert allowed[ids[:, 2]].all()                                    # every sample is in the scored nucleus
    raw = model(prompts[:1]).logits[0, -1] / 0.7
    probs = torch.softmax(raw, -1)
    probs = probs.detach()
    assert float(probs[allowed].sum()) >= 0.5 and float(probs[allowed].sum() - probs[allowed].min()) < 0.5
    expected = torch.softmax(raw.masked_fill(~allowed, -math.inf), -1)
    torch.testing.assert_close(torch.softmax(logits, -1), expected)


# training ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"])
def test_gradient_accumulation_gives_the_gradient_of_one_big_batch(tiny, mode):
    _, model, tokenizer = tiny
    model = model.double()
    batch = _batch(model, tokenizer)
    batch.ref_logp = torch.where(batch.action_mask.bool(), -2.0, 0.0).double()
    one = _grads(model, batch, mode=mode, beta=0.1, kl_in="loss")
    four = _grads(model, batch, mode=mode, beta=0.1, kl_in="loss", micro_batches=4)
    for a, b in zip(one, four):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)        # float64 rounding of a different sum order
    model.float()


def test_first_iteration_of_the_clipped_ratio_is_the_on_policy_gradient(tiny):
    _, model, tokenizer = tiny
    model = model.double()
    batch = _batch(model, tokenizer)
    on_policy = _grads(model, batch)
    ratio = _grads(model, batch, ratio=True, epsilon=0.2)
    assert all(torch.equal(a, b) for a, b in zip(on_policy, ratio))
    assert batch.logp_old is not None                                   # kept for the next iterations
    model.float()


@pytest.mark.experiment
def test_schedule_with_warmup_and_iterations(tiny, tmp_path):
    cfg = _config(tiny, tmp_path, max_steps=3, num_iterations=2, lr_scheduler_type="cosine", warmup_steps=2,
                  gradient_accumulation_steps=2)
    run = train_lm(cfg, progress=False)
    lrs = [r["lr"] for r in run.history]                  # the lr of each step's last iteration
    assert lrs[0] == pytest.approx(0.01 * 1 / 2) and 0 < lrs[2] < lrs[1] < 0.01
    assert all(0 <= r["clip_ratio"] <= 1 for r in run.history)


@pytest.mark.experiment
def test_resume_repeats_an_uninterrupted_run_with_every_new_setting(tiny, tmp_path):
    settings = dict(num_iterations=2, lr_scheduler_type="constant", warmup_steps=3, gradient_accumulation_steps=2,
                    temperature=0.8, top_p=0.9, checkpoint_every=1)
    whole = train_lm(_config(tiny, tmp_path / "a", max_steps=3, **settings), progress=False)
    train_lm(_config(tiny, tmp_path / "b", max_steps=2, **settings), progress=False)
    resumed = train_lm(_config(tiny, tmp_path / "b", max_steps=3, resume=True, **settings), progress=False)
    strip = lambda hist: [{k: v for k, v in r.items() if k != "seconds"} for r in hist]  # noqa: E731
    assert strip(resumed.history) == strip(whole.history)


@pytest.mark.experiment
def test_lora_trains_and_saves_only_the_adapter_with_the_base_as_reference(tiny, tmp_path):
    pytest.importorskip("peft")
    _, model, _ = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    run = train_lm(_config(tiny, tmp_path, lora_r=4, beta=0.1, max_steps=3, learning_rate=0.05),
                   reward=lambda texts: [float(t.count("e")) for t in texts], progress=False)
    saved = sorted(p.name for p in (tmp_path / "run" / "policy").iterdir())
    assert "adapter_config.json" in saved and "model.safetensors" not in saved
    changed = {n for n, p in run.policy.named_parameters() if p.requires_grad}
    assert changed and all("lora_" in n for n in changed)
    base = {n.replace("base_model.model.", "").replace(".base_layer", ""): p for n, p in
            run.policy.state_dict().items() if "lora_" not in n}
    assert all(torch.equal(base[k], v) for k, v in before.items() if k in base)
    assert run.evals[0]["kl_exact"] == pytest.approx(0.0, abs=1e-12) and run.evals[-1]["kl_exact"] > 0


@pytest.mark.experiment
def test_tensorboard_scalars(tiny, tmp_path):
    pytest.importorskip("tensorboard")
    train_lm(_config(tiny, tmp_path, report_to="tensorboard"), progress=False)
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))


# console, outputs, errors ------------------------------------------------------------------------------------------

def test_samples_are_printed_with_control_characters_escaped():
    assert escaped("a\rb\x1bc\n") == "a\\rb\\x1bc\\n"


@pytest.mark.experiment
def test_cli_default_folder_resume_flag_and_one_line_refusals(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.txt").write_text("\n".join(PROMPTS))
    base = ["train-lm", "--model", str(tiny[0]), "--prompts", "p.txt", "--max-steps", "2", "--prompts-per-step", "2",
            "--num-generations", "2", "--prompt-length", "4", "--max-completion-length", "4", "--eval-prompts", "2",
            "--checkpoint-every", "1"]
    assert main(base + ["--max-steps", "1"]) == 0
    assert (tmp_path / "runs" / "train-lm" / "checkpoint.pt").exists()
    assert main(base + ["--resume"]) == 0
    lines = (tmp_path / "runs" / "train-lm" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2]
    capsys.readouterr()
    (tmp_path / "bad.py").write_text("def words(texts):\n    return ['x'] * len(texts)\n")
    refusals = {
        "--reward hf-classifier:/missing": "no classifier folder",
        "--model /missing/model": "no such folder",
        "--model not/a-cached-model": "no hub model of that name",
        "--reward bad:words": "returned str values",
        "--reward nosuchmodule:fn": "cannot import",
        "--prompts missing.jsonl": "no such file",
        "--prompt-column text --prompts p.txt --reward vader,vader --reward-weights 1": "one weight per function",
        "--top-p 0": "--top-p",
        "--lr-scheduler-type step": "unknown --lr-scheduler-type",
        "--gradient-accumulation-steps 3": "not divisible",
    }
    for extra, words in refusals.items():
        assert main(base + extra.split()) == 2, extra
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err and ("pass" in err or "return" in err), (extra, err)


def test_default_model_build_is_announced(tmp_path, monkeypatch, capsys):
    from pglab.models.hf import load_causal_lm

    monkeypatch.setenv("PGLAB_CACHE", str(tmp_path))
    monkeypatch.setattr("pglab.models.default_lm.ensure_default_model", lambda size, progress=True: tmp_path / "x")
    with pytest.raises(ValueError):
        load_causal_lm("default", "quick")
    assert "building the embedded default model" in capsys.readouterr().err
