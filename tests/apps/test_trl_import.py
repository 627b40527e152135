"""TRL 1.16's GRPOTrainer with log_completions on a tiny random GPT-2 on the CPU (offline), its completion tables read
as pglab's samples: the text and advantage of every completion, the metrics of its log history, and with the model
folder, every completion token's log-prob by pglab's scoring equal to the model's own log-softmax."""

import pytest
import torch

pytest.importorskip("trl")
pytest.importorskip("pyarrow")

from pglab.apps.inspect import load_run, load_samples  # noqa: E402
from pglab.apps.trl_import import import_trl, write_samples  # noqa: E402
from pglab.batch import POLICY  # noqa: E402
from pglab.models.default_lm import save_random_gpt2  # noqa: E402
from pglab.runtime.options import SettingsError  # noqa: E402

pytestmark = [pytest.mark.experiment, pytest.mark.usefixtures("one_thread")]


def count_a(prompts, completions, **kwargs):
    return [float(c.count("a")) for c in completions]


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory):
    """(TRL's output_dir, the model folder): two logged steps of 8 completions (2 prompts x 4), 6 tokens each."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    root = tmp_path_factory.mktemp("trl")
    model = root / "model"
    save_random_gpt2(model, vocab=257, layers=1, width=32, heads=2, positions=32)
    args = GRPOConfig(output_dir=str(root / "out"), max_steps=2, learning_rate=1e-3, per_device_train_batch_size=8,
                      num_generations=4, max_completion_length=6, temperature=1.0, top_k=0, top_p=1.0, beta=0.0,
                      seed=0, gradient_checkpointing=False, use_cpu=True, bf16=False, report_to="none",
                      save_strategy="no", logging_steps=1, disable_dropout=True, dataloader_num_workers=0,
                      log_completions=True, num_completions_to_print=0)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model), reward_funcs=count_a, args=args,
                          train_dataset=Dataset.from_dict({"prompt": [f"say {w}" for w in ("aa", "ab", "ba", "bb")]}),
                          processing_class=AutoTokenizer.from_pretrained(model))
    trainer.train()
    trainer.save_state()
    return root / "out", model


def test_completions_become_samples_with_text_advantage_and_reward(trl_run, tmp_path):
    out, _ = trl_run
    import pandas

    tables = sorted((out / "completions").glob("completions_*.parquet"))
    assert [p.name for p in tables] == ["completions_00001.parquet", "completions_00002.parquet"]
    table = pandas.concat([pandas.read_parquet(p) for p in tables]).to_dict("records")
    steps, samples = import_trl(out)
    assert sorted(samples) == [1, 2] and sum(map(len, samples.values())) == len(table) == 16
    lines = [line for step in sorted(samples) for line in samples[step]]
    for line, row in zip(lines, table):
        assert "".join(line["text"]) == row["prompt"] + row["completion"]
        assert line["reward"] == pytest.approx(row["count_a"], abs=1e-4) and line["rewards"] == {
            "count_a": pytest.approx(row["count_a"], abs=1e-4)}
        assert {line["adv"][i] for i, o in enumerate(line["owner"]) if o == POLICY} <= {line["advantage"]}
        assert line["advantage"] == pytest.approx(row["advantage"], abs=1e-4)
    assert [s["step"] for s in steps if "reward" in s] == [1, 2]           # trainer_state.json's log history
    written = load_samples(write_samples(samples, tmp_path / "imported"))
    assert written == samples
    run = load_run(out)
    assert run.samples == samples and "reward" in run.summary()["metrics"]


def test_with_the_model_every_completion_token_is_scored_by_pglab(trl_run):
    out, model = trl_run
    from transformers import AutoModelForCausalLM

    net = AutoModelForCausalLM.from_pretrained(model).eval()
    _, samples = import_trl(out, model)
    checked = 0
    for line in (line for rows in samples.values() for line in rows):
        ids = torch.tensor([line["ids"]])
        with torch.no_grad():
            expected = torch.log_softmax(net(ids).logits[0, :-1].double(), -1).gather(1, ids[0, 1:, None])[:, 0]
        for i, owner in enumerate(line["owner"]):
            if owner == POLICY:
                assert line["logp"][i] == pytest.approx(float(expected[i - 1]), abs=2e-4)   # 4 decimals kept
                checked += 1
        assert len(line["text"]) == len(line["ids"]) == len(line["owner"])
    assert checked >= 16


def test_a_damaged_table_is_one_line(tmp_path):
    broken = tmp_path / "broken"
    (broken / "completions").mkdir(parents=True)
    (broken / "completions" / "completions_00001.parquet").write_text("not parquet")
    with pytest.raises(SettingsError, match="is not a parquet table"):
        load_run(broken)
