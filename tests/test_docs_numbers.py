"""Every number README.md and docs/*.md quote with a marker is the one docs/numbers.json holds.

docs/numbers.json is regenerated from experiment runs by ``make docs-numbers`` (scripts/docs_numbers.py);
a quoted number is written ``0.903<!-- n experiment:metric -->``.
"""

import functools
import importlib.util
import json
import statistics

import pytest

from support import ROOT
from support.tool_envs import meets_goal

spec = importlib.util.spec_from_file_location("docs_numbers", ROOT / "scripts" / "docs_numbers.py")
docs_numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(docs_numbers)
NUMBERS = json.loads((ROOT / "docs" / "numbers.json").read_text())["numbers"]


@pytest.mark.parametrize("path", docs_numbers.documents(ROOT), ids=lambda p: p.name)
def test_quoted_numbers_are_the_results_files(path):
    text = path.read_text()
    new, missing = docs_numbers.rewrite(text, NUMBERS)
    assert not missing, f"{path.name} quotes keys docs/numbers.json lacks: {missing}"
    wrong = [(old[0], fresh[0]) for old, fresh in zip(docs_numbers.MARK.finditer(text), docs_numbers.MARK.finditer(new))
             if old[0] != fresh[0]]
    assert not wrong, f"{path.name}: quoted -> in docs/numbers.json: {wrong}; run `make docs-numbers`"


def test_the_measured_pages_quote_through_markers():
    """The pages whose measured numbers the results file holds do mark them (a page with none would pass vacuously)."""
    for name in ("README.md", "docs/agent.md"):
        assert len(docs_numbers.MARK.findall((ROOT / name).read_text())) >= 5, name


def test_every_key_names_an_experiment_or_a_committed_result_of_the_file():
    assert {key.split(":")[0] for key in NUMBERS} <= {*docs_numbers.EXPERIMENTS, *docs_numbers.COMMITTED}
    for name in docs_numbers.COMMITTED:
        assert (docs_numbers.ROOT / "docs" / "results" / name / "result.json").exists(), name


def test_render_keeps_the_digits_the_text_shows():
    numbers = {"x:a": 0.90334, "x:b": 0.4312, "x:c": -0.0512, "x:d": 166912.0}
    text = ("r 0.9<!-- n x:a --> / 0.903<!-- n x:a -->, cut 43%<!-- n x:b -->, change +0.01<!-- n x:c -->, "
            "1,000<!-- n x:d --> parameters, 1.0<!-- n x:e -->, range 0.1<!-- n x:b -->-0.2<!-- n x:a -->")
    new, missing = docs_numbers.rewrite(text, numbers)
    assert new == ("r 0.9<!-- n x:a --> / 0.903<!-- n x:a -->, cut 43%<!-- n x:b -->, change -0.05<!-- n x:c -->, "
                   "166,912<!-- n x:d --> parameters, 1.0<!-- n x:e -->, range 0.4<!-- n x:b -->-0.9<!-- n x:a -->")
    assert missing == ["x:e"]


def _agent_rows(*names: str) -> list[dict]:
    sweeps = ROOT / "docs" / "results" / "agent-sweep"
    return [r for name in names for r in json.loads((sweeps / name / "runs.json").read_text())["rows"]]


def _met(runs) -> int:
    """How many of the sweep rows ``runs`` meet the acceptance goal."""
    return sum(meets_goal(r["env"], r["base_heldout"], r["trained_heldout"]) for r in runs)


def _mean(runs) -> str:
    """The mean trained held-out reward of the sweep rows ``runs``, as the docs print it."""
    runs = list(runs)
    return f"{sum(r['trained_heldout'] for r in runs) / len(runs):.2f}"


