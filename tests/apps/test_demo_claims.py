"""pglab demo's §6.7 claims on measured numbers: they hold on an honest run's numbers and fail on a plausible wrong
implementation's (no learning, call format drifting); the run says whether it generalised or memorised."""

import pytest

from pglab.apps.demo import book_claims, generalisation, verdict_line
from pglab.reporting.result import Result

BLIND = 0.2


def split(**values) -> dict:
    return {"base_pass": 0.13, "pass": 0.8, "valid_calls": 0.98, "submit_rate": 0.95, "turns": 3.0, "turns_sd": 1.2,
            "episodes": 320, "calls": 960, **values}


HONEST = {"train": split(), "heldout": split(base_pass=0.14, **{"pass": 0.5}, submit_rate=0.8, turns=4.3,
                                             episodes=160, calls=690)}
"""Numbers of the shape of a full-size demo run that generalised (seed 0 of docs/results/format_penalty.md)."""


def judged(found: dict, generalised: bool = True) -> Result:
    result = Result("demo", {})
    book_claims(result, found, BLIND, generalised)
    return result


def failed(result: Result) -> list[str]:
    return [c.claim for c in result.failed_checks()]


def test_an_honest_run_holds_every_claim_and_every_claim_is_statistical():
    result = judged(HONEST)
    assert result.passed and len(result.checks) == 9
    assert all(c.p_value is not None for c in result.checks)


def test_no_learning_fails_the_gain_claims():
    """A plausible wrong implementation: the update's sign flipped or its step lost, so the trained agent is the base
    agent."""
    still = {name: split(**{**found, "pass": found["base_pass"]}) for name, found in HONEST.items()}
    assert any("trained minus base pass rate (train)" in claim for claim in failed(judged(still)))


def test_calls_drifting_without_the_format_cost_fail_the_valid_call_claim():
    """Without a cost of its own, RL lets call validity drift (agents-ch6 §6.5): the valid calls of the format-cost
    sweep's run at cost 0, seed 0 (0.872 train, 0.866 held-out)."""
    drifted = {name: split(**{**found, "valid_calls": valid}) for (name, found), valid in zip(HONEST.items(),
                                                                                             (0.872, 0.866))}
    assert any("valid calls" in claim for claim in failed(judged(drifted)))


def test_a_memorising_seed_is_said_plainly_and_its_held_out_claims_are_not_made():
    memorised = {**HONEST, "heldout": split(**{**HONEST["heldout"], "pass": BLIND})}
    generalised, se = generalisation(BLIND, 160, BLIND)
    assert not generalised and se == pytest.approx((0.2 * 0.8 / 160) ** 0.5, rel=1e-12)
    assert generalisation(0.5, 160, BLIND)[0]
    result = judged(memorised, generalised)
    assert result.passed and len(result.checks) == 6
    assert not any("(heldout) near" in c.claim or "rate (heldout)" in c.claim for c in result.checks)
    line = verdict_line(7, BLIND, BLIND, se, generalised)
    assert "MEMORISED" in line and "not made" in line and "GENERALISED" in verdict_line(7, 0.5, BLIND, se, True)


def test_an_agent_below_the_blind_level_fails():
    lost = {**HONEST, "heldout": split(**{**HONEST["heldout"], "pass": 0.05})}
    assert any("scripted blind level" in claim for claim in failed(judged(lost, False)))


@pytest.mark.integration
def test_measured_gives_the_fields_the_claims_read(tok):
    from pglab.apps.demo import measured
    from pglab.envs.bugfix import make_tasks
    from pglab.trainers.cloning import CloningSettings, make_base_agent
    from pglab.trainers.tinyagent import sample_episodes

    agent = make_base_agent(tok, settings=CloningSettings(steps=2, episodes_per_task=1),
                            tasks=make_tasks("train")[:2], cache=False)           # any agent: the fields matter
    batches = {name: sample_episodes(agent, tok, make_tasks(name)[:2], 1, seed=1) for name in HONEST}
    found = measured({"before": batches, "after": batches})
    for name, values in found.items():
        assert set(values) == set(HONEST[name]) and values["pass"] == values["base_pass"]
        assert values["episodes"] == 2 and values["calls"] >= 2
    judged(found)                                   # every field the claims read is there


def test_the_valid_call_spread_over_seeds_is_the_committed_sweeps():
    import json
    import statistics

    from pglab.apps.demo import VALID_SD_OVER_SEEDS
    from support import ROOT

    sweep = json.loads((ROOT / "docs" / "results" / "format_penalty.json").read_text())
    runs = [run for run in sweep["runs"] if run["format_penalty"] == sweep["choice"]["format_penalty"]]
    for split_name, sd in VALID_SD_OVER_SEEDS.items():
        assert sd == pytest.approx(statistics.stdev(run[f"{split_name}_valid_calls"] for run in runs), abs=5e-5)
