"""pglab train-agent: any HF causal LM in BugFixEnv or a user's environment, the CLI, resume, bad input."""

import json
import textwrap

import pytest
import torch

pytest.importorskip("transformers")

from pglab.cli import main  # noqa: E402
from pglab.experiments.agent_run import train_agent  # noqa: E402
from pglab.models.default_lm import train_tokenizer  # noqa: E402
from pglab.trainers.hf_agent import AgentConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

CALC = textwrap.dedent('''
    import random, re

    class Calculator:
        def reset(self, seed):
            rng = random.Random(seed)
            self.a, self.b, self.turns = rng.randint(10, 99), rng.randint(10, 99), 0
            return f"What is {self.a} + {self.b}? Use <call> add A B </call>, then <call> answer N </call>."

        def step(self, text):
            self.turns += 1
            found = re.search(r"<call>\\s*(add|answer)\\s+([-\\d ]+?)\\s*</call>", text)
            if found is None:
                return "error: malformed call", 0.0, self.turns >= 3, {}
            numbers = [int(n) for n in found.group(2).split()]
            if found.group(1) == "answer":
                return "done", float(numbers[:1] == [self.a + self.b]), True, {}
            return str(sum(numbers)), 0.0, self.turns >= 3, {}

    def make_env():
        return Calculator()

    class Broken(Calculator):
        def step(self, text):
            return "x", 1.0

    def make_broken():
        return Broken()
''')
TINY = dict(steps=2, episodes_per_step=4, group_size=2, eval_every=2, eval_per_task=1, max_call_tokens=6,
            max_obs_tokens=16)


@pytest.fixture
def calc(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "calc_env.py").write_text(CALC)
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
    result = train_agent(AgentConfig(model=model, env=calc, advantage="rloo", **TINY), tmp_path / "run",
                         progress=False)
    assert result.metrics["steps"] == 2
    lines = (tmp_path / "run" / "train.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 1]
    assert (tmp_path / "run" / "policy" / "config.json").exists()


def test_resume_is_bit_exact(tmp_path, calc):
    from transformers import AutoModelForCausalLM

    from pglab.trainers.run_dir import RunDir

    cfg = AgentConfig(model=save_model(tmp_path / "m", "gpt2"), env=calc, **{**TINY, "steps": 4})
    whole = train_agent(cfg, tmp_path / "whole", progress=False)
    train_agent(cfg, tmp_path / "stopped", stop_at=2, progress=False)
    assert RunDir(tmp_path / "stopped").checkpoint_step() == 2
    resumed = train_agent(cfg, tmp_path / "stopped", resume=True, progress=False)
    assert resumed.metrics["resumed_from"] == 2
    strip = lambda rows: [{k: v for k, v in r.items() if "seconds" not in k} for r in rows]  # noqa: E731
    assert strip(resumed.tables["training"]) == strip(whole.tables["training"])
    a, b = (AutoModelForCausalLM.from_pretrained(tmp_path / run / "policy") for run in ("whole", "stopped"))
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), name
    with pytest.raises(ValueError, match="cannot resume: steps"):
        train_agent(AgentConfig(**{**cfg.__dict__, "steps": 5}), tmp_path / "stopped", resume=True, progress=False)


def test_cli_quick_run_and_bad_input(tmp_path, calc, capsys):
    assert main(["train-agent", "--env", calc, "--quick", "--out", str(tmp_path / "q")]) == 0
    for name in ("result.json", "train.jsonl", "learning_curve.png", "policy/tokenizer.json", "report.md"):
        assert (tmp_path / "q" / name).exists(), name
    capsys.readouterr()
    untokenized = tmp_path / "no-tokenizer"
    save_model(untokenized, "gpt2")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (untokenized / name).unlink()
    for args, words in ((["--env", "nowhere:make_env"], "cannot import make_env from nowhere"),
                        (["--env", "calc_env:make_broken"], "must return (observation: str"),
                        (["--model", str(untokenized)], "has no tokenizer"),
                        (["--model", str(tmp_path)], "holds no model"),
                        (["--steps", "0"], "--steps must be at least 1"),
                        (["--advantage", "ppo"], "unknown advantage 'ppo'")):
        assert main(["train-agent", "--env", calc, "--quick", "--out", str(tmp_path / "bad"), *args]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (args, err)
