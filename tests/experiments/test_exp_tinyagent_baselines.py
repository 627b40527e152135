"""tinyagent-baselines' claims: the book's variance ratios as one more base agent. A negative control: an
implementation that forgets to subtract the baseline (every named baseline's variance is V(none)) fails them."""

from pglab.experiments import tinyagent_baselines as module
from pglab.reporting.result import Result

VARIANCES = [{"none": 100.0, "mean reward": 90.0, "b*": 88.0, "per-task mean": 89.0, "constant 0.5": 190.0,
              "constant 1.0": 800.0},
             {"none": 80.0, "mean reward": 78.0, "b*": 71.0, "per-task mean": 80.0, "constant 0.5": 170.0,
              "constant 1.0": 640.0},
             {"none": 120.0, "mean reward": 118.0, "b*": 108.0, "per-task mean": 113.0, "constant 0.5": 260.0,
              "constant 1.0": 1300.0}]
"""Variances of the shape of the committed runs' (docs/results/two-first-seeds, tinyagent-baselines)."""


def row(seed: int, variance: dict[str, float], b_star: float, p: float) -> dict:
    ratios = {ratio: variance[num] / variance[den] for ratio, (num, den) in module.RATIOS.items()}
    return {"seed": seed, "episodes": 240, "params": 166_912, "mean reward": p, "b*": b_star,
            "b* / mean reward": b_star / p, **{f"V({name})": v for name, v in variance.items()}, **ratios,
            "F / S": 1.5, "F / S without the head": 1.6, "head share of |g|^2": 0.25,
            "corr(|g|^2, policy tokens)": 0.6, "success |g|^2 per policy token": 50.0, "se(b*)": 0.03,
            "parabola": (2.0, -2 * b_star * 2.0, variance["b*"])}


def run_with(rows: list[dict], monkeypatch) -> Result:
    feed = iter(rows)
    monkeypatch.setattr(module, "measure", lambda seed, config: next(feed))
    result = Result("tinyagent-baselines", {})
    module.run(module.Config(seeds=len(rows)), result)
    return result


def test_rows_like_the_committed_runs_hold_every_claim(monkeypatch):
    rows = [row(k, v, b, p) for k, (v, b, p) in enumerate(zip(VARIANCES, (0.1, 0.08, 0.12), (0.15, 0.14, 0.17)))]
    result = run_with(rows, monkeypatch)
    assert result.passed and all(c.p_value is not None for c in result.checks) and len(result.checks) == 5


def test_a_baseline_never_subtracted_fails(monkeypatch):
    """Every baseline leaves the variance at V(none): each ratio is 1 at every agent, and the book's 7.9 for b = 1
    over the mean reward is no draw from them."""
    rows = [row(k, {name: v["none"] * (1 + 1e-3 * k) for name in v}, b, p)
            for k, (v, b, p) in enumerate(zip(VARIANCES, (0.1, 0.08, 0.12), (0.15, 0.14, 0.17)))]
    for r in rows:
        r.update({ratio: 1.0 + 1e-4 * r["seed"] for ratio in module.RATIOS})
    failed = [c.claim for c in run_with(rows, monkeypatch).failed_checks()]
    assert any("b = 1 / mean reward" in claim for claim in failed)
