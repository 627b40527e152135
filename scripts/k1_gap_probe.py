"""k1 gap probe: is lm-kl's k1 estimate of the KL biased, and what is the standard error of k1 - exact?

Trains one lm-kl run (full size, the given first seed and beta), then samples ROUNDS extra held-out evaluations of
the same prompts (each 64 prompts x 4 replies, new draws) and records each reply's k1 (the summed log-ratio) and its
exact KL (summed over positions from the full distributions). ``--summary DIR`` prints, per round, the mean gap
k1 - exact, the se of k1 alone, the se of the gap over replies and over prompt means, and z; then the pooled gap.

Run: ``python scripts/k1_gap_probe.py SEED BETA ROUNDS OUT`` (one run is about 10 minutes on one core), then
``python scripts/k1_gap_probe.py --summary OUT``. Output kept in docs/results/lm-kl-k1-gap/ (first seeds 20000 and
20001, beta 0.05, 10 rounds).
"""

import json
import sys
from pathlib import Path

import numpy as np


def run(seed: int, beta: float, rounds: int, out: Path) -> None:
    import pglab.trainers.lm.train as train
    from pglab.experiments.lm_kl import Config, rl_config
    from pglab.trainers.lm.eval import score_replies
    from pglab.trainers.loop import step_generator

    measured, original = [], train.evaluate

    def evaluate(session, step, run_):
        record = original(session, step, run_)
        if step == session.cfg.max_steps:
            cfg, prompts = session.cfg, session.eval_prompts
            index = list(range(min(cfg.eval_prompts, len(prompts))))
            for r in range(rounds):
                ids, mask, prompt_mask = session.sample(prompts, index, cfg.eval_generations,
                                                        step_generator(cfg.seed + 7919 * (r + 1), 0, 0, session.device))
                start = prompt_mask.shape[1]
                reference = train.load_causal_lm(cfg.model, cfg.default_size, progress=False)[0].eval()
                rows = [i for i in index for _ in range(cfg.eval_generations)]
                reply_ids = session.decode(ids, mask, start)[1]
                scored = score_replies(session.sampler, lambda ref=reference: session.reference(lambda: ref),
                                       session.tokenizer, ids, mask, start, session.rewards, prompt_mask,
                                       lambda replies, rows=rows, reply_ids=reply_ids:
                                       session.completions(prompts, rows, replies, reply_ids))
                k1 = (scored.logp - scored.ref_logp).sum(-1)
                measured.append({"k1": k1.tolist(), "exact": scored.exact_kl.tolist()})
        return record

    train.evaluate = evaluate
    trained = train.train_lm(rl_config(Config(), seed, beta), progress=False)
    final = {k: trained.evals[-1][k] for k in ("kl_k1", "kl_exact", "kl_k1_se", "kl_gap_se")}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"s{seed}_b{beta}.json").write_text(json.dumps({"final": final, "rounds": measured}))


def summary(folder: Path, generations: int = 4) -> None:
    for path in sorted(folder.glob("s*_b*.json")):
        print(path.stem)
        pooled = []
        for r in json.loads(path.read_text())["rounds"]:
            k1, exact = np.array(r["k1"]), np.array(r["exact"])
            gap, n = k1 - exact, len(k1)
            prompts = gap.reshape(-1, generations).mean(1)
            se = gap.std(ddof=1) / np.sqrt(n)
            print(f"  gap {gap.mean():+.3f}  se(k1) {k1.std(ddof=1) / np.sqrt(n):.3f}  se(gap) {se:.3f}  "
                  f"se(gap over prompts) {prompts.std(ddof=1) / np.sqrt(len(prompts)):.3f}  z {gap.mean() / se:+.2f}")
            pooled.append(gap)
        gap = np.concatenate(pooled)
        se = gap.std(ddof=1) / np.sqrt(len(gap))
        print(f"  pooled over {len(gap)} replies: gap {gap.mean():+.3f}, se {se:.3f}, z {gap.mean() / se:+.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(Path(sys.argv[2]))
    else:
        run(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