def test_the_tool_agent_acceptance_table_is_the_committed_runs():
    """docs/agents.md's acceptance table (held-out reward before -> after) is what the committed agent sweeps hold:
    the argument-name rule from acceptance-names/ and fresh-five/, version 9 before it from acceptance-v9/ and
    fresh-before-names/, version 8 constrained from acceptance-calls/ and fresh-before-v9/ ("not run" where it has no
    row)."""
    import re

    def runs(*names):
        return {(r["env"], r["seed"]): f"{r['base_heldout']:.2f} -> {r['trained_heldout']:.2f}"
                for r in _agent_rows(*names)}

    columns = [runs("acceptance-names", "fresh-five"), runs("acceptance-v9", "fresh-before-names"),
               runs("acceptance-calls", "fresh-before-v9")]
    text = (ROOT / "docs" / "agents.md").read_text()
    table = text[text.index("| environment | names rule, seed 0 |"):]
    body = table.split("\n\n")[0].split("\n", 2)[2]                         # below the header and its rule
    rows = re.findall(r"^\| (\w+)[^|]* \|" + r" ([^|]+) \|" * 6 + "$", body, re.M)
    assert len(rows) == len(columns[0]) // 2 == len(columns[1]) // 2 + 5 == 32
    for env, *cells in rows:
        expected = [column.get((env, seed), "not run") for column in columns for seed in (0, 1)]
        assert [c.strip() for c in cells] == expected, env


def test_the_tool_agent_acceptance_counts_in_the_text_are_the_committed_runs():
    """The counts and means docs/agents.md states around its acceptance table, recomputed from the runs.json files:
    runs meeting the goal (held-out reward up 0.3, or to 0.7 where a blind guess gets half), the mean trained
    held-out reward, runs ending at 0.9 or more, the fresh environments' share, and the defaults sweeps' mean gains
    of the two rates."""
    met, mean = _met, _mean

    def gain(runs, rate):
        picked = [r["heldout_gain"] for r in runs if r["learning_rate"] == rate and r["advantage"] == "reinforce"
                  and r["format_penalty"] == 0.1]
        return f"{sum(picked) / len(picked):.2f}"

    names, v9 = _agent_rows("acceptance-names"), _agent_rows("acceptance-v9", "fresh-before-names")
    v8, free = _agent_rows("acceptance-calls", "fresh-before-v9"), _agent_rows("acceptance-calls-free")
    fresh = ("library", "flight", "age", "stove", "recipe", "plural")
    first = [r for r in v9 if r["env"] not in fresh]
    text = " ".join((ROOT / "docs" / "agents.md").read_text().split())
    assert f"**with the argument-name rule {met(names)} of {len(names)}**, version 9 before it {met(v9)} of " \
           f"{len(v9)}, version 8 with constrained calls {met(v8)} of {len(v8)}, and version 8 with free calls " \
           f"{met(free)} of the {len(free)} it ran" in text
    high = [sum(r["trained_heldout"] >= 0.9 for r in runs) for runs in (first, v8)]
    assert f"Over the {len(first)} runs of the first 21 environments the trained agent's mean held-out reward is " \
           f"{mean(first)} with version 9 and {mean(v8)} with version 8, and {high[0]} runs against {high[1]} end at " \
           f"0.9 or more; over all {len(names)} it is {mean(names)} with the rule and {mean(v9)} before it" in text
    fresh_names = [r for r in names if r["env"] in fresh]
    fresh_v9 = [r for r in v9 if r["env"] in fresh]
    assert f"{met(fresh_names)} of {len(fresh_names)} runs meet the goal with the rule ({met(fresh_v9)} of " \
           f"{len(fresh_v9)} before it), and their mean trained held-out reward is {mean(fresh_names)}" in text
    five = _agent_rows("fresh-five")
    assert f"(bus to dose, committed at e3b1629 before any run of them): {met(five)} of {len(five)} runs meet the " \
           "goal" in text
    trial = {(r["env"], r["seed"]): r for r in _agent_rows("trial-v10")}
    incumbent = {(r["env"], r["seed"]): r for r in names + five}
    assert trial.keys() == incumbent.keys()
    gaps = [trial[k]["trained_heldout"] - incumbent[k]["trained_heldout"] for k in trial]
    gap = sum(gaps) / len(gaps)
    se = (sum((g - gap) ** 2 for g in gaps) / (len(gaps) - 1) / len(gaps)) ** 0.5
    assert f"{mean(list(trial.values()))} against {mean(list(incumbent.values()))} (difference {gap:.3f}, se " \
           f"{se:.3f}, over {len(gaps)} paired runs)" in text and gap < 2 * se
    assert f"meets the goal on {met(trial.values())} of {len(trial)} runs against version 9's " \
           f"{met(incumbent.values())}" in text

    def after(runs, env):
        return [f"{runs[(env, seed)]['trained_heldout']:.2f}" for seed in (0, 1)]

    def base(runs, env):
        return f"{runs[(env, 0)]['base_heldout']:.2f}"

    assert "flight 0.00 -> {} and {}, bus 0.00 -> {} at both seeds".format(*after(trial, "flight"),
                                                                          after(trial, "bus")[0]) in text
    assert len(set(after(trial, "bus"))) == 1
    assert f"lookup fell from {base(incumbent, 'lookup')} to {base(trial, 'lookup')}, on capital from " \
           f"{base(incumbent, 'capital')} to {base(trial, 'capital')}" in text
    lr3 = _agent_rows("acceptance-calls-lr3e-3")
    assert f"{met(lr3)} of {len(lr3)} runs meet the goal" in text
    constrained, v9_sweep = _agent_rows("defaults-constrained"), _agent_rows("defaults-v9")
    assert f"the best mean gain, {gain(constrained, 0.003)} at 3e-3, beats 1e-3's {gain(constrained, 0.001)}" in text
    assert f"{gain(v9_sweep, 0.003)} at 3e-3, {gain(v9_sweep, 0.001)} at 1e-3" in text


