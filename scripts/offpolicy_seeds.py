"""offpolicy_seeds.py START STOP: how often offpolicy-bias's shape claims hold over first seeds START..STOP-1.

The claims about the naive loss's growth with the mismatch and sequence TIS's cap sweep are exact measurements of one
random policy, not theorems, so their false-alarm rate is measured here: at each first seed the same audits as the
experiment (``audit_row``: naive at every noise scale and staleness, sequence TIS at each cap and sequence IS at the
largest of each), then per candidate claim the number of seeds where it fails. The experiment claims only those that
held at every seed (the naive loss's ends, the cap sweep's variance); step-by-step growth of the naive bias and the
cap sweep's bias (it failed at some seeds, even between the sweep's ends) are its metrics.

Run: ``python scripts/offpolicy_seeds.py 40000 40245`` (about 2 s a seed on one core).
Output kept in docs/results/offpolicy-bias-seeds.txt.
"""

import sys

from pglab.experiments.offpolicy_bias import Config, audit_row, cap_series, steps_up
from pglab.runtime.progress import track


def shapes(seed: int) -> dict[str, bool]:
    """Whether each candidate claim holds at first seed ``seed`` (both samplers)."""
    config = Config(first_seed=seed)
    held = {}
    for kind, specs in (("noise", [f"noise:{s:g}" for s in config.noise_scales]),
                        ("stale", [f"stale:{k}" for k in config.staleness])):
        naive = [audit_row(config, spec, "naive")["relative_bias"] for spec in specs]
        swept = [audit_row(config, specs[-1], "sequence TIS", cap) for cap in config.caps]
        sequence_is = audit_row(config, specs[-1], "sequence IS")
        biases, variances, strict = cap_series(swept, sequence_is, config)
        held |= {f"{kind}: naive bias grows at every step": steps_up(naive) == 0,
                 f"{kind}: naive bias at the largest mismatch >= at the smallest": naive[-1] >= naive[0],
                 f"{kind}: cap sweep's total variance rises at every step": steps_up(variances, strict) == 0,
                 f"{kind}: cap sweep's bias falls at every step":
                     steps_up([-b for b in biases], strict) == 0,
                 f"{kind}: bias at the smallest cap >= at the largest cap": biases[0] >= biases[-2]}
    return held


def main(start: int, stop: int) -> None:
    failures: dict[str, list[int]] = {}
    for seed in track(range(start, stop), "auditing first seeds", total=stop - start):
        for claim, ok in shapes(seed).items():
            failures.setdefault(claim, [])
            if not ok:
                failures[claim].append(seed)
    print(f"# scripts/offpolicy_seeds.py {start} {stop}: {stop - start} first seeds, exact audits (float64)")
    for claim, seeds in failures.items():
        shown = ", ".join(map(str, seeds[:8])) + (" ..." if len(seeds) > 8 else "")
        print(f"{claim}: fails at {len(seeds)} of {stop - start}" + (f" ({shown})" if seeds else ""))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
