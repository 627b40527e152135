"""``pglab train-lm``'s report: the held-out evaluations (with pass@1 and pass@k), the training rows, the
collapse warnings and the curves, written as every command's result.json, report.md and report.html."""

from __future__ import annotations

from pglab.reporting.result import Result, provenance
from pglab.trainers.lm import curves_figure
from pglab.trainers.lm.train import LMRun
from pglab.trainers.warnings import collapse_warnings

EVAL_KEYS = ("step", "reward", "reward_se", "p_positive", "k", "pass_at_1", "pass_at_1_se", "pass_at_k",
             "pass_at_k_se", "best_at_k", "best_at_k_se", "kl_exact", "kl_k1", "entropy", "distinct_1")
"""The evaluation columns the report's table shows (eval.jsonl keeps every one)."""
STEP_KEYS = ("step", "reward", "reward_std", "kl_k1", "entropy", "zero_adv_groups", "repeat_capped", "grad_norm",
             "skipped")
"""The training columns the report's table shows (metrics.jsonl keeps every one)."""


def lm_result(run: LMRun) -> Result:
    """The Result of one train-lm run: evaluation and training tables, the last evaluation's samples, the curves
    and the collapse warnings of the training rows."""
    cfg = run.config
    result = Result("train-lm", dict(cfg), provenance=provenance())
    result.summary = (f"{cfg['model']} trained for {cfg['max_steps']} steps on {cfg['reward']} with advantage "
                      f"{cfg['advantage']}, beta {cfg['beta']:g}, seed {cfg['seed']}. pass@k: a reply passes when its "
                      f"score is positive, k = --group-size capped at --eval-generations, standard errors over the "
                      "held-out prompts.")
    result.tables["evaluation"] = [{k: e.get(k) for k in EVAL_KEYS if k in e} for e in run.evals]
    result.tables["training"] = [{k: r.get(k) for k in STEP_KEYS if k in r} for r in run.history]
    if run.evals:
        result.tables["samples"] = [{"step": run.evals[-1]["step"], "text": text}
                                    for text in run.evals[-1].get("samples", [])]
        result.figures["curves"] = curves_figure({"policy": run})
        result.metrics.update({k: v for k, v in run.evals[-1].items() if k in EVAL_KEYS[1:] and v is not None})
    result.warnings = collapse_warnings(run.history)
    return result


__all__ = ["EVAL_KEYS", "STEP_KEYS", "lm_result"]
