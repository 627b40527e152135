"""Programs graded per second by the BugFix sandbox of two checkouts, paired in one run (round three's speed check).

Usage: python scripts/bugfix_pair.py OLD_SRC NEW_SRC [ROUNDS]. Each round grades the same random-play programs (the
bench's sample of reachable sources on the training tasks, generated cases cut to CUT per task on both sides, so both do
the same work) with a fresh two-worker ``auto`` sandbox and the cache off, first with OLD_SRC's package,
then with NEW_SRC's, each in its own interpreter. Prints one line per run and the median ratio new/old.
"""

import statistics
import subprocess
import sys

CUT = 250
"""Generated cases kept per task on both sides (the same work whatever either checkout generates)."""
RUN = """
import dataclasses, sys, time
sys.path.insert(0, {src!r})
from pglab.envs.bugfix import BUDGET, Grader, Sandbox, make_tasks
from pglab.envs.bugfix.scripted import reachable_sources
programs = [(dataclasses.replace(t, generated=t.generated[:{cut}]), s) for t in make_tasks("train")
            for s in sorted(reachable_sources(t, BUDGET - 1))]
sample = programs[:: max(1, len(programs) // 200)]
grader = Grader(Sandbox(workers=2, isolation="auto"), cache=False)
grader.grade_many(sample[:4])
start = time.perf_counter()
grades = grader.grade_many(sample)
print(len(sample) / (time.perf_counter() - start), sum(g.hidden_pass for g in grades))
"""


def rate(src: str, cut: int) -> float:
    out = subprocess.run([sys.executable, "-c", RUN.format(src=src, cut=cut)], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0])


def main() -> None:
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    ratios = []
    for k in range(rounds):
        a, b = rate(old, CUT), rate(new, CUT)
        ratios.append(b / a)
        print(f"round {k + 1}: old {a:.2f} programs/s, new {b:.2f} programs/s, ratio {b / a:.3f}", flush=True)
    print(f"median ratio new/old: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
