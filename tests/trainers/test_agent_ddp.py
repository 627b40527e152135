"""train-agent under torchrun: an update over 2 gloo ranks, each holding whole groups of multi-turn text
episodes, equals one process's update on all of them (to 1e-6); torchrun with 2 processes runs 3 steps."""

import os
import subprocess

import pytest
import torch

pytest.importorskip("transformers")

from pglab.models import HFPolicy  # noqa: E402
from pglab.models.default_lm import save_random_gpt2  # noqa: E402
from pglab.sampling.episodes import collect_episodes  # noqa: E402
from pglab.sampling.text_episodes import TextLayout  # noqa: E402
from pglab.trainers.update import UpdateSpec, pg_update  # noqa: E402
from support.ddp import on_two_ranks, torchrun, torchrun_command  # noqa: E402

pytestmark = pytest.mark.integration

GROUP = 2
SETTINGS = [("rloo", "token_mean"), ("reinforce", "seq_mean_token_sum"), ("grpo", "token_mean")]


class Echo:
    """Say the number back: reward 1 when the call holds it; two turns."""

    def reset(self, seed):
        self.seed, self.turns = seed, 0
        return f"say {seed}"

    def step(self, text):
        self.turns += 1
        return f"heard {text[:20]}", float(str(self.seed) in text), self.turns >= 2, {}


def _load(folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder).double().eval(), AutoTokenizer.from_pretrained(folder)


def _episodes(model, tokenizer):
    """The same 4 groups of 2 variable-length episodes in every process (one generator seed)."""
    seeds = [s for s in (3, 14, 15, 92) for _ in range(GROUP)]
    batch = collect_episodes(HFPolicy(model, pad_id=tokenizer.eos_token_id), TextLayout(tokenizer, max_call_tokens=5),
                             [Echo() for _ in seeds], seeds, torch.Generator().manual_seed(0))
    batch.rewards = batch.rewards + torch.arange(len(seeds)) % 3 / 4   # distinct scores within groups
    return batch


def _one_step(model, batch, setting, wrapped=None):
    advantage, mode = setting
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    metrics = pg_update(HFPolicy(wrapped or model), optimizer, batch,
                        UpdateSpec(advantage, GROUP, mode=mode, max_grad_norm=0.5, chunk_tokens=0), baseline=0.2)
    return {k: v.clone() for k, v in model.state_dict().items()}, metrics


def _steps_on_rank(rank, world, folder):
    from torch.nn.parallel import DistributedDataParallel

    results = []
    for setting in SETTINGS:
        model, tokenizer = _load(folder)
        batch = _episodes(model, tokenizer)
        rows = batch.batch_size // world
        results.append(_one_step(model, batch.select(slice(rank * rows, (rank + 1) * rows)), setting,
                                 DistributedDataParallel(model)))
    return results


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("agent-ddp")
    save_random_gpt2(path, vocab=300, layers=1, width=32, heads=2, positions=256)
    return path


def test_agent_update_over_two_ranks_equals_one_process(folder, tmp_path):
    model, tokenizer = _load(folder)
    batch = _episodes(model, tokenizer)
    assert batch.attention_mask.sum(-1).unique().numel() > 1, "episodes of one length test less"
    for setting, (ddp_params, ddp_metrics) in zip(SETTINGS, on_two_ranks(_steps_on_rank, (str(folder),),
                                                                          tmp_path / "ddp.pt")):
        model, _ = _load(folder)
        params, metrics = _one_step(model, batch, setting)
        for name in params:
            torch.testing.assert_close(ddp_params[name], params[name], atol=1e-6, rtol=0, msg=f"{setting} {name}")
        for key in ("reward", "loss", "grad_norm"):
            assert ddp_metrics[key] == pytest.approx(metrics[key], abs=1e-9), (setting, key)


@pytest.mark.skipif(torchrun() is None, reason="torchrun not on PATH")
def test_torchrun_two_processes_run_three_steps(tmp_path):
    (tmp_path / "echo_env.py").write_text(
        "class Echo:\n    def reset(self, seed):\n        self.seed, self.turns = seed, 0\n"
        "        return f'say {seed}'\n"
        "    def step(self, text):\n        self.turns += 1\n        return 'ok', float(str(self.seed) in text), "
        "self.turns >= 2, {}\n\ndef make_env():\n    return Echo()\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = torchrun_command("train-agent", "--env", "echo_env:make_env", "--quick", "--steps", "3", "--out",
                           str(tmp_path / "run"))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (tmp_path / "run" / "train.jsonl").read_text().splitlines()
    assert len(lines) == 3 and (tmp_path / "run" / "checkpoint.pt").exists()
