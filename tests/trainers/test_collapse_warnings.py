"""Collapse warnings from per-step rows: each check fires on a run made to collapse and stays silent on a healthy
run or a change within the run's own noise (the negative controls); the lines reach result.json, the reports and
the console, and a user environment whose every step is skipped says so."""

import json
import math

import numpy as np
import pytest

from pglab.reporting.report import print_result, render_html, render_markdown, write_report
from pglab.reporting.result import Result
from pglab.trainers.warnings import (
    KL_FLOOR,
    SKIP_PATIENCE,
    collapse_warnings,
    entropy_collapse,
    kl_explosion,
    measured_fall,
    non_finite_steps,
    rate_fall,
    repeat_share,
    repeated_tokens,
    skipped_steps,
    window,
)

STEPS = 40


def healthy(seed: int = 0, steps: int = STEPS) -> list[dict]:
    """Rows of a run that learns: pass rate rising from 0.2, entropy easing from 0.8 to 0.6, valid calls near 1, a
    KL growing linearly to 0.02 nats per token, no skipped step, no repeated call."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps) / steps
    return [{"step": i, "reward": 0.2 + 0.2 * t[i], "pass_rate": float(np.clip(0.2 + 0.2 * t[i] + rng.normal(0, .05),
                                                                              0, 1)),
             "valid_calls": float(min(1.0, 0.97 + rng.normal(0, 0.01))), "entropy": 0.8 - 0.2 * t[i]
             + rng.normal(0, 0.03), "kl_k1": 0.2 * t[i] + rng.normal(0, 0.01), "policy_tokens": 10.0,
             "repeat_capped": 0.0, "skipped": False, "grad_norm": 0.5 + rng.random(), "episodes": 16, "turns": 3.0}
            for i in range(steps)]


def with_column(rows: list[dict], key: str, values) -> list[dict]:
    return [{**row, key: float(v)} for row, v in zip(rows, values, strict=True)]


def test_a_healthy_run_warns_of_nothing_at_several_seeds():
    for seed in range(5):
        assert collapse_warnings(healthy(seed)) == []


def test_every_step_of_a_short_run_skipped_with_a_zero_gradient_is_a_warning_that_says_why_and_what_to_try():
    rows = [{"step": i, "reward": 0.0, "skipped": True, "grad_norm": 0.0} for i in range(3)]
    line = skipped_steps(rows)
    assert line.startswith("warning: 3 of 3 steps skipped")
    assert "every advantage was 0" in line and "same reward" in line and "--group-size" in line
    assert collapse_warnings(rows) == [line]


def test_skipped_steps_warn_from_the_patience_in_a_row_and_not_below_it():
    def run(in_a_row):
        return [{**row, "skipped": 10 <= row["step"] < 10 + in_a_row, "grad_norm": 0.0 if 10 <= row["step"] < 10
                 + in_a_row else row["grad_norm"]} for row in healthy()]

    assert skipped_steps(run(SKIP_PATIENCE - 1)) is None
    assert f"({SKIP_PATIENCE} in a row, steps 10-{9 + SKIP_PATIENCE}" in skipped_steps(run(SKIP_PATIENCE))


def test_a_non_finite_gradient_is_its_own_warning_not_a_zero_advantage_one():
    rows = [{**row, "skipped": True, "grad_norm": math.nan} if row["step"] >= 30 else row for row in healthy()]
    assert skipped_steps(rows) is None
    assert non_finite_steps(rows).startswith("warning: 10 of 40 steps skipped with a non-finite gradient (first at "
                                             "step 30)")
    assert non_finite_steps(healthy()) is None


def test_entropy_collapsing_warns_and_a_fall_within_the_noise_or_to_half_does_not():
    w = window(STEPS)
    collapsed = with_column(healthy(), "entropy", np.r_[np.full(STEPS - w, 0.8), np.full(w, 0.05)]
                            + np.random.default_rng(1).normal(0, 0.01, STEPS))
    assert "entropy fell from 0.8" in entropy_collapse(collapsed)
    halved = with_column(healthy(), "entropy", np.r_[np.full(STEPS - w, 0.8), np.full(w, 0.4)])
    assert entropy_collapse(halved) is None
    noisy_start = np.r_[[3.0, 0.0, 0.0, 0.0, 1.0], np.full(STEPS - w, 0.1)]     # mean 0.8, 3 se about 1.7
    assert entropy_collapse(with_column(healthy(), "entropy", noisy_start)) is None


def test_a_falling_pass_rate_and_valid_calls_warn_and_a_small_fall_does_not():
    rng = np.random.default_rng(2)
    fall = np.r_[0.2 + rng.normal(0, 0.05, STEPS // 2), np.zeros(STEPS // 2)]
    line = rate_fall(with_column(healthy(), "pass_rate", np.clip(fall, 0, 1)), "pass_rate")
    assert line.startswith("warning: pass rate fell from 0.") and "to 0 (" in line and "--beta" in line
    slight = np.r_[np.full(STEPS // 2, 0.2), np.full(STEPS // 2, 0.18)] + rng.normal(0, 0.02, STEPS)
    assert rate_fall(with_column(healthy(), "pass_rate", slight), "pass_rate") is None
    calls = with_column(healthy(), "valid_calls", np.r_[np.full(STEPS // 2, 1.0), np.full(STEPS // 2, 0.6)])
    assert "valid calls fell from 1 (mean of steps 0-4) to 0.6" in rate_fall(calls, "valid_calls")
    assert rate_fall(healthy(), "valid_calls") is None


def test_a_collapse_within_the_first_window_is_measured_from_the_first_step_s_batch():
    sudden = with_column(healthy(), "valid_calls", [0.984] + [0.0] * (STEPS - 1))
    assert rate_fall(sudden, "valid_calls").startswith("warning: valid calls fell from 0.984 (step 0, 48 calls of "
                                                       "the starting policy) to 0 (mean of steps 35-39")
    uncounted = [{k: v for k, v in row.items() if k != "episodes"} for row in sudden]
    assert rate_fall(uncounted, "valid_calls") is None           # the windows alone: the first one is diluted
    one_pass_in_16 = with_column(healthy(), "pass_rate", [0.125] + [0.0] * (STEPS - 1))
    assert rate_fall(one_pass_in_16, "pass_rate") is None        # 2 of 16 episodes: 3 se 0.25 > 0.125


def test_an_exploding_kl_warns_and_a_steadily_growing_one_does_not():
    growing = with_column(healthy(), "kl_k1", 0.01 * 2.0 ** (np.arange(STEPS) / 3))
    assert "and is still growing fast; try a larger --beta" in kl_explosion(growing)
    steady = with_column(healthy(), "kl_k1", 10 * KL_FLOOR * np.arange(STEPS) / STEPS * 10)   # linear, 1 nat/token
    assert kl_explosion(steady) is None
    broken = with_column(healthy(), "kl_k1", [0.1] * 30 + [math.inf] * 10)
    assert kl_explosion(broken).startswith("warning: the KL to the reference is not finite from step 30")


def test_a_repeated_token_filling_calls_to_the_cap_warns_and_rare_repeats_do_not():
    assert repeat_share([[5, 5, 5, 5], [5, 5, 1, 2], [1, 2, 3, 4], [7, 7, 7]], [True, True, True, False]) == 0.5
    assert repeat_share([], []) == 0.0
    w = window(STEPS)
    filled = with_column(healthy(), "repeat_capped", np.r_[np.zeros(STEPS - w), np.full(w, 0.5)])
    assert repeated_tokens(filled).startswith(f"warning: 50% of the calls or replies of steps {STEPS - w}-"
                                              f"{STEPS - 1} ran to the token cap")
    rare = with_column(healthy(), "repeat_capped", np.full(STEPS, 0.05))
    assert repeated_tokens(rare) is None


def test_a_trained_agent_passing_less_than_the_base_on_the_same_draws_warns_and_a_fall_within_the_noise_does_not():
    base = np.zeros((10, 8))
    for task, passes in enumerate([2, 1, 2, 1, 3, 1, 2, 2, 1, 1]):
        base[task, :passes] = 1                                            # 16 of 80: 0.2
    line = measured_fall(base, np.zeros((10, 8)), "heldout")
    assert line.startswith("warning: the trained agent passes 0 of the heldout episodes against the base's 0.2 (the "
                           "same draws, 80 episodes of 10 tasks")
    wobble = base.copy()
    wobble[[0, 2], 1] = 0                                                  # 14 of 80: a fall of 1.5 se
    assert measured_fall(base, wobble, "heldout") is None
    assert measured_fall(base[:1], np.zeros((1, 8)), "heldout") is None    # one task: no spread to judge by


def test_rows_without_a_check_s_columns_make_it_silent():
    bare = [{"step": i, "reward": 0.1} for i in range(STEPS)]
    assert collapse_warnings(bare) == []
    assert collapse_warnings([]) == []


def test_the_lines_go_into_result_json_both_reports_and_the_console(tmp_path, capsys):
    lines = ["warning: 3 of 3 steps skipped", "warning: entropy fell from 0.8 to 0.05"]
    result = Result("run", {}, warnings=list(lines))
    assert all(f"- {line}" in render_markdown(result) for line in lines)
    assert all(f"<li>{line}</li>" in render_html(result) for line in lines)
    write_report(result, tmp_path)
    assert json.loads((tmp_path / "result.json").read_text())["warnings"] == lines
    print_result(result)
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if line.startswith("warning:")] == lines
    quiet = Result("run", {})
    assert "Warnings" not in render_markdown(quiet) and "Warnings" not in render_html(quiet)


@pytest.mark.experiment
def test_a_calculator_that_never_rewards_skips_every_step_and_train_agent_says_so(tmp_path, monkeypatch, capsys,
                                                                                   one_thread):
    from pglab.cli import main
    from support import ROOT
    from support.docs import python_blocks

    monkeypatch.chdir(tmp_path)
    # the docs' calculator with its reward taken away (the quick agent solves the real one now and then, more or less
    # often on the CPU that built it) and no format cost: every reward is 0, so no step has a gradient
    (tmp_path / "calc_env.py").write_text(python_blocks(ROOT / "docs" / "agents.md")[0] + """

