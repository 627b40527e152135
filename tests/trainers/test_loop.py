"""The one loop: a stopped and resumed run equals the uninterrupted one (rows, evaluations, files, state), the
evaluation and checkpoint schedule, the resume check, and ranks above 0 writing nothing."""

import json

import pytest
import torch

from pglab.trainers.loop import (
    CHECKPOINT,
    TASKS,
    RunDir,
    RunSettings,
    Schedule,
    Trainer,
    eval_steps,
    run_loop,
    step_generator,
)


class Walk:
    """A toy trainer: each step adds a draw of its own generator to a running total (its whole state)."""

    def __init__(self):
        self.total = torch.zeros(())

    def step(self, step, run):
        self.total += torch.rand((), generator=step_generator(7, step, TASKS))
        return {"step": step, "total": float(self.total), "evaluated": len(run.evals)}

    def evaluate(self, done):
        return {"step": done, "total": float(self.total)}

    def trainer(self):
        return Trainer(self.step, self.evaluate, lambda: {"total": self.total.clone()},
                       lambda state: self.total.copy_(state["total"]))


SCHEDULE = Schedule(6, eval_steps(6, 4), "rows.jsonl", "evals.jsonl", settings={"lr": 0.1})


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def strip(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_a_stopped_and_resumed_run_equals_the_uninterrupted_one(tmp_path):
    whole = run_loop(Walk().trainer(), SCHEDULE, RunSettings(tmp_path / "whole", checkpoint_every=4, progress=False))
    stopped = run_loop(Walk().trainer(), SCHEDULE, RunSettings(tmp_path / "b", stop_at=3, progress=False))
    assert len(stopped.history) == 3 and RunDir(tmp_path / "b").checkpoint_step() == 3
    second = Walk()
    resumed = run_loop(second.trainer(), SCHEDULE, RunSettings(tmp_path / "b", resume=True, progress=False))
    assert resumed.resumed_from == 3 and float(second.total) == whole.history[-1]["total"]
    assert strip(resumed.history) == strip(whole.history) and resumed.evals == whole.evals
    assert [e["step"] for e in whole.evals] == [0, 4, 6]
    for name in ("rows.jsonl", "evals.jsonl"):
        assert strip(lines(tmp_path / "b" / name)) == strip(lines(tmp_path / "whole" / name))
    assert torch.load(tmp_path / "whole" / CHECKPOINT)["step"] == 6


def test_checkpoints_follow_the_schedule_and_resume_checks_settings(tmp_path):
    run_loop(Walk().trainer(), SCHEDULE, RunSettings(tmp_path, stop_at=5, checkpoint_every=2, progress=False))
    assert RunDir(tmp_path).checkpoint_step() == 5
    run_loop(Walk().trainer(), SCHEDULE, RunSettings(tmp_path, stop_at=2, checkpoint_every=0, progress=False))
    assert RunDir(tmp_path).checkpoint_step() == 2
    other = Schedule(6, eval_steps(6, 4), "rows.jsonl", settings={"lr": 0.2})
    with pytest.raises(ValueError, match=r"cannot resume: lr \(0.1 in the checkpoint, 0.2 now\)"):
        run_loop(Walk().trainer(), other, RunSettings(tmp_path, resume=True, progress=False))
    with pytest.raises(ValueError, match="nothing to resume"):
        run_loop(Walk().trainer(), SCHEDULE, RunSettings(tmp_path / "empty", resume=True, progress=False))


def test_ranks_above_zero_write_nothing_and_eval_steps_are_the_schedule(tmp_path):
    run = run_loop(Walk().trainer(), SCHEDULE, RunSettings(tmp_path / "rank1", progress=False), rank=1)
    assert len(run.history) == 6 and not (tmp_path / "rank1").exists()
    assert eval_steps(6, 4) == {0, 4, 6} and eval_steps(5, 0, 2) == {0, 2, 5} and eval_steps(4, 2) == {0, 2, 4}
