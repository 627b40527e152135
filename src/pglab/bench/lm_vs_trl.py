"""bench lm-vs-trl: train-lm against TRL's GRPOTrainer doing the same work, and both against the GEMM-only bound.

Both sides load the same random GPT-2 from one ``save_pretrained`` folder, with the same tanh
GELU (``fuse_activations``: ``TanhGELU``) and, for TRL, ``gradient_checkpointing=False`` (GRPOConfig turns
it on by default, so its backward would recompute the forward). Per step: prompts of 8 bytes x 4
replies sampled at temperature 1 with end-of-text suppressed, the VADER score of prompt + reply,
group-normalised advantages, beta = 0.05 with k3 in the loss, a token-mean loss, Adam and
clipping, on the CPU. Sizes: small (2 layers x 128 wide, 16 prompts x 4 x 24 tokens) and large
(4 layers x 256 wide, 32 x 4 x 64 tokens).

The steps alternate: TRL's trainer runs, and after each of its steps (timed from on_step_begin to
on_step_end) a callback times one pglab step, so each pair sees the same machine load. The claim
is the median of the paired per-step ratios pglab / TRL, with its IQR, over 40 pairs at the small
size and 12 at the large one, after 2 warm-up pairs.

Speed-ups, each against the plain way, alternating, with the time saved as a share of the step
without it: the reply sampler against ``plain_sample_replies`` (the same draws, bitwise: every row
prefilled, banned ids masked every step, the end-of-text bookkeeping every step); a scoring pass
with its backward through ``pglab.models.gpt2`` against HF's forward on the same rows; one
``TanhGELU`` against torch's tanh-GELU kernel on the MLP's activations; fused against foreach Adam.

The bound: one pglab step is run under a dispatch mode that records every matrix multiply and
attention call (forward, sampling and backward) with its shapes, strides and dtypes; after each
pair of steps all of them are replayed alone on fresh tensors of those shapes, so the GEMM-only
time sees the load the steps saw. ``bound = pglab/GEMM`` is the median of the per-step ratios.

TRL is installed only for this benchmark (``pip install 'pglab[bench]'``); without it the
benchmark says so and records a failed claim instead of a ratio.
"""

from __future__ import annotations

import functools
import importlib.util
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pglab.models.default_lm import save_random_gpt2
from pglab.reporting.result import Result

GENERATIONS, PROMPT_BYTES, BETA = 4, 8, 0.05


@dataclass(frozen=True)
class Size:
    name: str
    layers: int
    width: int
    prompts: int
    length: int
    pairs: int
    """Alternating pairs of steps timed (after the warm-up pairs): more where a step is cheap."""


SIZES = {"small": Size("small", 2, 128, 16, 24, 40), "large": Size("large", 4, 256, 32, 64, 12)}
WARMUP = 2
"""Pairs run first and dropped from the medians."""
GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm", "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_flash_attention_backward")


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


def pglab_session(folder: Path, size: Size, steps: int, out: Path, seed: int):
    """A train-lm Session on the benchmark's settings (its ``step(i)`` is one timed step)."""
    from pglab.trainers.lm import RLConfig
    from pglab.trainers.lm.rewards import Reward, as_rewards
    from pglab.trainers.lm.session import Session

    (out / "prompts.txt").write_text("\n".join(prompts(8 * size.prompts * steps)))
    cfg = RLConfig(model=str(folder), prompts=str(out / "prompts.txt"), max_steps=steps, learning_rate=1e-5,
                   prompts_per_step=size.prompts, num_generations=GENERATIONS, prompt_length=PROMPT_BYTES,
                   max_completion_length=size.length, advantage="grpo", scale_rewards="group", beta=BETA,
                   kl_in="loss", aggregation="token_mean", eval_prompts=1, eval_generations=2, seed=seed)
    return Session(cfg, torch.device("cpu"), as_rewards(Reward("vader", vader_texts)), progress=False)


