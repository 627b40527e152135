"""The token world's step sizes against the book's table: a grid of (lr, critic_lr), each at a few first seeds.

For each cell, tokenworld-training's own claims against llm-ch6 §6.10 (every median updates to 0.9, every sd at
update 25, GAE's included) are made at each first seed; the line printed per cell is the mean over seeds of the
sum of their squared z-scores (a z is capped at 37 where the p-value underflows), how many seeds failed a claim,
and the three worst claims. Run: ``python scripts/tokenworld_fit.py 0.4,0.5,0.6 0.4,0.5,0.6,0.75,1.0 3``
(output kept in docs/results/tokenworld-fit.txt; about 40 s a cell and seed on one core).
"""

import sys
from statistics import NormalDist

import numpy as np
import torch

from pglab.envs.tokenworld import TokenWorld
from pglab.experiments import tokenworld_training as X
from pglab.reporting.result import Result
from pglab.trainers.tokenworld import train_tokenworld

torch.set_num_threads(1)
lrs = [float(x) for x in sys.argv[1].split(",")]
clrs = [float(x) for x in sys.argv[2].split(",")]
seeds = range(10000, 10000 + 1000 * int(sys.argv[3]), 1000)
for lr in lrs:
    for clr in clrs:
        total, worst, fails = [], {}, 0
        for s in seeds:
            c = X.Config(first_seed=s, lr=lr, critic_lr=clr, bootstrap=200)
            curves = {}
            for off in (0.0, c.shift):
                curves[off] = {n: train_tokenworld(TokenWorld(shift=off), n, lam, runs=c.seeds, updates=c.updates,
                                                   episodes=c.episodes, lr=lr, critic_lr=clr, init_p_a=0.5,
                                                   generator=torch.Generator().manual_seed(s))
                               for n, lam in X.method_names(c.lambdas).items() if off == 0.0 or n in X.BOOK_SHIFTED}
            r = Result("fit", {})
            X.book_claims(curves, c, r)
            X.check_claims(curves, c, r)
            z2 = 0.0
            for ch in r.checks:
                if "llm-ch6" in ch.claim:
                    z = -NormalDist().inv_cdf(min(max(ch.p_value, 1e-300) / 2, 0.4999999))
                    z2 += z * z
                    worst[ch.claim] = max(worst.get(ch.claim, 0), z)
            fails += not all(ch.passed for ch in r.checks)
            total.append(z2)
        w = sorted(worst.items(), key=lambda kv: -kv[1])[:3]
        print(f"lr {lr} clr {clr}: mean z2 {np.mean(total):.1f} over {len(r.checks)} fails {fails}/{len(total)} "
              f"worst {[(k[:30], round(v, 1)) for k, v in w]}", flush=True)