def _probe(name: str) -> dict[str, tuple[int, float]]:
    """{environment: (median rank of the right first argument, mean p that the first call names the right tool)}."""
    import re

    text = (ROOT / "docs" / "results" / "tool-agent" / name).read_text()
    found = re.findall(r"^(\w+): median rank (\d+), first call names \w+ with mean p ([\d.]+)$", text, re.M)
    return {env: (int(rank), float(p)) for env, rank, p in found}


def test_the_argument_probe_numbers_in_agents_md_are_the_committed_probe_output():
    """The first-call probabilities and the argument ranks docs/agents.md quotes, rebuilt from the probe's output."""
    probe, trial = _probe("argument-rank.txt"), _probe("argument-rank-v10.txt")
    text = " ".join((ROOT / "docs" / "agents.md").read_text().split())
    low = {e: p for e, (_, p) in probe.items() if p < 0.05}
    mid = {e: p for e, (_, p) in probe.items() if 0.05 <= p < 0.8}
    high = {e: p for e, (_, p) in probe.items() if p >= 0.8}
    assert set(low) == {"colour", "flight", "bus", "spell"} and set(mid) == {"recipe", "age", "hotel", "password"}
    assert f"{min(high.values()):.2f}-{max(high.values()):.2f} in {len(high)} of the {len(probe)} environments it " \
           f"probes, {min(mid.values()):.2f}-{max(mid.values()):.2f} in recipe, age, hotel and password, and " \
           f"{min(low.values()):.3f}-{max(low.values()):.3f} where" in text
    ranks: dict[int, list[str]] = {}
    for env, (rank, _) in probe.items():
        if rank > 3:
            ranks.setdefault(rank, []).append(env)
    assert sum(rank <= 3 for rank, _ in probe.values()) > len(probe) / 2
    named = ", ".join(f"{rank} in {' and '.join(envs)}" for rank, envs in sorted(ranks.items(), reverse=True))
    assert f"is 1-3 in most environments, but {named} (with" in text
    assert f"names `status` with probability {trial['flight'][1]:.2f} and `timetable` with " \
           f"{trial['bus'][1]:.2f}" in text


def test_the_lm_kl_sweep_numbers_in_experiments_md_are_the_committed_sweep():
    """The k1 claims' z rms and the wall times docs/experiments.md states for lm-kl's sweep, from lm-kl.json (z from
    each claim's two-sided p-value)."""
    from statistics import NormalDist

    runs = json.loads((ROOT / "docs" / "results" / "seed-sweep" / "lm-kl.json").read_text())["runs"]
    z = [NormalDist().inv_cdf(1 - c["p_value"] / 2) for r in runs for c in r["claims"] if "k1 estimate" in c["claim"]]
    rms = (sum(x * x for x in z) / len(z)) ** 0.5
    seconds = [r["wall_seconds"] for r in runs]
    text = " ".join((ROOT / "docs" / "experiments.md").read_text().split())
    assert f"({round(min(seconds), -1):,.0f}-{round(max(seconds), -1):,.0f} s a run" in text
    assert f"held at {sum(r['passed'] for r in runs)} of {len(runs)}. Over its {len(z)} k1 claims the z's have rms " \
           f"{rms:.2f} (largest |z| {max(z):.2f})" in text