class Recorder(TorchDispatchMode):
    """Counts every GEMM / attention call by (op, argument shapes, strides, dtypes, other arguments)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket.__name__ in GEMM_OPS:
            key = (func, tuple(("T", tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a
                               for a in args), tuple(sorted(kwargs.items())))
            self.calls[key] += 1
        return func(*args, **kwargs)


def materialise(args: tuple) -> list:
    """Fresh tensors with each recorded argument's shape, strides and dtype (other arguments as they were)."""
    gen = torch.Generator().manual_seed(0)

    def make(a):
        if isinstance(a, tuple) and a[:1] == ("T",):
            _, shape, stride, dtype = a
            extent = 1 + sum((n - 1) * st for n, st in zip(shape, stride) if n > 0)
            storage = torch.randn(extent, generator=gen).to(dtype) if dtype.is_floating_point else \
                torch.zeros(extent, dtype=dtype)
            return storage.as_strided(shape, stride)
        return a

    return [make(a) for a in args]


class GemmReplay:
    """The GEMM and attention calls of one recorded pglab step, replayed alone: ``seconds()`` times them all."""

    def __init__(self, calls: Counter) -> None:
        self.calls = [(func, materialise(args), dict(kwargs), n) for (func, args, kwargs), n in calls.items()]
        self.count = sum(calls.values())

    def seconds(self) -> float:
        start = time.perf_counter()
        for func, args, kwargs, n in self.calls:
            for _ in range(n):
                func(*args, **kwargs)
        return time.perf_counter() - start


def record_gemms(session, step: int) -> GemmReplay:
    """Run pglab step ``step`` under the Recorder; its calls, ready to replay."""
    recorder = Recorder()
    with recorder:
        session.step(step)
    replay = GemmReplay(recorder.calls)
    replay.seconds()                                    # warm
    return replay


def speedups(session, size: Size, repeats: int) -> list[dict]:
    """Each speed-up against the plain way, alternating, on the session's model: median seconds of both."""
    from pglab.models import gpt2
    from pglab.models.hf import TanhGELU
    from pglab.sampling.replies import plain_sample_replies, sample_replies

    index = list(range(size.prompts))
    ids, mask = session.train_prompts.padded(index, session.pad)
    prompts = ids.repeat_interleave(GENERATIONS, 0)
    params = session.models.trainable()
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    fused = torch.optim.Adam(params, lr=0.0, fused=True)
    foreach = torch.optim.Adam(params, lr=0.0, foreach=True)
    model = session.models.model
    replies, _ = sample_replies(session.sampler, prompts, size.length, torch.Generator().manual_seed(0), session.eos,
                                group_size=GENERATIONS)
    prompt_length = prompts.shape[1]
    activations = torch.randn(replies.shape[0] * size.length, 4 * size.width, requires_grad=True)

    def backward(logits_or_output: torch.Tensor) -> None:
        logits_or_output.sum().backward()

    cases = {
        ("scoring", "scoring pass and its backward (GPT-2's blocks written out vs HF's forward; every row whole)"): (
            lambda g: backward(gpt2.reply_logits(model, replies, prompt_length)),
            lambda g: backward(model(input_ids=replies,
                                     logits_to_keep=replies.shape[1] - prompt_length + 1).logits[:, :-1])),
        ("gelu", "one tanh GELU and its backward on the MLP's activations (x sigmoid(2u) vs torch's tanh kernel)"): (
            lambda g: backward(TanhGELU()(activations)),
            lambda g: backward(torch.nn.functional.gelu(activations, approximate="tanh"))),
        ("sampling", "sampling (prefill once per group, shaping in the noise, no bookkeeping, end-of-text banned)"): (
            lambda g: sample_replies(session.sampler, prompts, size.length, g, session.eos, group_size=GENERATIONS),
            lambda g: plain_sample_replies(session.sampler, prompts, size.length, g, session.eos)),
        ("adam", "Adam step (fused vs foreach)"): (lambda g: fused.step(), lambda g: foreach.step()),
    }
    rows = []
    for (key, name), (fast, plain) in cases.items():
        times = {"fast": [], "plain": []}
        for r in range(repeats):
            for label, fn in (("fast", fast), ("plain", plain)):
                start = time.perf_counter()
                fn(torch.Generator().manual_seed(r))
                times[label].append(time.perf_counter() - start)
        fast_s, plain_s = statistics.median(times["fast"]), statistics.median(times["plain"])
        rows.append({"size": size.name, "key": key, "speed-up": name, "new_s": fast_s, "plain_s": plain_s,
                     "saved_s": plain_s - fast_s})
    for p in params:
        p.grad = None
    return rows


