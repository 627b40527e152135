"""Scale-out: a DDP step over 2 gloo processes equals one single-process step on the whole batch; torchrun runs."""

import os
import subprocess

import pytest
import torch

pytest.importorskip("transformers")

from pglab.models import HFPolicy  # noqa: E402
from pglab.models.default_lm import save_random_gpt2  # noqa: E402
from pglab.sampling.replies import reply_batch  # noqa: E402
from pglab.sampling.scoring import sequence_log_probs  # noqa: E402
from pglab.trainers.update import UpdateSpec, pg_update  # noqa: E402
from support.ddp import on_two_ranks, torchrun, torchrun_command  # noqa: E402

pytestmark = pytest.mark.integration

PROMPT, REPLY, GROUP = 3, 5, 4
SETTINGS = [  # (advantage, scale_rewards, kl_in, aggregation): every path that gathers or renormalises
    ("rloo", "group", "reward", None),
    ("grpo", "batch", "loss", None),
    ("reinforce", "group", "reward", "seq_mean_token_sum"),
    ("dr_grpo", "group", "loss", None),
]


def _teacher_forced_batch(model):
    """A fixed batch of 4 groups x 4 replies: random ids, scores with ties, the reference's log-probs."""
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 250, (4 * GROUP, PROMPT + REPLY), generator=gen)
    mask = torch.zeros_like(ids)
    mask[:, PROMPT:] = 1
    mask[1, -2:] = 0                                     # one reply ended early
    scores = torch.randn(4 * GROUP, generator=gen, dtype=torch.float64)
    scores[4:8] = 0.5                                    # a group whose rewards tie
    batch = reply_batch(ids, mask, PROMPT, GROUP, scores)
    with torch.no_grad():
        ref = torch.where(mask.bool(), sequence_log_probs(model, ids, start=PROMPT), 0.0)
    batch.ref_logp = ref + 0.05 * torch.randn(ref.shape, generator=gen, dtype=torch.float64) * mask
    return batch


def _load(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).double().eval()


def _one_step(model, batch, setting, wrapped=None, micro_batches=1):
    advantage, scale, kl_in, aggregation = setting
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    mode = aggregation or ("constant" if advantage == "dr_grpo" else "token_mean")
    spec = UpdateSpec(advantage, GROUP, scale=scale, beta=0.1, kl_in=kl_in, mode=mode, norm_const=4 * GROUP * REPLY,
                      max_grad_norm=0.5, micro_batches=micro_batches, chunk_tokens=0)
    metrics = pg_update(HFPolicy(wrapped or model), optimizer, batch, spec, baseline=0.3, start=PROMPT)
    return {k: v.clone() for k, v in model.state_dict().items()}, metrics


def _steps_on_rank(rank: int, world: int, folder: str) -> list:
    from torch.nn.parallel import DistributedDataParallel

    results = []
    for setting, micro_batches in [(s, 1) for s in SETTINGS] + [(s, 2) for s in SETTINGS]:
        model = _load(folder)
        batch = _teacher_forced_batch(model)
        rows = batch.batch_size // world
        local = batch.select(slice(rank * rows, (rank + 1) * rows))
        results.append(_one_step(model, local, setting, DistributedDataParallel(model), micro_batches))
    return results


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("ddp-gpt2")
    save_random_gpt2(path, vocab=260, layers=1, width=32, heads=2, positions=16)
    return path


def test_ddp_step_over_two_ranks_equals_one_process_step(folder, tmp_path):
    """Also with gradient accumulation: each rank's 2 groups in 2 micro-batches, the first under DDP's no_sync."""
    distributed = on_two_ranks(_steps_on_rank, (str(folder),), tmp_path / "ddp.pt")
    assert len(distributed) == 2 * len(SETTINGS)
    for setting, (ddp_params, ddp_metrics) in zip(SETTINGS + SETTINGS, distributed):
        model = _load(folder)
        start = {k: v.clone() for k, v in model.state_dict().items()}
        params, metrics = _one_step(model, _teacher_forced_batch(model), setting)
        moved = max(float((params[k] - start[k]).abs().max()) for k in params)
        assert moved > 1e-4, f"{setting}: the step did not move the parameters"
        for name in params:
            torch.testing.assert_close(ddp_params[name], params[name], atol=1e-6, rtol=0, msg=f"{setting} {name}")
        for key in ("reward", "kl_k1", "zero_adv_groups", "loss", "grad_norm"):
            assert ddp_metrics[key] == pytest.approx(metrics[key], abs=1e-9), (setting, key)
        # the tied group's scores carry no advantage (wherever the KL goes), unless a running baseline is used
        assert metrics["zero_adv_groups"] == (0.0 if setting[0] == "reinforce" else 0.25)


@pytest.mark.skipif(torchrun() is None, reason="torchrun not on PATH")
def test_torchrun_two_processes_run_three_steps_of_the_embedded_default(tmp_path):
    from pglab.models.default_lm import ensure_default_model

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PGLAB_CACHE": os.environ.get("PGLAB_CACHE", str(tmp_path))}
    os.environ["PGLAB_CACHE"] = env["PGLAB_CACHE"]
    try:
        ensure_default_model("quick", progress=False)
    finally:
        if env["PGLAB_CACHE"] == str(tmp_path):
            del os.environ["PGLAB_CACHE"]
    cmd = torchrun_command("train-lm", "--default-size", "quick", "--max-steps", "3", "--prompts-per-step", "4",
                           "--eval-prompts", "4", "--output-dir", str(tmp_path / "run"))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3 and (tmp_path / "run" / "checkpoint.pt").exists()