def test_the_exploration_pilot_numbers_in_agents_md_are_the_committed_pilots():
    """The pilots' means over their eight environments and the rewards quoted beside them (docs/agents.md's
    Exploration section) are those of docs/results/agent-sweep/pilot/*/runs.json."""
    pilot = ROOT / "docs" / "results" / "agent-sweep" / "pilot"

    def rows(name):
        return {r["env"]: r["trained_heldout"] for r in json.loads((pilot / name / "runs.json").read_text())["rows"]}

    def mean(name):
        return f"{sum(rows(name).values()) / 8:.2f}"

    every = sorted(float(mean(name)) for name in ("e1none", "e2none", "e2tis", "e5tis"))
    text = " ".join((ROOT / "docs" / "agents.md").read_text().split())
    assert f"was {mean('e0')} with the defaults, {mean('b2tis')} and {mean('b3none')} with the mixture at word " \
           f"choices" in text and f"and {every[0]:.2f}-{every[-1]:.2f} with it at every token" in text
    assert f"road fell from {rows('e0')['road']:.2f} to {rows('b2tis')['road']:.2f} and {rows('b3none')['road']:.2f}" \
           in text
    assert all(rows(name)[env] == 0 for name in ("e0", "b2tis", "b3none") for env in ("colour", "spell", "dose",
                                                                                     "hotel"))
    assert f"gave a mean of {mean('p64')} (dose 0.00 -> {rows('p64')['dose']:.2f}, road {rows('p64')['road']:.2f}), " \
           f"120 steps of 32 gave {mean('s120')}" in text
    plan = (ROOT / "docs" / "results" / "agent-sweep" / "trial-budget" / "PLAN.md").read_text()
    plan = " ".join(plan.split())
    assert f"dose 0.00 -> {rows('p64')['dose']:.2f}, road {rows('e0')['road']:.2f} -> {rows('p64')['road']:.2f}, " \
           f"hotel 0.00 -> {rows('p64')['hotel']:.2f}" in plan and f"120 steps of 32 gave road " \
           f"{rows('s120')['road']:.2f}" in plan


