"""bench bugfix: environment steps per second of scripted random play on BugFixEnv.

Run by ``pglab bench bugfix``. Three measurements in the same run, on the training tasks:
warm (the grader's cache already holds every program random play can reach, so a step does no
process work), cold (an empty cache: each new program runs in the sandbox once), and a
reference with the cache off (every test, submit and episode end runs the sandbox). The cold run
also starts with an empty op memo. Then programs graded per second with ``isolation="auto"`` against
``isolation="process"`` (the reference), on the same programs, in the same run, and with ``auto`` on the fixed
cases only (without the ~300 generated cases per task), which shows what the differential tests cost.
"""

from __future__ import annotations

import dataclasses
import os
import time

from pglab.envs.bugfix import (
    BUDGET,
    BugFixEnv,
    EpisodeRecord,
    Grader,
    Sandbox,
    apply_op,
    make_tasks,
    scripted_policy,
    scripted_rollout,
)
from pglab.envs.bugfix.scripted import reachable_sources
from pglab.reporting.result import Result

TARGET = 2000.0
ISOLATION_RATIO = 0.5


def programs_per_second(isolation: str, programs: list) -> tuple[float, dict]:
    """(programs graded per second with the cache off, the layer's description) in a fresh two-worker sandbox."""
    sandbox = Sandbox(workers=2, isolation=isolation)
    grader = Grader(sandbox, cache=False)
    grader.grade_many(programs[:4])  # start the workers
    start = time.perf_counter()
    grader.grade_many(programs)
    rate = len(programs) / (time.perf_counter() - start)
    sandbox.close()
    return rate, sandbox.describe()


def steps_per_second(grader: Grader, steps: int, seed: int) -> tuple[float, int]:
    """(steps/s, sandbox runs) of scripted random play over the training tasks, at least ``steps`` steps."""
    tasks, policy = make_tasks("train"), scripted_policy("random", seed)
    env = BugFixEnv(tasks, grader=grader)
    runs, done, episode = grader.runs, 0, 0
    start = time.perf_counter()
    while done < steps:
        done += EpisodeRecord.of(scripted_rollout(policy, env, tasks[episode % len(tasks)]).info).n_turns
        episode += 1
    return done / (time.perf_counter() - start), grader.runs - runs


def run(quick: bool = False) -> Result:
    """Warm-cache, cold-cache and cache-off steps per second of random play."""
    steps = {"warm": 5000 if quick else 50000, "cold": 1000 if quick else 5000, "off": 100 if quick else 400}
    sandbox = Sandbox(workers=2)
    result = Result("bench-bugfix", {"steps": steps, "budget": BUDGET, "workers": sandbox.size,
                                     "cpus": os.cpu_count()}, summary=(
        "Steps per second of scripted random play on the 20 training tasks. Warm: the cache was filled "
        "beforehand with every program random play can reach (graded in parallel), so steps only parse "
        "calls, apply memoised ops and look up grades. Cold: a fresh, empty cache. Off: no cache, every "
        "test, submit and episode end runs the program in the sandbox (the per-step reference)."))
    warm = Grader(sandbox)
    programs = [(t, s) for t in make_tasks("train") for s in sorted(reachable_sources(t, BUDGET - 1))]
    start = time.perf_counter()
    warm.grade_many(programs)
    fill_s = time.perf_counter() - start
    warm_sps, warm_runs = steps_per_second(warm, steps["warm"], seed=0)
    apply_op.cache_clear()
    cold_sps, cold_runs = steps_per_second(Grader(sandbox), steps["cold"], seed=1)
    off_sps, off_runs = steps_per_second(Grader(sandbox, cache=False), steps["off"], seed=2)
    sandbox.close()
    sample = programs[:: max(1, len(programs) // (40 if quick else 200))]
    auto_pps, layer = programs_per_second("auto", sample)
    process_pps, _ = programs_per_second("process", sample)
    fixed_pps, _ = programs_per_second("auto", [(dataclasses.replace(t, generated=()), s) for t, s in sample])
    result.config.update(isolation=layer["isolation"], landlock_abi=layer["landlock_abi"],
                         not_applied=layer["not_applied"])
    result.tables["programs_per_second"] = [
        {"isolation": f"auto ({layer['isolation']})", "programs_per_s": auto_pps, "programs": len(sample)},
        {"isolation": "process (reference)", "programs_per_s": process_pps, "programs": len(sample)},
        {"isolation": f"auto ({layer['isolation']}), fixed cases only", "programs_per_s": fixed_pps,
         "programs": len(sample)},
    ]
    result.metrics.update({"auto_programs_per_s": auto_pps, "process_programs_per_s": process_pps,
                           "auto_over_process": auto_pps / process_pps, "auto_fixed_only_programs_per_s": fixed_pps,
                           "generated_cases_cost": 1 - auto_pps / fixed_pps})
    result.check_range(f"programs/s with isolation=auto ({layer['isolation']}) over isolation=process",
                       auto_pps / process_pps, low=ISOLATION_RATIO,
                       tolerance="ratio measured in the same run; acceptance: at least 0.5")
    result.tables["steps_per_second"] = [
        {"cache": "warm", "steps_per_s": warm_sps, "sandbox_runs": warm_runs},
        {"cache": "cold", "steps_per_s": cold_sps, "sandbox_runs": cold_runs},
        {"cache": "off (reference)", "steps_per_s": off_sps, "sandbox_runs": off_runs},
    ]
    result.metrics.update({"load_average_1min": os.getloadavg()[0],
                           "warm_steps_per_s": warm_sps, "cold_steps_per_s": cold_sps, "off_steps_per_s": off_sps,
                           "warm_over_off": warm_sps / off_sps, "programs_filled": len(programs),
                           "fill_programs_per_s": len(programs) / fill_s})
    result.check_range("warm-cache steps/s of scripted random play", warm_sps, low=TARGET,
                       tolerance="acceptance: at least 2,000 on 2 cores")
    result.check("warm steps ran no program in the sandbox", warm_runs, warm_runs == 0, "0")
    result.check_range("speed-up of the warm cache over running the sandbox per step", warm_sps / off_sps,
                       low=1.0, tolerance="ratio measured in the same run")
    return result