def paired_steps(folder: Path, size: Size, steps: int, out: Path) -> tuple[list[float], list[float], list[float],
                                                                         object, int]:
    """(TRL seconds, pglab seconds, GEMM-only seconds) of alternating steps, the pglab session and its GEMM count.

    The GEMM-only time is replayed after each pair, so it sees the same load as the steps it bounds.
    """
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from pglab.models.hf import fuse_activations

    tokenizer = AutoTokenizer.from_pretrained(folder)
    session = pglab_session(folder, size, steps, out, 0)
    session.step(10**6)                                   # warm
    replay = record_gemms(session, 10**6 + 1)
    theirs: list[float] = []
    ours: list[float] = []
    gemm: list[float] = []

    class Alternate(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            theirs.append(time.perf_counter() - self.start)
            start = time.perf_counter()
            session.step(len(ours))
            ours.append(time.perf_counter() - start)
            gemm.append(replay.seconds())

    def reward(prompts, completions, **kwargs):
        return vader_texts([p + c for p, c in zip(prompts, completions)])

    args = GRPOConfig(output_dir=str(out / "trl"), per_device_train_batch_size=size.prompts * GENERATIONS,
                      num_generations=GENERATIONS, max_completion_length=size.length, beta=BETA, learning_rate=1e-5,
                      loss_type="bnpo", scale_rewards="group", temperature=1.0, top_k=0, top_p=1.0, max_steps=steps,
                      use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=10**6,
                      disable_dropout=True, seed=0, dataloader_num_workers=0, gradient_checkpointing=False,
                      generation_kwargs={"suppress_tokens": [tokenizer.eos_token_id]})
    model = fuse_activations(AutoModelForCausalLM.from_pretrained(folder))
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts(8 * size.prompts * steps)}),
                          processing_class=tokenizer, callbacks=[Alternate()])
    trainer.train()
    return theirs, ours, gemm, session, replay.count


def trl_missing(result: Result) -> bool:
    """True, with a failed check and a line in the summary, when TRL cannot be imported (no ratio without it)."""
    if importlib.util.find_spec("trl") is not None:
        return False
    result.summary += " TRL is not installed (pip install 'pglab[bench]'), so there is no ratio."
    result.check("TRL is installed for the comparison", 0.0, False, "trl importable",
                 "the ratio needs both sides measured in the same run")
    return True


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