def test_the_budget_trial_numbers_and_table_in_agents_md_are_the_committed_trial():
    """docs/agents.md's trial of 64 episodes per step: its means, paired difference and se, longest runs, goal
    counts (all runs and the six fresh environments), the build-to-build comparison, and its table (64 and 32 per
    step from trial-budget/, the earlier build from acceptance-names/ and fresh-five/)."""
    import re
    import statistics

    def keyed(*names):
        return {(r["env"], r["seed"]): r for r in _agent_rows(*names)}

    new, old = keyed("trial-budget/candidate"), keyed("trial-budget/incumbent")
    earlier = keyed("acceptance-names", "fresh-five")
    assert new.keys() == old.keys() and len(new) == 76

    def met(side, keys):
        return _met(side[k] for k in keys)

    def mean(side, keys):
        return _mean(side[k] for k in keys)

    gaps = [new[k]["trained_heldout"] - old[k]["trained_heldout"] for k in new]
    se = statistics.stdev(gaps) / len(gaps) ** 0.5
    text = " ".join((ROOT / "docs" / "agents.md").read_text().split())
    assert f"was met: {mean(new, new)} against {mean(old, old)} (difference {statistics.fmean(gaps):.3f}, se " \
           f"{se:.3f}, over {len(gaps)} paired runs)" in text and statistics.fmean(gaps) > 2 * se
    longest = [max(r["seconds"] for r in side.values()) for side in (new, old)]
    assert f"took {longest[0]:.0f} s ({longest[1]:.0f} s with 32)" in text and longest[0] < 300
    assert f"It meets the goal in {met(new, new)} of {len(new)} runs against {met(old, old)}" in text
    fresh = [k for k in new if k[0] in ("parcel", "booking", "platform", "tip", "score", "shoes")]
    assert f"with 64 episodes per step {met(new, fresh)} of their {len(fresh)} runs meet the goal ({met(old, fresh)} " \
           "with 32)" in text
    assert f"With 64 episodes per step (the trial above) {met(new, new)} of {len(new)} runs meet the goal and " \
           f"{met(new, fresh)} of the {len(fresh)} runs on the six" in text
    common = [k for k in old if k in earlier]
    flips = [k for k in common if met(old, [k]) != met(earlier, [k])]
    assert f"{met(old, common)} of {len(common)} runs meet the goal on each build and the mean trained held-out " \
           f"reward is {mean(old, common)} here against {mean(earlier, common)} there, yet {len(flips)} runs" in text
    assert met(old, common) == met(earlier, common)

    def cell(side, key):
        return f"{side[key]['base_heldout']:.2f} -> {side[key]['trained_heldout']:.2f}" if key in side else "not run"

    raw = (ROOT / "docs" / "agents.md").read_text()
    table = raw[raw.index("| environment | 64 per step, seed 0 |"):].split("\n\n")[0].split("\n", 2)[2]
    rows = re.findall(r"^\| (\w+)[^|]* \|" + r" ([^|]+) \|" * 6 + "$", table, re.M)
    assert len(rows) == 38
    for env, *cells in rows:
        expected = [cell(side, (env, seed)) for side in (new, old, earlier) for seed in (0, 1)]
        assert [c.strip() for c in cells] == expected, env


FRESH_SIX = ("parking", "freezer", "refund", "synonym", "clock", "vote")
"""The environments written for the novelty trial (d39aaf2), reported on their own by every trial since."""


def _agents_md() -> str:
    """docs/agents.md with its whitespace runs made single spaces (a quoted sentence may wrap anywhere)."""
    return " ".join((ROOT / "docs" / "agents.md").read_text().split())


DEFAULTS_RUNS = ("trial-budget/candidate", "trial-novelty/incumbent-fresh")
"""The defaults' runs on the version-9 agent that every trial since the novelty bonus pairs with."""


def _trial(candidate: str, incumbent: tuple[str, ...] = DEFAULTS_RUNS, runs: int = 88,
           fresh_envs: tuple[str, ...] = FRESH_SIX, **settings) -> tuple[dict, dict, str, str]:
    """A trial of docs/results/agent-sweep/CANDIDATE/candidate-{a,b} (every row run with ``settings``) against the
    ``incumbent`` rows, ``runs`` pairs by (environment, seed) -> (candidate rows, incumbent rows, the verdict's
    sentence as docs/agents.md writes it, the ``fresh_envs``' sentence)."""
    def keyed(*names):
        return {(r["env"], r["seed"]): r for r in _agent_rows(*names)}

    new = keyed(f"{candidate}/candidate-a", f"{candidate}/candidate-b")
    old = keyed(*incumbent)
    assert new.keys() == old.keys() and len(new) == runs
    assert all(r[name] == value for r in new.values() for name, value in settings.items())

    def paired(keys):
        gaps = [new[k]["trained_heldout"] - old[k]["trained_heldout"] for k in keys]
        return statistics.fmean(gaps), statistics.stdev(gaps) / len(gaps) ** 0.5

    gap, se = paired(new)
    longest = max(r["seconds"] for r in new.values())
    met = gap > 2 * se and longest < 300
    verdict = (f"{'was met' if met else 'was not met'}: {_mean(new.values())} against {_mean(old.values())} "
               f"(difference {gap:.3f}, se {se:.3f}, over {len(new)} paired runs), and {_met(new.values())} of "
               f"{len(new)} runs meet the goal against {_met(old.values())}; its longest run took {longest:.0f} s")
    fresh = [k for k in new if k[0] in fresh_envs]
    if not fresh:
        return new, old, verdict, ""
    gap, se = paired(fresh)
    six = (f"the difference is {gap:.3f} (se {se:.3f}) and {{}} meets the goal in {_met(new[k] for k in fresh)} of "
           f"{len(fresh)} runs against the defaults' {_met(old[k] for k in fresh)}")
    return new, old, verdict, six


