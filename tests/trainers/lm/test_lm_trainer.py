"""The LM trainer: sampling with banned tokens, advantages, the worked example, offline loading, exact resume, CLI."""

import json

import pytest
import torch

pytest.importorskip("transformers")

from pglab.cli import main  # noqa: E402
from pglab.models import HFPolicy  # noqa: E402
from pglab.models.default_lm import save_random_gpt2  # noqa: E402
from pglab.sampling.replies import sample_replies  # noqa: E402
from pglab.sampling.scoring import token_log_probs  # noqa: E402
from pglab.trainers.lm import RLConfig, distinct_n, train_lm  # noqa: E402
from pglab.trainers.lm.eval import score_replies, worked_example  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random 1-layer GPT-2 with a 300-token BPE vocabulary, saved with save_pretrained."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = tmp_path_factory.mktemp("tiny-gpt2")
    save_random_gpt2(folder, vocab=300, layers=1, width=32, heads=2)
    return folder, AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, tiny):
    """A random GPT-2 sequence classifier (labels NEGATIVE / POSITIVE) saved with save_pretrained."""
    from transformers import GPT2Config, GPT2ForSequenceClassification

    folder = tmp_path_factory.mktemp("tiny-classifier")
    _, _, tokenizer = tiny
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32, n_layer=1, n_head=2, num_labels=2,
                        id2label={0: "NEGATIVE", 1: "POSITIVE"}, label2id={"NEGATIVE": 0, "POSITIVE": 1},
                        pad_token_id=tokenizer.eos_token_id)
    torch.manual_seed(1)
    GPT2ForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_banned_tokens_are_never_sampled_and_score_minus_infinity(tiny):
    _, model, tokenizer = tiny
    banned = torch.tensor([tokenizer.eos_token_id, 5, 7])
    prompts = torch.randint(10, 200, (16, 3), generator=torch.Generator().manual_seed(0))
    policy = HFPolicy(model, banned=banned)
    ids, mask = sample_replies(policy, prompts, 12, torch.Generator().manual_seed(1), tokenizer.eos_token_id)
    assert mask[:, 3:].all() and not mask[:, :3].any()
    assert not torch.isin(ids[:, 3:], banned).any()
    logits = policy.logits(ids, 3)
    assert torch.isinf(logits[..., banned]).all()
    logp = token_log_probs(logits, ids, 3)
    assert torch.isfinite(logp).all() and (logp[:, :3] == 0).all()


def test_replies_stop_at_end_of_text_when_it_is_allowed(tiny):
    _, model, tokenizer = tiny
    eos = tokenizer.eos_token_id  # the random model gives it about 1 / 300 per token: some of 64 x 40 hit it
    ids, mask = sample_replies(HFPolicy(model, pad_id=eos), torch.full((64, 2), 20), 40,
                               torch.Generator().manual_seed(0), eos)
    ended = 0
    for row, m in zip(ids, mask):
        hits = (row[2:] == eos).nonzero().flatten()
        if len(hits):
            first = 2 + int(hits[0])
            assert m[2:first + 1].all() and not m[first + 1:].any() and (row[first + 1:] == eos).all()
            ended += 1
        else:
            assert m[2:].all()
    assert ended > 0, "no reply ended early: the test lost its point"


def test_distinct_n():
    assert distinct_n(["a b a", "b c"], 1) == pytest.approx(3 / 5)
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)


def test_worked_example_sums(tiny):
    _, model, tokenizer = tiny
    ids, mask = sample_replies(HFPolicy(model), torch.full((2, 3), 40), 6, torch.Generator().manual_seed(0))
    import contextlib

    policy = HFPolicy(model)
    scored = score_replies(policy, lambda: contextlib.nullcontext(policy), tokenizer, ids, mask, 3,
                           lambda texts: torch.tensor([0.7, -0.2]))
    torch.testing.assert_close(scored.logp, scored.ref_logp)
    perturbed = type(scored)(**{**scored.__dict__, "ref_logp": scored.ref_logp - 0.1 * mask})
    rows, check = worked_example(perturbed, 0, 0.05, tokenizer, 3)
    assert len(rows) == 6 and check["sums_agree"]
    assert check["sum_log_ratio"] == pytest.approx(0.6)
    assert check["G_0"] == pytest.approx(0.7 - 0.05 * 0.6)
    assert rows[-1]["r_t"] == pytest.approx(0.7 - 0.005)


