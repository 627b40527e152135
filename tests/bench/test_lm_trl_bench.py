"""bench lm-vs-trl: the recorder counts every GEMM of a step, the replay runs them, and a quick run reports
paired ratios and the bound as its last two metrics."""

import pytest
import torch

from pglab.bench.lm_vs_trl import GemmReplay, Recorder, quartiles


def test_the_recorder_counts_each_gemm_call_and_the_replay_runs_them():
    x, w, b = torch.randn(4, 8), torch.randn(16, 8), torch.randn(16)
    recorder = Recorder()
    with recorder:
        torch.nn.functional.linear(x, w, b)
        x @ w.T
        x @ w.T
        torch.relu(x)                                   # not a GEMM: not recorded
    names = sorted(f"{func.overloadpacket.__name__} x{n}" for (func, _, _), n in recorder.calls.items())
    assert names == ["addmm x1", "mm x2"]
    replay = GemmReplay(recorder.calls)
    assert replay.count == sum(recorder.calls.values()) and replay.seconds() > 0


def test_quartiles():
    assert quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 3.0, 4.0)


@pytest.mark.experiment
def test_a_quick_run_ends_with_the_ratio_and_the_bound():
    pytest.importorskip("trl")
    from pglab.bench.lm_vs_trl import run

    result = run(quick=True, size="small")
    assert list(result.metrics)[-2:] == ["ratio = pglab/TRL", "bound = pglab/GEMM"]
    row = result.tables["step_seconds"][0]
    assert row["ratio_q1"] <= row["ratio_median"] <= row["ratio_q3"] and row["gemm_calls"] > 0
    with pytest.raises(ValueError, match="pass small, large or both"):
        run(quick=True, size="huge")