def _before_after(new: dict, old: dict, env: str, seed: int) -> tuple[str, str]:
    """The incumbent's and the candidate's trained held-out reward of one run, as the docs print them."""
    return f"{old[(env, seed)]['trained_heldout']:.2f}", f"{new[(env, seed)]['trained_heldout']:.2f}"


def test_the_novelty_trial_numbers_in_agents_md_are_the_committed_trial():
    """docs/agents.md's novelty-bonus paragraph: the trial's verdict (means, paired difference and se, goal counts,
    longest run), the environments it names and the six fresh ones, from trial-novelty/; the default follows the
    verdict; the recheck repeats trial-budget's rows."""
    from pglab.trainers.agent_config import USER_ENV

    new, old, verdict, six = _trial("trial-novelty", novelty=0.1, episodes_per_step=64)
    text = _agents_md()
    assert f"Its rule (more than two standard errors of the paired difference, no run over 300 s) {verdict}" in text
    assert USER_ENV["novelty"] == (0.1 if "was met" in verdict else 0.0)
    pair = functools.partial(_before_after, new, old)
    (w0, w0n), (w1, w1n), (p0, p0n), (p1, p1n) = (pair(e, s) for e in ("warehouse", "password") for s in (0, 1))
    assert f"warehouse rose from {w0} and {w1} to {w0n} and {w1n}, password from {p0} and {p1} to {p0n} and {p1n}, " \
           "parking at seed 1 from {} to {}) and lost elsewhere (birthday at seed 1 fell from {} to {}, dose at seed " \
           "0 from {} to {})".format(*pair("parking", 1), *pair("birthday", 1), *pair("dose", 0)) in text
    fresh = [k for k in old if k[0] in FRESH_SIX]
    helped = sorted({k[0] for k in fresh if _met([old[k]])})
    assert f"{six.format('the bonus')} ({' and '.join(helped)} at both seeds)" in text
    assert all(_met([old[(env, s)]]) for env in helped for s in (0, 1))
    assert f"on the six written for the novelty trial the defaults meet it in {_met(old[k] for k in fresh)} of " \
           f"{len(fresh)} runs, and over all 44 environments in {_met(old.values())} of {len(old)}" in text
    batch = _trial("trial-batch")[0]
    both = _trial("trial-both")[0]
    assert f"Neither the novelty bonus nor 128 episodes per step changed that by more than chance " \
           f"({_met(new.values())} of {len(new)} each), nor both together ({_met(both.values())})" in text
    assert _met(new.values()) == _met(batch.values())
    recheck = {(r["env"], r["seed"]): r for r in _agent_rows("trial-novelty/recheck")}
    assert len(recheck) == 2 and all(r["novelty"] == 0 for r in recheck.values())
    for k, r in recheck.items():
        assert [r[f] for f in ("base_heldout", "trained_heldout")] == [old[k][f] for f in ("base_heldout",
                                                                                          "trained_heldout")]


