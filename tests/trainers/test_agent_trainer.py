"""The REINFORCE trainer: advantages, exact resume from a checkpoint, checkpoints that survive SIGKILL, the demo."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from pglab.envs.bugfix import make_tasks
from pglab.models import TinyAgent
from pglab.runtime.options import SettingsError
from pglab.trainers.episodes import ReinforceSettings
from pglab.trainers.loop import CHECKPOINT, RunDir, RunSettings
from pglab.trainers.tinyagent import LOG, train_reinforce

pytestmark = [pytest.mark.experiment, pytest.mark.usefixtures("one_thread")]


def small_run(model, tok, out=None, resume=False, stop_at=None, **kwargs):
    settings = ReinforceSettings(**{**dict(steps=6, batch_size=8, eval_every=3, eval_per_task=1, baseline_init=0.1,
                                           seed=3), **kwargs})
    run = RunSettings(out=out, resume=resume, stop_at=stop_at, checkpoint_every=2, progress=False)
    return train_reinforce(model, tok, make_tasks("train"), make_tasks("heldout"), settings, run)


def test_resumed_run_reproduces_the_uninterrupted_one(cloned_agent, tok, tmp_path):
    whole, first = TinyAgent(config=cloned_agent.config), TinyAgent(config=cloned_agent.config)
    whole.load_state_dict(cloned_agent.state_dict())
    first.load_state_dict(cloned_agent.state_dict())
    straight = small_run(whole, tok, out=tmp_path / "straight")
    stopped = small_run(first, tok, out=tmp_path / "stopped", stop_at=3)
    assert len(stopped["history"]) == 3 and torch.load(tmp_path / "stopped" / CHECKPOINT)["step"] == 3
    second = TinyAgent(config=cloned_agent.config)                         # a fresh process would start here
    resumed = small_run(second, tok, out=tmp_path / "stopped", resume=True)
    assert resumed["resumed_from"] == 3

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    assert strip(resumed["history"]) == strip(straight["history"]) and resumed["evals"] == straight["evals"]
    for (name, a), b in zip(whole.state_dict().items(), second.state_dict().values()):
        assert torch.equal(a, b), name
    lines = [json.loads(line) for line in (tmp_path / "stopped" / LOG).read_text().splitlines()]
    assert [row["step"] for row in lines] == list(range(6))
    with pytest.raises(ValueError, match=r"cannot resume: lr \(0.002 in the checkpoint, 0.001 now\)"):
        small_run(TinyAgent(config=cloned_agent.config), tok, out=tmp_path / "stopped", resume=True, lr=1e-3)


def test_grouped_advantages_and_bad_settings(cloned_agent, tok):
    model = TinyAgent(config=cloned_agent.config)
    model.load_state_dict(cloned_agent.state_dict())
    run = small_run(model, tok, steps=1, advantage="grpo", group_size=4, eval_every=10)
    assert run["history"][0]["step"] == 0
    with pytest.raises(ValueError, match="unknown advantage"):
        small_run(model, tok, advantage="ppo")
    with pytest.raises(SettingsError, match=r"--group-size \(group_size\) 3 x 1 processes; pass a multiple of 3"):
        small_run(model, tok, advantage="rloo", group_size=3)
    with pytest.raises(ValueError, match="nothing to resume"):
        small_run(model, tok, resume=True)


WRITER = textwrap.dedent("""
    import os, sys, time, torch
    from pglab.trainers.loop import RunDir
    run = RunDir(sys.argv[1])
    run.save_checkpoint({"step": 1, "weights": torch.ones(10)})
    real_fsync = os.fsync
    def stall(fd):
        real_fsync(fd)
        print("writing", flush=True)
        time.sleep(60)
    os.fsync = stall
    run.save_checkpoint({"step": 2, "weights": torch.zeros(1_000_000)})
""")


def test_sigkill_during_a_checkpoint_write_keeps_the_previous_one(tmp_path):
    path = tmp_path / CHECKPOINT
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"                    # the new file is written, not renamed
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    state = torch.load(path)
    assert state["step"] == 1 and torch.equal(state["weights"], torch.ones(10))
    assert any(p.name.startswith(f".{CHECKPOINT}.tmp-") for p in tmp_path.iterdir())   # the torn write stays aside
    RunDir(tmp_path).save_checkpoint({"step": 3, "settings": {}})
    assert RunDir(tmp_path).load_checkpoint({})["step"] == 3
