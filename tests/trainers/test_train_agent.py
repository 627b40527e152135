"""pglab train-agent: any HF causal LM in BugFixEnv or a user's environment, the CLI, resume, bad input."""

import json
import textwrap

import pytest
import torch

pytest.importorskip("transformers")

from pglab.cli import main  # noqa: E402
from pglab.models.default_lm import train_tokenizer  # noqa: E402
from pglab.trainers.agent_config import AgentConfig
from pglab.trainers.hf_agent import train_agent  # noqa: E402
from support import ROOT  # noqa: E402
from support.docs import python_blocks  # noqa: E402

pytestmark = [pytest.mark.experiment, pytest.mark.usefixtures("one_thread")]

DOCS = ROOT / "docs" / "agents.md"
BROKEN = textwrap.dedent("""
    from calc_env import Calculator

    class Broken(Calculator):
        def step(self, text):
            return "x", 1.0

    def make_broken():
        return Broken()
""")
TINY = dict(steps=2, episodes_per_step=4, group_size=2, eval_every=2, eval_per_task=1, max_call_tokens=6,
            max_obs_tokens=16)


@pytest.fixture
def calc(tmp_path, monkeypatch):
    """docs/agents.md's calculator environment, as the user saves it (calc_env.py in the current folder)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "calc_env.py").write_text(python_blocks(DOCS)[0])
    (tmp_path / "broken_env.py").write_text(BROKEN)
    return "calc_env:make_env"


def save_model(folder, family, chat=False):
    """A random-weight model of ``family`` with a BPE trained on calculator texts, saved with save_pretrained."""
    import transformers

    texts = [f"What is {a} + {b}? <call> add {a} {b} </call> {a + b} <call> answer {a + b} </call>"
             for a in range(10, 40) for b in range(10, 40, 7)]
    tokenizer = train_tokenizer(texts, 300, whole_words=True)
    if chat:
        tokenizer.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}\n{% endfor %}"
                                   "{% if add_generation_prompt %}<|assistant|> {% endif %}")
    eos, vocab = tokenizer.eos_token_id, len(tokenizer)
    shape = dict(vocab_size=vocab, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    config = {
        "gpt2": lambda: transformers.GPT2Config(n_positions=512, n_embd=32, n_layer=1, n_head=2, **shape),
        "llama": lambda: transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                                  num_attention_heads=2, num_key_value_heads=1,
                                                  max_position_embeddings=512, **shape),
        "qwen2": lambda: transformers.Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                                  num_attention_heads=2, num_key_value_heads=1,
                                                  max_position_embeddings=512, **shape),
        "gpt_neox": lambda: transformers.GPTNeoXConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                                       num_attention_heads=2, max_position_embeddings=512, **shape),
    }[family]()
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("family,chat", [("gpt2", False), ("llama", True), ("qwen2", False), ("gpt_neox", False)])
def test_each_model_family_trains_two_steps(tmp_path, calc, family, chat):
    model = save_model(tmp_path / family, family, chat)
    trained = train_agent(AgentConfig(model=model, env=calc, advantage="rloo", **TINY), tmp_path / "run",
                          progress=False)
    assert len(trained["run"]["history"]) == 2
    lines = (tmp_path / "run" / "train.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 1]
    assert (tmp_path / "run" / "policy" / "config.json").exists()


def test_resume_is_bit_exact(tmp_path, calc):
    from transformers import AutoModelForCausalLM

    from pglab.trainers.loop import RunDir

    cfg = AgentConfig(model=save_model(tmp_path / "m", "gpt2"), env=calc, **{**TINY, "steps": 4})
    whole = train_agent(cfg, tmp_path / "whole", progress=False)["run"]
    train_agent(cfg, tmp_path / "stopped", stop_at=2, progress=False)
    assert RunDir(tmp_path / "stopped").checkpoint_step() == 2
    resumed = train_agent(cfg, tmp_path / "stopped", resume=True, progress=False)["run"]
    assert resumed["resumed_from"] == 2
    strip = lambda rows: [{k: v for k, v in r.items() if "seconds" not in k} for r in rows]  # noqa: E731
    assert strip(resumed["history"]) == strip(whole["history"]) and resumed["evals"] == whole["evals"]
    a, b = (AutoModelForCausalLM.from_pretrained(tmp_path / run / "policy") for run in ("whole", "stopped"))
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), name
    with pytest.raises(ValueError, match="cannot resume: steps"):
        train_agent(AgentConfig(**{**cfg.__dict__, "steps": 5}), tmp_path / "stopped", resume=True, progress=False)


def test_a_checkpoint_from_before_the_exploration_settings_resumes_with_them_off_only(tmp_path, calc):
    """A checkpoint written before --explore and --novelty existed holds neither: it resumes with both off (as it
    ran) and refuses a resume that turns one on, and a run with one on records it."""
    cfg = AgentConfig(model=save_model(tmp_path / "m", "gpt2"), env=calc, **{**TINY, "steps": 3})
    train_agent(cfg, tmp_path / "off", stop_at=1, progress=False)
    saved = torch.load(tmp_path / "off" / "checkpoint.pt", weights_only=True)["settings"]
    assert "explore" not in saved and "novelty" not in saved and saved["env"] == calc
    with pytest.raises(ValueError, match=r"cannot resume: novelty \(not set in the checkpoint, 0.1 now\)"):
        train_agent(AgentConfig(**{**cfg.__dict__, "novelty": 0.1}), tmp_path / "off", resume=True, progress=False)
    assert train_agent(cfg, tmp_path / "off", resume=True, progress=False)["run"]["resumed_from"] == 1
    train_agent(AgentConfig(**{**cfg.__dict__, "novelty": 0.1}), tmp_path / "on", stop_at=1, progress=False)
    assert torch.load(tmp_path / "on" / "checkpoint.pt", weights_only=True)["settings"]["novelty"] == 0.1
    with pytest.raises(ValueError, match=r"cannot resume: novelty \(0.1 in the checkpoint, not set now\)"):
        train_agent(cfg, tmp_path / "on", resume=True, progress=False)


def test_cli_trains_the_documented_environment_and_refuses_bad_input(tmp_path, calc, capsys):
    assert main(["train-agent", "--env", calc, "--quick", "--out", str(tmp_path / "q")]) == 0
    for name in ("result.json", "train.jsonl", "learning_curve.png", "policy/tokenizer.json", "report.md"):
        assert (tmp_path / "q" / name).exists(), name
    capsys.readouterr()
    untokenized = tmp_path / "no-tokenizer"
    save_model(untokenized, "gpt2")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (untokenized / name).unlink()
    for args, words in ((["--env", "nowhere:make_env"], "cannot import make_env from nowhere"),
                        (["--env", "broken_env:make_broken"], "must return (observation: str"),
                        (["--model", str(untokenized)], "has no tokenizer"),
                        (["--model", str(tmp_path)], "holds no model"),
                        (["--steps", "0"], "--steps must be at least 1"),
                        (["--advantage", "ppo"], "unknown --advantage 'ppo'")):
        assert main(["train-agent", "--env", calc, "--quick", "--out", str(tmp_path / "bad"), *args]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (args, err)
