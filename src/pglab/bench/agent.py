"""bench agent: episodes collected with the KV cache against recomputing every prefix, and ``pglab demo``'s time.

Run by ``pglab bench agent``. Both collectors play the same 64 episodes (same model, same seed, same
sampled tokens); the reference recomputes the whole prefix of every row for each new token. The
demo is timed end to end with an empty base-agent cache, so behaviour cloning is included.
"""

from __future__ import annotations

import os
import tempfile
import time

import torch

from pglab.reporting.result import Result
from pglab.runtime.threads import single_torch_thread

TARGET_SPEEDUP = 3.0
DEMO_SECONDS = 60.0


def episode_seconds(use_cache: bool, batch: int, seed: int) -> tuple[float, torch.Tensor]:
    """(seconds, ids) of ``batch`` base-agent episodes collected in lockstep, cycling over the training tasks."""
    from pglab.envs.bugfix import make_tasks
    from pglab.envs.text import BugFixText
    from pglab.models import TinyAgentPolicy, build_tokenizer
    from pglab.sampling.episodes import WordLayout, collect_episodes
    from pglab.trainers.cloning import make_base_agent

    with single_torch_thread():
        tokenizer = build_tokenizer(make_tasks("all"))
        model = make_base_agent(tokenizer)
        tasks = make_tasks("train")
        picked = [i % len(tasks) for i in range(batch)]
        envs = [BugFixText(tasks) for _ in picked]
        start = time.perf_counter()
        episodes = collect_episodes(TinyAgentPolicy(model, use_cache=use_cache), WordLayout(tokenizer), envs, picked,
                                    torch.Generator().manual_seed(seed))
        return time.perf_counter() - start, episodes.ids


def run(quick: bool = False) -> Result:
    """KV-cache speed-up at batch 64 (median of rounds), and ``pglab demo`` end to end (``--quick`` size if quick)."""
    from pglab.apps.demo import demo

    batch, rounds = 64, 1 if quick else 3
    load = os.getloadavg()[0]
    result = Result("bench-agent", {"batch": batch, "rounds": rounds, "quick": quick, "cpus": os.cpu_count(),
                                    "load_average_1min": load}, summary=(
        f"{batch} base-agent episodes collected in lockstep with the KV cache and with every prefix recomputed "
        "(same tokens), then `pglab demo` timed end to end with an empty base-agent cache. Load average at the "
        f"start: {load:.2f} on {os.cpu_count()} cores."))
    rows = []
    for r in range(rounds):
        cached, ids_cached = episode_seconds(True, batch, seed=r)
        recompute, ids_recompute = episode_seconds(False, batch, seed=r)
        rows.append({"round": r, "kv_cache_s": cached, "recompute_s": recompute, "speedup": recompute / cached,
                     "same_tokens": bool(torch.equal(ids_cached, ids_recompute))})
    result.tables["episodes"] = rows
    speedup = sorted(row["speedup"] for row in rows)[len(rows) // 2]
    with tempfile.TemporaryDirectory() as folder:
        previous = os.environ.get("PGLAB_CACHE")
        os.environ["PGLAB_CACHE"] = os.path.join(folder, "cache")
        try:
            start = time.perf_counter()
            demo_result = demo(os.path.join(folder, "demo"), seed=0, quick=quick)
            demo_s = time.perf_counter() - start
        finally:
            if previous is None:
                del os.environ["PGLAB_CACHE"]
            else:
                os.environ["PGLAB_CACHE"] = previous
    result.tables["demo"] = [{"size": "quick" if quick else "full", "seconds": demo_s,
                              "train_seconds": demo_result.metrics["train_seconds"],
                              "load_average_1min_after": os.getloadavg()[0]}]
    result.metrics.update({"kv_speedup": speedup, "demo_seconds": demo_s, "load_average_1min": load})
    result.check_range(f"KV-cache speed-up of the episode collector over recomputing every prefix, batch {batch}",
                       speedup, low=TARGET_SPEEDUP,
                       tolerance="acceptance: at least 3x; ratio in one run, median of rounds")
    result.check("the two collectors sampled the same tokens", sum(r["same_tokens"] for r in rows),
                 all(r["same_tokens"] for r in rows), f"{rounds} of {rounds}", "exact")
    result.check_range("pglab demo wall time, base agent included (seconds)", demo_s, high=DEMO_SECONDS,
                       tolerance=f"acceptance: 60 s on 2 cores; an absolute time, load average {load:.2f}")
    return result