def test_the_batch_trial_numbers_in_agents_md_are_the_committed_trial():
    """docs/agents.md's 128-episodes paragraph: the trial's verdict, the runs it names and the six fresh
    environments, from trial-batch/; the default batch follows the verdict."""
    from pglab.trainers.agent_config import USER_ENV

    new, old, verdict, six = _trial("trial-batch", novelty=0, episodes_per_step=128)
    text = _agents_md()
    assert f"on the same 88 paired runs: its rule {verdict}" in text
    assert USER_ENV["episodes_per_step"] == (128 if "was met" in verdict else 64)
    pair = functools.partial(_before_after, new, old)
    assert "exchange at seed 0 from {} to {}, hotel at seed 0 from {} to {}, password and parking at seed 0 from {} " \
           "to {}) and lost library, which had learned at both seeds (from {} and {} to {} and {})".format(
               *pair("exchange", 0), *pair("hotel", 0), *pair("password", 0),
               *(pair("library", 0)[0], pair("library", 1)[0], pair("library", 0)[1], pair("library", 1)[1])) in text
    assert pair("parking", 0) == pair("password", 0)
    assert f"On the six environments of the novelty trial {six.format('it')}." in text
    pilot = {(r["env"], r["seed"]): r for r in _agent_rows("pilot/x4-seed0")}
    gaps = [pilot[k]["trained_heldout"] - old[k]["trained_heldout"] for k in pilot]
    assert len(pilot) == 38 and all(r["episodes_per_step"] == 128 for r in pilot.values())
    assert f"had found no gain before it (+{statistics.fmean(gaps):.3f}, se " \
           f"{statistics.stdev(gaps) / len(gaps) ** 0.5:.3f}" in text
    differ = {k[0]: abs(new[k]["trained_heldout"] - pilot[k]["trained_heldout"]) for k in pilot
              if (new[k]["base_heldout"], new[k]["trained_heldout"]) != (pilot[k]["base_heldout"],
                                                                         pilot[k]["trained_heldout"])}
    widest = max(differ, key=differ.get)
    assert f"same agent and settings, {len(pilot) - len(differ)} agree to four digits and {len(differ)} differ, by " \
           f"up to {differ[widest]:.2f} ({widest})" in text


def test_the_trial_of_both_numbers_in_agents_md_are_the_committed_trial():
    """docs/agents.md's paragraph on the bonus and 128 episodes together: its verdict, the runs it names and the six
    fresh environments, from trial-both/; the defaults follow the verdict."""
    from pglab.trainers.agent_config import USER_ENV

    new, old, verdict, six = _trial("trial-both", novelty=0.1, episodes_per_step=128)
    text = _agents_md()
    assert f"which its plan says weakens any pass. Its rule {verdict}, with a clean-clone" in text
    adopted = "was met" in verdict
    assert (USER_ENV["novelty"], USER_ENV["episodes_per_step"]) == ((0.1, 128) if adopted else (0.0, 64))
    pair = functools.partial(_before_after, new, old)
    (s0, s0n), (f1, f1n), (l1, l1n), (b0, b0n), (b1, b1n) = (
        pair(*k) for k in (("shoes", 0), ("flight", 1), ("library", 1), ("birthday", 0), ("birthday", 1)))
    assert f"shoes at seed 0 met the goal for the first time in any committed run (from {s0} to {s0n}) and flight " \
           f"at seed 1 for the first time on this build (from {f1} to {f1n}), while library at seed 1 and birthday " \
           f"at both seeds, which had learned, fell to {l1n}, {b0n} and {b1n}" in text
    assert min(float(x) for x in (l1, b0, b1)) >= 0.9 and _met([new[("shoes", 0)], new[("flight", 1)]]) == 2
    this_build = _agent_rows("trial-budget/incumbent", "trial-budget/candidate", "trial-novelty/candidate-b",
                             "trial-batch/candidate-b", "pilot/x4-seed0")
    every = [r for path in (ROOT / "docs" / "results" / "agent-sweep").rglob("runs.json")
             for r in json.loads(path.read_text())["rows"] if r not in new.values()]
    assert not _met(r for r in every if (r["env"], r["seed"]) == ("shoes", 0))
    assert not _met(r for r in this_build if (r["env"], r["seed"]) == ("flight", 1))
    assert f"On the six environments of the novelty trial {six.format('it')}." in text