def _config(tiny, tmp_path, **overrides) -> RLConfig:
    folder, _, _ = tiny
    tmp_path.mkdir(parents=True, exist_ok=True)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(f"the film number {i} was really quite something" for i in range(64)))
    values = dict(model=str(folder), prompts=str(prompts), reward="vader", max_steps=4, prompts_per_step=4,
                  num_generations=2, prompt_length=4, max_completion_length=6, eval_prompts=4, eval_generations=2,
                  learning_rate=1e-2, output_dir=str(tmp_path / "run"), checkpoint_every=2)
    values.update(overrides)
    return RLConfig(**values)


@pytest.mark.experiment
def test_loads_from_save_pretrained_folders_and_trains_end_to_end(tiny, classifier, tmp_path):
    cfg = _config(tiny, tmp_path, reward=f"hf-classifier:{classifier}", beta=0.1, eval_every=2)
    run = train_lm(cfg, progress=False)
    out = tmp_path / "run"
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4]
    assert all(0 <= r["zero_adv_groups"] <= 1 and r["policy_tokens"] == 6 for r in lines)
    assert [e["step"] for e in run.evals] == [0, 2, 4]
    assert all(0 < e["p_positive"] < 1 for e in run.evals)
    assert run.evals[0]["kl_exact"] == pytest.approx(0.0, abs=1e-12)
    assert run.evals[-1]["kl_exact"] > 0 and run.worked_check["sums_agree"]
    assert (out / "checkpoint.pt").exists() and (out / "policy" / "config.json").exists()


@pytest.mark.experiment
@pytest.mark.parametrize("advantage,kl_in", [("reinforce", "reward"), ("grpo", "loss")])
def test_resume_gives_the_numbers_of_an_uninterrupted_run(tiny, tmp_path, advantage, kl_in):
    whole = train_lm(_config(tiny, tmp_path / "a", advantage=advantage, kl_in=kl_in), progress=False)
    first = _config(tiny, tmp_path / "b", advantage=advantage, kl_in=kl_in, max_steps=2)
    train_lm(first, progress=False)
    assert torch.load(tmp_path / "b" / "run" / "checkpoint.pt", weights_only=False)["step"] == 2
    resumed = train_lm(_config(tiny, tmp_path / "b", advantage=advantage, kl_in=kl_in, resume=True), progress=False)
    strip = lambda hist: [{k: v for k, v in r.items() if k != "seconds"} for r in hist]  # noqa: E731
    assert strip(resumed.history) == strip(whole.history)
    for p, q in zip(whole.policy.parameters(), resumed.policy.parameters()):
        assert torch.equal(p, q)


@pytest.mark.experiment
def test_cli_trains_and_refuses_bad_input(tiny, tmp_path, capsys):
    cfg = _config(tiny, tmp_path, max_steps=2)
    args = ["train-lm", "--model", cfg.model, "--prompts", cfg.prompts, "--max-steps", "2", "--prompts-per-step", "4",
            "--num-generations", "2", "--prompt-length", "4", "--max-completion-length", "5", "--eval-prompts", "2",
            "--beta", "0", "--advantage", "dr_grpo", "--ban-eos", "false", "--output-dir", str(tmp_path / "cli")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "grad_norm" in out.splitlines()[0] and "held-out evaluation" in out and "worked example" in out
    assert (tmp_path / "cli" / "curves.png").exists()
    assert main(args + ["--advantage", "ppo"]) == 2
    assert "unknown --advantage 'ppo'" in capsys.readouterr().err
    assert main(args + ["--num-generations", "1"]) == 2
    assert main(args + ["--max-steps", "two"]) == 2