class Unrewarded(Calculator):
    def step(self, text):
        observation, _, done, info = super().step(text)
        return observation, 0.0, done, info


def make_unrewarded():
    return Unrewarded()
""")
    assert main(["train-agent", "--env", "calc_env:make_unrewarded", "--quick", "--format-penalty", "0", "--calls",
                 "free", "--out", str(tmp_path / "run")]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert len(printed) == 1 and printed[0].startswith("warning: 3 of 3 steps skipped with a zero gradient")
    assert result["warnings"] == printed
    assert "warning: 3 of 3 steps skipped" in (tmp_path / "run" / "report.md").read_text()
    episodes = result["tables"]["sample_episodes"]
    assert episodes and episodes[0]["episode"].startswith("reward 0 | end ") and "> What is" in episodes[0]["episode"]
    assert {row["k"] for row in result["tables"]["pass_at_k"]} == {1}


@pytest.mark.experiment
def test_train_lm_with_a_constant_reward_says_every_step_was_skipped_and_reports_pass_at_k(tmp_path, monkeypatch,
                                                                                          capsys, one_thread):
    pytest.importorskip("transformers")
    from pglab.cli import main
    from pglab.models.default_lm import save_random_gpt2

    monkeypatch.chdir(tmp_path)
    save_random_gpt2(tmp_path / "gpt2", vocab=300, layers=1, width=32, heads=2)
    (tmp_path / "prompts.txt").write_text("\n".join(f"the film number {i} was really quite something"
                                                    for i in range(16)))
    (tmp_path / "flat.py").write_text("def zero(texts):\n    return [0.0] * len(texts)\n")
    args = ["train-lm", "--model", str(tmp_path / "gpt2"), "--prompts", str(tmp_path / "prompts.txt"), "--reward",
            "flat:zero", "--steps", "3", "--prompts-per-step", "2", "--group-size", "2", "--advantage", "rloo",
            "--prompt-length", "4", "--max-completion-length", "4", "--eval-prompts", "3", "--eval-generations", "3",
            "--out", str(tmp_path / "run")]
    assert main(args) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    assert len(printed) == 1 and printed[0].startswith("warning: 3 of 3 steps skipped with a zero gradient")
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["warnings"] == printed
    last = [json.loads(line) for line in (tmp_path / "run" / "eval.jsonl").read_text().splitlines()][-1]
    assert (last["k"], last["pass_at_1"], last["pass_at_1_se"], last["pass_at_k"]) == (2, 0.0, 0.0, 0.0)
    assert result["tables"]["evaluation"][-1]["pass_at_k"] == 0.0
