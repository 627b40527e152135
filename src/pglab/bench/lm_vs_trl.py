"""bench lm-vs-trl: one ``train-lm`` step against one TRL ``GRPOTrainer`` step doing the same work.

Both sides load the same tiny random GPT-2 (2 layers, 128 wide, a byte-level vocabulary of 256
bytes + end-of-text) from one ``save_pretrained`` folder and run, per step: 16 prompts (8 bytes
of a held-out review) x 4 replies x 24 tokens sampled at temperature 1 with end-of-text
suppressed, the VADER score of prompt + reply, group-normalised advantages, beta = 0.05 with the
k3 estimate in the loss (TRL's GRPO), a token-mean loss, Adam and gradient clipping, on the CPU.
TRL has no importance-sampling pass here (one generation per optimiser step). A step's time is
measured from the start of sampling to the end of the optimiser step; the claim is the ratio of
the medians, pglab over TRL, measured in the same run (blocks of steps alternate between the two).

TRL is installed only for this benchmark (``pip install 'pglab[bench]'``); without it the
benchmark says so and records a failed claim instead of a ratio.
"""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
from pathlib import Path

import torch

from pglab.models.default_lm import save_random_gpt2
from pglab.result import Result

PROMPTS, GENERATIONS, LENGTH, PROMPT_BYTES, BETA = 16, 4, 24, 8, 0.05


def prompts(n: int) -> list[str]:
    """``n`` prompts of PROMPT_BYTES bytes (= tokens) from held-out review openings."""
    from pglab.models.default_lm import review_openings

    return [text[:PROMPT_BYTES] for text in review_openings("train", n)]


@functools.cache
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def vader_texts(texts: list[str]) -> list[float]:
    """The VADER compound score of each text (one analyzer, built once, for both trainers)."""
    return [_vader().polarity_scores(t)["compound"] for t in texts]


def pglab_step_times(folder: Path, steps: int, out: Path, seed: int) -> list[float]:
    """Seconds per train-lm step (sampling to optimiser step), one block of ``steps``."""
    from pglab.trainers.lm import RLConfig, train_lm
    from pglab.trainers.lm.rewards import Reward

    (out / "prompts.txt").write_text("\n".join(prompts(8 * PROMPTS * steps)))
    cfg = RLConfig(model=str(folder), prompts=str(out / "prompts.txt"), max_steps=steps, learning_rate=1e-5,
                   prompts_per_step=PROMPTS, num_generations=GENERATIONS, prompt_length=PROMPT_BYTES,
                   max_completion_length=LENGTH, advantage="grpo", scale_rewards="group", beta=BETA, kl_in="loss",
                   aggregation="token_mean", eval_prompts=1, eval_generations=2, seed=seed, checkpoint_every=0)
    run = train_lm(cfg, reward=Reward("vader", vader_texts), progress=False)
    return [record["seconds"] for record in run.history]


def trl_step_times(folder: Path, steps: int, out: Path, seed: int) -> list[float]:
    """Seconds per GRPOTrainer step (on_step_begin to on_step_end), one block of ``steps``."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter() - self.start)

    def reward(prompts, completions, **kwargs):
        return vader_texts([p + c for p, c in zip(prompts, completions)])

    args = GRPOConfig(output_dir=str(out / "trl"), per_device_train_batch_size=PROMPTS * GENERATIONS,
                      num_generations=GENERATIONS, max_completion_length=LENGTH, beta=BETA, learning_rate=1e-5,
                      loss_type="bnpo", scale_rewards="group", temperature=1.0, top_k=0, top_p=1.0, max_steps=steps,
                      use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=10**6,
                      disable_dropout=True, seed=seed, dataloader_num_workers=0,
                      generation_kwargs={"suppress_tokens": [tokenizer.eos_token_id]})
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(folder), reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts(8 * PROMPTS * steps)}),
                          processing_class=tokenizer, callbacks=[Timer()])
    trainer.train()
    return times


def run(quick: bool = False) -> Result:
    """Median seconds per step of pglab and of TRL, in alternating blocks; the claim is their ratio."""
    steps, blocks, warmup = (4, 1, 1) if quick else (8, 2, 2)
    result = Result("bench-lm-vs-trl", {"prompts": PROMPTS, "generations": GENERATIONS, "completion_tokens": LENGTH,
                                        "beta": BETA, "steps_per_block": steps, "blocks": blocks,
                                        "warmup_steps_dropped": warmup, "threads": torch.get_num_threads()},
                    summary=("One RL step (sample 16 x 4 replies of 24 tokens, reward, reference pass, loss, Adam) "
                             "of pglab train-lm and of TRL's GRPOTrainer on the same tiny byte-level GPT-2, "
                             "on the CPU."))
    try:
        import trl
    except ImportError:
        result.summary += " TRL is not installed (pip install 'pglab[bench]'), so there is no ratio."
        result.check("TRL is installed for the comparison", 0.0, False, "trl importable",
                     "the ratio needs both sides measured in the same run")
        return result
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        save_random_gpt2(folder, vocab=257, layers=2, width=128, heads=4)
        ours: list[float] = []
        theirs: list[float] = []
        for block in range(blocks):
            theirs += trl_step_times(folder, steps, Path(tmp), block)[warmup:]
            ours += pglab_step_times(folder, steps, Path(tmp), block)[warmup:]
    pglab_s, trl_s = statistics.median(ours), statistics.median(theirs)
    ratio = pglab_s / trl_s
    result.tables["step_seconds"] = [{"trainer": "pglab train-lm", "median_s": pglab_s, "min_s": min(ours),
                                      "steps": len(ours)},
                                     {"trainer": f"TRL {trl.__version__} GRPOTrainer", "median_s": trl_s,
                                      "min_s": min(theirs), "steps": len(theirs)}]
    result.metrics.update({"pglab_step_s": pglab_s, "trl_step_s": trl_s, "ratio = pglab/TRL": ratio})
    result.check_range("ratio = pglab / TRL seconds per step", ratio, high=0.5,
                       tolerance="medians of steps measured in the same run, blocks alternating")
    return result
