"""The device check of train-agent and train-lm on CUDA: 20 steps each, steps per second and peak memory.

Run on a machine with a GPU (it refuses to start without one), from the repository root:

    python scripts/gpu_check.py OUT_DIR

1. ``pglab train-agent --device cuda`` for 20 steps with a random-weight GPT-2 of GPT-2 small's
   shape (12 layers, 768 wide, 12 heads; the embedded agent's BPE of 512 ids) in BugFixEnv;
2. ``pglab train-lm --device cuda`` for 20 steps on the embedded default (quick size).

Writes OUT_DIR/gpu_check.json: per run the wall seconds, steps per second, peak CUDA memory and the
error line if it failed. Nothing in the test suite depends on it.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import torch


def timed(name: str, steps: int, run) -> dict:
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    try:
        run()
        error = None
    except Exception as err:  # noqa: BLE001 - the report names whatever broke
        error = f"{type(err).__name__}: {err}".splitlines()[0]
        traceback.print_exc()
    seconds = time.perf_counter() - start
    return {"run": name, "steps": steps, "seconds": seconds, "steps_per_second": steps / seconds,
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30, "error": error}


def main(out: Path) -> None:
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from pglab.cli import main as pglab
    from pglab.trainers.hf_agent import ensure_default_agent

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this check runs only where a GPU is lent")
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(ensure_default_agent("quick", progress=False))
    eos = tokenizer.eos_token_id
    folder = out / "gpt2-small-shape"
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                               bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    runs = [
        timed("train-agent, GPT-2 small shape, BugFixEnv", 20, lambda: pglab(
            ["train-agent", "--model", str(folder), "--device", "cuda", "--steps", "20", "--episodes-per-step", "32",
             "--eval-every", "20", "--eval-per-task", "1", "--out", str(out / "agent")])),
        timed("train-lm, embedded default (quick)", 20, lambda: pglab(
            ["train-lm", "--device", "cuda", "--default-size", "quick", "--max-steps", "20",
             "--output-dir", str(out / "lm")])),
    ]
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "runs": runs}
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "gpu-check"))