def test_the_corpus_eleven_trial_numbers_in_agents_md_are_the_committed_trial():
    """docs/agents.md's corpus-11 paragraph: the trial's verdict over all 50 environments (the version-11 agent's
    runs of trial-v11/ against the version-9 agent's), the runs it names, the six environments written for it; the
    shipped agent's corpus version follows the verdict."""
    from pglab.envs.tooluse import VERSION
    from pglab.trainers.agent_config import USER_ENV

    six_envs = ("marathon", "overdraft", "swim", "helpdesk", "hilo", "rental")
    new, old, verdict, six = _trial("trial-v11", (*DEFAULTS_RUNS, "trial-v11/incumbent-new"), 100, six_envs,
                                    novelty=USER_ENV["novelty"], episodes_per_step=USER_ENV["episodes_per_step"])
    text = _agents_md()
    assert f"Its rule (more than two standard errors of the paired difference, no run over 300 s) {verdict}." in text
    assert VERSION == (11 if "was met" in verdict else 9)
    pair = functools.partial(_before_after, new, old)
    both = {env: (pair(env, 0), pair(env, 1)) for env in ("platform", "parking", "synonym", "weather", "hilo")}
    for env, phrase in (("platform", "platform ({} -> {} at both seeds)"), ("parking", "parking ({} -> {} at both)"),
                        ("synonym", "synonym ({} -> {} at both)"), ("weather", "weather ({} -> {} at both")):
        assert both[env][0] == both[env][1] and phrase.format(*both[env][0]) in text, env
    assert "hilo ({} -> {} at both seeds), marathon at seed 0 ({} -> {}".format(*both["hilo"][0],
                                                                              *pair("marathon", 0)) in text
    assert both["hilo"][0] == both["hilo"][1]
    assert "flight ({} -> {} and {})".format(*pair("flight", 0), pair("flight", 1)[1]) in text
    assert "freezer ({} and {} -> {} and {})".format(pair("freezer", 0)[0], pair("freezer", 1)[0],
                                                    pair("freezer", 0)[1], pair("freezer", 1)[1]) in text
    base = {env: (f"{old[(env, 0)]['base_heldout']:.2f}", f"{new[(env, 0)]['base_heldout']:.2f}")
            for env in ("seats", "stove")}
    assert "its base reward on seats rose from {} to {}, on stove fell from {} to {}".format(
        *base["seats"], *base["stove"]) in text
    fresh = [k for k in new if k[0] in six_envs]
    assert f"committed at c65c5f2 before any build or run of version 11, are reported on their own: " \
           f"{_met(new[k] for k in fresh)} of {len(fresh)} runs meet the goal against {_met(old[k] for k in fresh)} " \
           f"(difference {statistics.fmean(new[k]['trained_heldout'] - old[k]['trained_heldout'] for k in fresh):.3f}" \
           in text
    assert f"over all 50 environments the defaults on its agent meet the goal in {_met(new.values())} of {len(new)} " \
           f"runs ({_met(old.values())} on version 9), {_met(new[k] for k in fresh)} of {len(fresh)} on the six" in text


def test_the_corpus_twelve_trial_numbers_in_agents_md_are_the_committed_trial():
    """docs/agents.md's corpus-12 paragraph: its verdict against the version-11 runs (trial-v11/candidate-*), the
    runs it names, the count beside the acceptance line; the corpus version follows the verdict."""
    from pglab.envs.tooluse import VERSION
    from pglab.trainers.agent_config import USER_ENV

    new, old, verdict, _ = _trial("trial-v12", ("trial-v11/candidate-a", "trial-v11/candidate-b"), 100, (),
                                  novelty=USER_ENV["novelty"], episodes_per_step=USER_ENV["episodes_per_step"])
    text = _agents_md()
    assert f"Its rule (more than two standard errors of the paired difference, no run over 300 s) {verdict}." in text
    assert VERSION == (12 if "was met" in verdict else 11)
    pair = functools.partial(_before_after, new, old)
    assert all(new[(env, s)]["trained_heldout"] == 0 for env in ("marathon", "rental", "clock") for s in (0, 1))
    assert pair("parking", 0) == pair("parking", 1)
    assert "it lost parking ({} -> {} at both seeds), translate ({} -> {} and {}) and platform at seed 1 ({} -> {}), " \
           "and colour learned at seed 0 for the first time in any committed run ({} -> {})".format(
               *pair("parking", 0), *pair("translate", 0), pair("translate", 1)[1], *pair("platform", 1),
               *pair("colour", 0)) in text
    every = [r for path in (ROOT / "docs" / "results" / "agent-sweep").rglob("runs.json")
             for r in json.loads(path.read_text())["rows"] if r not in new.values()]
    assert _met([new[("colour", 0)]]) and not _met(r for r in every if r["env"] == "colour")
    assert f"version 12's prose prompts did not add to it ({_met(new.values())} of {len(new)})" in text