def run(quick: bool = False, size: str = "both") -> Result:
    """Paired per-step ratios pglab / TRL and pglab / GEMM-only at each size."""
    if size not in (*SIZES, "both"):
        raise ValueError(f"unknown --size {size!r}; pass small, large or both")
    names = list(SIZES) if size == "both" else [size]
    warmup = 1 if quick else WARMUP
    result = Result("bench-lm-vs-trl", {"generations": GENERATIONS, "prompt_tokens": PROMPT_BYTES, "beta": BETA,
                                        "pairs": {n: 3 if quick else SIZES[n].pairs for n in names},
                                        "warmup_pairs_dropped": warmup, "sizes": names,
                                        "threads": torch.get_num_threads()},
                    summary=("One RL step (sample replies, reward, reference pass, loss, Adam) of pglab train-lm and "
                             "of TRL's GRPOTrainer (gradient checkpointing off, the same tanh GELU) on the same "
                             "random GPT-2, alternating step by step, and pglab's step against its GEMM-only time."))
    if trl_missing(result):
        return result
    import trl
    rows: list[dict] = []
    speed: list[dict] = []
    for name in names:
        spec = SIZES[name]
        steps = warmup + (3 if quick else spec.pairs)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "model"
            save_random_gpt2(folder, vocab=257, layers=spec.layers, width=spec.width, heads=4,
                             positions=PROMPT_BYTES + spec.length)
            theirs, ours, gemms, session, calls = paired_steps(folder, spec, steps, Path(tmp))
            speed += speedups(session, spec, 3 if quick else 10)
        theirs, ours, gemms = theirs[warmup:], ours[warmup:], gemms[warmup:]
        ratios = [p / t for p, t in zip(ours, theirs)]
        q1, ratio, q3 = quartiles(ratios)
        b1, bound, b3 = quartiles([p / g for p, g in zip(ours, gemms)])
        trl_bound = statistics.median([t / g for t, g in zip(theirs, gemms)])
        pglab_s, trl_s, gemm = statistics.median(ours), statistics.median(theirs), statistics.median(gemms)
        rows.append({"size": name, "layers x width": f"{spec.layers} x {spec.width}",
                     "batch": f"{spec.prompts} x {GENERATIONS} x {spec.length}", "pglab_median_s": pglab_s,
                     "trl_median_s": trl_s, "ratio_median": ratio, "ratio_q1": q1, "ratio_q3": q3,
                     "gemm_only_s": gemm, "gemm_calls": calls, "pglab/GEMM": bound, "bound_q1": b1, "bound_q3": b3,
                     "TRL/GEMM": trl_bound, "pairs": len(ratios)})
        result.metrics.update({f"{name}: ratio = pglab/TRL": ratio, f"{name}: ratio IQR": q3 - q1,
                               f"{name}: ratio q1": q1, f"{name}: ratio q3": q3,
                               f"{name}: bound = pglab/GEMM": bound, f"{name}: bound q1": b1, f"{name}: bound q3": b3,
                               f"{name}: TRL/GEMM": trl_bound, f"{name}: pglab s/step": pglab_s,
                               f"{name}: TRL s/step": trl_s, f"{name}: GEMM-only s/step": gemm})
    result.tables["step_seconds"] = rows
    for row in speed:
        step = next(r["pglab_median_s"] for r in rows if r["size"] == row["size"])
        row["saved_share_of_step"] = row["saved_s"] / (step + row["saved_s"])
        for column in ("new_s", "plain_s", "saved_share_of_step"):
            result.metrics[f"{row['size']}: {row['key']} {column}"] = row[column]
    result.tables["speedups"] = speed
    result.summary += f" TRL {trl.__version__}."
    targets = {"small": {"ratio": 0.6}, "large": {"ratio": 0.85, "bound": 1.2}}
    for row in rows:
        target = targets[row["size"]]
        result.check_range(f"{row['size']}: ratio = pglab / TRL (median of paired steps)", row["ratio_median"],
                           high=target["ratio"], tolerance=f"IQR {row['ratio_q1']:.3f}-{row['ratio_q3']:.3f} over "
                           f"{row['pairs']} alternating pairs")
        if "bound" in target:
            result.check_range(f"{row['size']}: bound = pglab / GEMM-only", row["pglab/GEMM"], high=target["bound"],
                               tolerance=f"IQR {row['bound_q1']:.3f}-{row['bound_q3']:.3f}: the step's GEMMs replayed "
                               "alone after each pair")
    last = rows[-1]
    result.metrics["ratio = pglab/TRL"] = last["ratio_median"]
    result.metrics["bound = pglab/GEMM"] = last["pglab/GEMM"]
    return result
