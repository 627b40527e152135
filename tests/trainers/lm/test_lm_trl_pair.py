"""docs/lm.md's "From TRL" pair: TRL's GRPOTrainer script and the pglab command doing the same both run, and
on TRL's own sampled batch pglab's update under the documented conversions gives TRL's loss at both iterations.

The first iteration's loss is -mean(A) over tokens (the ratio is 1 and the KL to the identical reference is 0),
about 0 on both sides; the second is the real check: it depends on the first Adam step (schedule, clipping,
temperature-scaled log-probs, k3 KL) and on the clipped ratio of the updated policy.
"""

import dataclasses
import json
import shlex
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")
pytest.importorskip("datasets")

from pglab.cli import main, train_lm_config, train_lm_parser  # noqa: E402
from pglab.estimators.advantages import advantages  # noqa: E402
from pglab.models.default_lm import save_random_gpt2  # noqa: E402
from pglab.sampling.replies import reply_batch  # noqa: E402
from pglab.trainers.lm.rewards import make_rewards  # noqa: E402
from pglab.trainers.lm.session import Session  # noqa: E402
from support import ROOT  # noqa: E402

EXAMPLES = ROOT / "examples" / "from_trl"


def pglab_options(model: Path, data: Path, out: Path) -> list[str]:
    """The options of the pglab_grpo.sh command, with its $1 $2 $3 filled in."""
    text = (EXAMPLES / "pglab_grpo.sh").read_text().replace("\\\n", " ")
    line = next(x for x in text.splitlines() if x.startswith("pglab train-lm"))
    words = shlex.split(line.replace('"$1"', str(model)).replace('"$2"', str(data)).replace('"$3"', str(out)))
    return words[2:]


@pytest.fixture()
def setup(tmp_path, monkeypatch):
    model = tmp_path / "model"
    save_random_gpt2(model, vocab=257, layers=1, width=32, heads=2, positions=32)
    data = tmp_path / "prompts.jsonl"
    rows = [{"prompt": f"review {i:02d}", "letter": "aeiou"[i % 5]} for i in range(40)]   # 9 bytes = 9 tokens each
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return model, data


@pytest.mark.experiment
def test_the_pair_runs_and_gives_trls_loss_on_trls_batch(setup, tmp_path):
    model, data = setup
    import trl_grpo

    scores, batches, losses = [], [], []

    def count_letter(prompts, completions, **kwargs):       # the same reward, recording what it returns
        scores.append(trl_grpo.count_letter(prompts, completions, **kwargs))
        return scores[-1]

    trainer_ = trl_grpo.GRPOTrainer(model=trl_grpo.AutoModelForCausalLM.from_pretrained(model),
                                    reward_funcs=count_letter, args=trl_grpo.config(str(tmp_path / "trl")),
                                    train_dataset=trl_grpo.Dataset.from_json(str(data)),
                                    processing_class=trl_grpo.AutoTokenizer.from_pretrained(model))
    generate, compute = trainer_._generate_and_score_completions, trainer_.compute_loss
    trainer_._generate_and_score_completions = lambda inputs: batches.append(generate(inputs)) or batches[-1]
    trainer_.compute_loss = lambda *a, **k: losses.append(compute(*a, **k)) or losses[-1]
    trainer_.train()
    assert len(batches) == 1 and len(losses) == 2                    # one batch, two iterations on it

    options = pglab_options(model, data, tmp_path / "pglab")
    assert main(["train-lm", *options]) == 0                       # the command itself runs

    cfg = train_lm_config(train_lm_parser().parse_args(options))
    session = Session(cfg, torch.device("cpu"), make_rewards(cfg.reward_specs), progress=False)
    out = batches[0]
    assert bool(out["prompt_mask"].all()), "TRL left-padded: the prompts must have one token length"
    prompt_length = out["prompt_ids"].shape[1]
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
    mask = torch.cat([torch.zeros_like(out["prompt_ids"]), out["completion_mask"].long()], 1)
    rewards = torch.tensor(scores[0], dtype=torch.float64)
    ours = advantages(rewards, "grpo", 4, scale="group", **cfg.std_options)
    torch.testing.assert_close(ours.float(), out["advantages"].float(), rtol=1e-5, atol=1e-6)
    history = session.update(reply_batch(ids, mask, prompt_length, 4, rewards))
    theirs = [float(loss.detach()) for loss in losses]
    # float32 on both sides, summed in different orders (pglab runs each prompt once per group). Adam divides each
    # gradient component by its own RMS, so at the first step a rounding difference in a near-zero component moves
    # that weight by up to the step size: the second loss agrees to ~5e-5 relative, the first to ~1e-7.
    assert [h["loss"] for h in history] == pytest.approx(theirs, rel=2e-4)
    wrong = Session(dataclasses.replace(cfg, std="population"), torch.device("cpu"), make_rewards(cfg.reward_specs),
                    progress=False)                                 # one conversion missed: the check sees it
    missed = wrong.update(reply_batch(ids, mask, prompt_length, 4, rewards))
    assert missed[0]["loss"] != pytest.approx(theirs[0], rel=2e-4)
    assert sys.modules["rewards"].__file__.startswith(str(EXAMPLES))
