"""Trainer level (TRL): a real GRPOTrainer's gradient, per optimizer step, against the normalisation it documents.

The trainer runs on a tiny random GPT-2 saved to a temporary folder (no download), its completions fixed
through its ``rollout_func`` seam to an enumerable batch: fixed prompts, distinct fixed completions of one
length ending in end-of-text, fixed rewards. ``learning_rate`` is 0 (and clipping off), so every micro-batch
sees the same parameters, pi = pi_old = pi_ref, and each optimizer step's gradient is read before the step.
pglab computes, in float64 on the same weights and the same rows of that step, the gradient of the
documented loss (pglab.audit.peers.trl's ``policy_term`` and ``kl_term`` of ``loss_type``, aggregated by
pglab.estimators.aggregate_loss over the step's whole global batch, with pglab's group advantages of each
generation). The factor is <g, r> / <r, r> for TRL's gradient g and pglab's r; the direction residual is
|g - factor r| / |r|. Both must be within the float32 tolerance (``tolerance``).

The user's config is kept; only what the measurement needs is overridden (MEASUREMENT), and each check varies
per_device_train_batch_size, gradient_accumulation_steps, steps_per_generation, num_iterations, the sample
order or the number of processes from it.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import pickle
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pglab.audit.peers.trl import TRL_MODES, TrlConfig, kl_term, policy_term
from pglab.conform.checks import Check
from pglab.estimators import advantages, aggregate_loss
from pglab.runtime.progress import track
from pglab.sampling.scoring import token_log_probs

VOCAB, WIDTH, LAYERS, HEADS = 48, 16, 2, 2
"""The tiny random GPT-2: word-level vocabulary, embedding width, blocks, attention heads."""
PROMPT_TOKENS, COMPLETION_TOKENS = 3, 4
"""Every prompt and every completion has exactly this many tokens (the completion's last is end-of-text)."""
MEASUREMENT = {"learning_rate": 0.0, "max_grad_norm": 0.0, "use_cpu": True, "report_to": "none",
               "save_strategy": "no", "logging_strategy": "no", "bf16": False, "fp16": False,
               "gradient_checkpointing": False, "use_vllm": False, "disable_tqdm": True, "dataloader_num_workers": 0,
               "top_entropy_quantile": 1.0, "off_policy_mask_threshold": None, "entropy_coef": 0.0,
               "use_adaptive_entropy": False, "reward_weights": None, "use_liger_kernel": False,
               "multi_objective_aggregation": "sum_then_normalize", "hub_token": None, "push_to_hub": False,
               "generation_batch_size": None, "mask_truncated_completions": False}
"""GRPOConfig fields set for the measurement: parameters frozen (lr 0) so every micro-batch sees one policy, no
clipping (it rescales), no entropy bonus or mask, one reward; the fields a config may lack are skipped."""
DOCUMENTED = {"grpo": "mean over replies of each reply's token mean", "sapo": "mean over replies of each reply's "
              "token mean", "bnpo": "token mean of each micro-batch", "dr_grpo": "token sum over replies x "
              "max_completion_length", "dapo": "token mean", "cispo": "token mean", "vespo": "token mean",
              "luspo": "mean over replies of each reply's token sum"}
"""What each loss_type documents as its normalisation over one optimizer step's (global, accumulated) batch."""


@dataclass(frozen=True)
class Setting:
    """One way to run the same global batch through the trainer."""

    name: str
    """The check's name, e.g. 'gradient_accumulation_steps 2, steps_per_generation 4'."""
    per_device: int
    """per_device_train_batch_size (the micro-batch)."""
    accumulation: int
    """gradient_accumulation_steps."""
    steps_per_generation: int
    """steps_per_generation."""
    iterations: int = 1
    """num_iterations (generation reuse)."""
    processes: int = 1
    """Processes (2: torchrun with gloo on the CPU)."""
    permuted: bool = False
    """Prompts and each group's completions in a permuted order, and another shuffle seed."""

    def schedule(self, group_size: int) -> tuple[int, int, int]:
        """(prompts per generation, generations run, optimizer steps run): whole steps over whole generations."""
        per_generation = self.per_device * self.processes * self.steps_per_generation
        if per_generation % group_size:
            raise ValueError(f"{self.name}: a generation of {per_generation} rows is not whole groups of "
                             f"{group_size}; pick per_device_train_batch_size a multiple of num_generations")
        micro = math.lcm(self.accumulation, self.steps_per_generation * self.iterations)
        return per_generation // group_size, micro // (self.steps_per_generation * self.iterations), \
            micro // self.accumulation


@dataclass(frozen=True)
class Batch:
    """The enumerable batch the rollout function returns: prompts, their completions, their rewards."""

    prompt_ids: torch.Tensor
    """[P, PROMPT_TOKENS] token ids of each prompt."""
    completion_ids: torch.Tensor
    """[P * G, COMPLETION_TOKENS] distinct completions, G consecutive rows per prompt, each ending in end-of-text."""
    rewards: torch.Tensor
    """[P * G] float64 rewards (distinct within each group, so no advantage is 0)."""
    group_size: int
    """G = num_generations."""

    def row_of(self) -> dict[tuple[int, ...], int]:
        """Completion tokens -> row (the completions are distinct, so a micro-batch's rows are known)."""
        return {tuple(ids): row for row, ids in enumerate(self.completion_ids.tolist())}


def enumerable_batch(prompts: int, group_size: int, seed: int = 0) -> Batch:
    """``prompts`` prompts x ``group_size`` distinct completions with N(0, 1) rewards, drawn with ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    eos = VOCAB - 1
    prompt_ids = torch.randint(0, eos, (prompts, PROMPT_TOKENS), generator=gen)
    rows = prompts * group_size
    codes = torch.randperm((eos) ** (COMPLETION_TOKENS - 1), generator=gen)[:rows]
    digits = [(codes // eos ** k) % eos for k in range(COMPLETION_TOKENS - 1)]
    completion_ids = torch.stack([*digits, torch.full_like(codes, eos)], dim=1)
    rewards = torch.randn(rows, generator=gen, dtype=torch.float64)
    return Batch(prompt_ids, completion_ids, rewards, group_size)


def permuted(batch: Batch, seed: int) -> Batch:
    """The same batch with its prompts, and each group's completions, in a random order."""
    gen = torch.Generator().manual_seed(seed)
    prompts, size = batch.prompt_ids.shape[0], batch.group_size
    order = torch.randperm(prompts, generator=gen)
    rows = torch.cat([int(p) * size + torch.randperm(size, generator=gen) for p in order])
    return Batch(batch.prompt_ids[order], batch.completion_ids[rows], batch.rewards[rows], size)


def save_tiny_model(folder: Path, seed: int = 0) -> None:
    """A random GPT-2 (VOCAB ids, the last end-of-text) and a word-level tokenizer 't0'..., saved to ``folder``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(VOCAB - 1)} | {"<eos>": VOCAB - 1}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<eos>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", pad_token="<eos>").save_pretrained(folder)
    torch.manual_seed(seed)
    GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=PROMPT_TOKENS + COMPLETION_TOKENS, n_embd=WIDTH,
                               n_layer=LAYERS, n_head=HEADS, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                               bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1,
                               pad_token_id=VOCAB - 1)).save_pretrained(folder)


def prompt_text(ids: list[int]) -> str:
    return " ".join(f"t{i}" for i in ids)


def global_rows(batch: Batch, prompts: list[int], trainer, generations: list[list[int]]) -> list[int]:
    """This process's rows for its ``prompts`` (prompt indices): each prompt's k-th copy in the global generation
    batch gets the prompt's k-th completion.

    Copies are numbered over all processes (the prompts are gathered in rank order, as TRL gathers rewards);
    each call appends the generation's global rows to ``generations``.
    """
    from accelerate.utils import gather_object

    seen: dict[int, int] = {}
    rows = []
    for p in gather_object(list(prompts)):
        rows.append(p * batch.group_size + seen.get(p, 0))
        seen[p] = seen.get(p, 0) + 1
    generations.append(rows)
    start = trainer.accelerator.process_index * len(prompts)
    return rows[start:start + len(prompts)]


def rollout(batch: Batch, generations: list[list[int]]):
    """TRL's rollout_func (the seam of releases whose GRPOTrainer takes one): the completions by global_rows."""
    index = {prompt_text(ids): p for p, ids in enumerate(batch.prompt_ids.tolist())}

    def rollout_func(prompts: list[str], trainer) -> dict[str, Any]:
        mine = global_rows(batch, [index[text] for text in prompts], trainer, generations)
        return {"prompt_ids": [batch.prompt_ids[r // batch.group_size].tolist() for r in mine],
                "completion_ids": [batch.completion_ids[r].tolist() for r in mine], "logprobs": None}

    return rollout_func


def generation_override(trainer_class: type, batch: Batch, generations: list[list[int]]) -> type:
    """``trainer_class`` with ``_generate_single_turn`` returning the batch's completions (by global_rows): the
    seam of releases whose GRPOTrainer takes no rollout_func.

    The method's signature and result differ between releases; what they share is read from the call: the first
    argument is the prompts (text, then the result starts with their token ids, or token ids, then the result
    starts with the completions). The model still generates (COMPLETION_TOKENS tokens, so that its positions
    fit the tiny model's), and its completions are replaced; token log-probs from a generation server would not
    match them, so they are refused.
    """
    by_text = {prompt_text(ids): p for p, ids in enumerate(batch.prompt_ids.tolist())}
    by_ids = {tuple(ids): p for p, ids in enumerate(batch.prompt_ids.tolist())}

    class FixedCompletions(trainer_class):
        def _generate_single_turn(self, prompts, *args, **kwargs):
            self.generation_config.max_new_tokens = COMPLETION_TOKENS
            result = list(super()._generate_single_turn(prompts, *args, **kwargs))
            text = isinstance(prompts[0], str)
            mine = global_rows(batch, [by_text[p] if text else by_ids[tuple(p)] for p in prompts], self, generations)
            at = 1 if text else 0
            if result[at + 1] is not None:
                raise ValueError("the trainer returned generation log-probs (use_vllm?): set use_vllm false")
            result[at] = [batch.completion_ids[r].tolist() for r in mine]
            return tuple(result)

    return FixedCompletions


def completion_seam(trainer_class: type) -> str:
    """'rollout_func' when the trainer takes one, else 'generate' when it has ``_generate_single_turn``."""
    import inspect

    if "rollout_func" in inspect.signature(trainer_class.__init__).parameters:
        return "rollout_func"
    if hasattr(trainer_class, "_generate_single_turn"):
        return "generate"
    raise ValueError(f"{trainer_class.__qualname__} takes no rollout_func and has no _generate_single_turn: no "
                     "seam fixes its completions; install a TRL release that has one (0.24 or later)")


def measured_fields(config, setting: Setting, output_dir: str, group_size: int) -> dict[str, Any]:
    """The user's config fields with MEASUREMENT and the setting's batch layout (for a fresh instance of its class:
    built in the process that trains, since GRPOConfig checks the layout against that process's world size)."""
    init = {f.name for f in dataclasses.fields(config) if f.init}
    fields = {k: v for k, v in config.to_dict().items() if k in init}
    steps = setting.schedule(group_size)[2]
    changes = {**{k: v for k, v in MEASUREMENT.items() if k in init}, "output_dir": output_dir, "max_steps": steps,
               "per_device_train_batch_size": setting.per_device, "steps_per_generation": setting.steps_per_generation,
               "gradient_accumulation_steps": setting.accumulation, "num_iterations": setting.iterations}
    if setting.permuted:
        changes["seed"] = fields.get("seed", 0) + 1
    return fields | changes


def recording(trainer_class: type) -> type:
    """``trainer_class`` with each micro-batch's completions recorded under the optimizer step it feeds."""

    class Recorded(trainer_class):
        def _compute_loss(self, model, inputs):
            self.micro_batches.append((self.state.global_step, inputs["completion_ids"].tolist()))
            return super()._compute_loss(model, inputs)

    return Recorded


def run_trainer(config, batch: Batch, folder: Path, trainer_class: type) -> dict:
    """Train ``max_steps`` steps; per process: {'steps': [[row, ...] per optimizer step], 'grads': [{name: [..]}],
    'generations': [[global rows] per generation]} (grads are the globally reduced ones)."""
    from datasets import Dataset
    from transformers import AutoTokenizer, PrinterCallback, TrainerCallback

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    generations: list[list[int]] = []
    grads: list[dict[str, torch.Tensor]] = []
    prompts = [prompt_text(ids) for ids in batch.prompt_ids.tolist()]
    rows = batch.row_of()
    seam = completion_seam(trainer_class)
    fixed = {"rollout_func": rollout(batch, generations)} if seam == "rollout_func" else {}
    cls = trainer_class if fixed else generation_override(trainer_class, batch, generations)
    trainer = recording(cls)(
        model=str(folder), args=config, train_dataset=Dataset.from_dict({"prompt": prompts}),
        reward_funcs=lambda completions, completion_ids, **kw: [float(batch.rewards[rows[tuple(c)]])
                                                                for c in completion_ids],
        processing_class=AutoTokenizer.from_pretrained(folder), **fixed)
    trainer.micro_batches = []

    class Capture(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            model = trainer.accelerator.unwrap_model(trainer.model)
            grads.append({n: p.grad.detach().double().clone() for n, p in model.named_parameters()
                          if p.grad is not None})

    trainer.add_callback(Capture())
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    if not generations:
        raise ValueError(f"{trainer_class.__qualname__} never called its {seam} seam (a release that calls "
                         "rollout_func only with vLLM?): its completions are not the enumerable batch")
    steps: list[list[int]] = [[] for _ in grads]
    for step, completions in trainer.micro_batches:
        steps[step].extend(rows[tuple(ids)] for ids in completions)
    return {"steps": steps, "grads": grads, "generations": generations}


def reference_gradient(config, batch: Batch, folder: Path, rows: list[int], adv: torch.Tensor) -> dict:
    """pglab's float64 gradient of the documented loss over ``rows`` (one optimizer step's global batch)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder).double()
    index = torch.tensor(rows)
    completion = batch.completion_ids[index]
    ids = torch.cat([batch.prompt_ids[index // batch.group_size], completion], dim=1)
    logits = model(input_ids=ids).logits[:, PROMPT_TOKENS - 1:-1] / config.temperature
    logp = token_log_probs(logits, ids, start=PROMPT_TOKENS)[:, PROMPT_TOKENS:]
    mask = torch.ones_like(logp)
    cfg = TrlConfig(loss_type=config.loss_type, epsilon=config.epsilon, epsilon_high=config.epsilon_high,
                    importance_sampling_level=config.importance_sampling_level,
                    use_bias_correction_kl=getattr(config, "use_bias_correction_kl", True))
    old = logp.detach()
    per_token = policy_term(cfg, logp, old, adv[index], mask, None)
    if config.beta:
        per_token = per_token + config.beta * kl_term(cfg, logp, old, old, mask)
    const = float(len(rows) * config.max_completion_length)
    aggregate_loss(per_token, mask, TRL_MODES[config.loss_type], const).backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def generation_advantages(config, batch: Batch, generations: list[list[int]]) -> torch.Tensor:
    """pglab's GRPO advantages [P * G] of every row, each generation normalised as TRL's scale_rewards says."""
    scale = {True: "group", False: "none"}.get(config.scale_rewards, config.scale_rewards)
    adv = torch.zeros_like(batch.rewards)
    for rows in generations:
        index = torch.tensor(rows)
        adv[index] = advantages(batch.rewards[index], "grpo", batch.group_size, scale=scale, unbiased=True,
                                eps=1e-4)
    return adv


def tolerance(rows: int) -> float:
    """Relative float32 roundoff allowed in one step's gradient: (LAYERS + 2) gamma_n, n the longest reduction.

    gamma_n = n u / (1 - n u) bounds a float32 sum of n terms (u = 2^-24); the longest sum in the gradient is
    over the step's rows x positions, the vocabulary or the MLP width, and each block (and the embedding and
    the head) adds its own to first order.
    """
    n = max(rows * (PROMPT_TOKENS + COMPLETION_TOKENS), VOCAB, 4 * WIDTH)
    u = 2.0 ** -24
    return (LAYERS + 2) * n * u / (1 - n * u)


def step_factor(grad: dict, ref: dict) -> tuple[float, float]:
    """(factor <g, r> / <r, r>, residual |g - factor r| / |r|) of TRL's gradient g against pglab's r."""
    if set(grad) != set(ref):
        raise ValueError(f"the trainer's parameters {sorted(set(grad) ^ set(ref))} are not the reference's")
    g = torch.cat([grad[n].flatten() for n in sorted(ref)])
    r = torch.cat([ref[n].flatten() for n in sorted(ref)])
    factor = float(g @ r / (r @ r))
    return factor, float((g - factor * r).norm() / r.norm())


def measure(config, setting: Setting, trainer_class: type | str, seed: int = 0) -> Check:
    """Run ``setting`` from the user's ``config`` and return its Check (the step furthest from factor 1)."""
    return measure_each(config, setting, [trainer_class], seed)[0]


def measure_each(config, setting: Setting, trainer_classes: list[type | str], seed: int = 0) -> list[Check]:
    """measure for each trainer class, on one batch and one tiny model (with 2 processes: one torchrun launch)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 16-wide model: more threads only contend (10x slower on 2 loaded cores)
    gc.freeze()  # accelerate's gc.collect() at each train() walked the whole imported heap: half of a measurement
    try:
        return measured(config, setting, trainer_classes, seed)
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads)


def measured(config, setting: Setting, trainer_classes: list[type | str], seed: int) -> list[Check]:
    """measure_each's work, at whatever thread count is set."""
    from trl import GRPOConfig

    if not isinstance(config, GRPOConfig):
        raise ValueError(f"{setting.name}: pass a GRPOConfig, not a {type(config).__name__}")
    prompts_per_generation, generations, _ = setting.schedule(config.num_generations)
    batch = enumerable_batch(prompts_per_generation * generations, config.num_generations, seed)
    batch = permuted(batch, seed + 1) if setting.permuted else batch
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        save_tiny_model(folder, seed)
        fields = measured_fields(config, setting, str(Path(tmp) / "out"), config.num_generations)
        if setting.processes > 1:
            runs = run_distributed(fields, batch, folder, trainer_classes, setting.processes, Path(tmp))
        else:
            runs = [run_trainer(type(config)(**fields), batch, folder, load_class(cls)) for cls in trainer_classes]
        return [setting_check(config, setting, batch, folder, run) for run in runs]


def setting_check(config, setting: Setting, batch: Batch, folder: Path, run: dict) -> Check:
    """One run's Check: each optimizer step's gradient against pglab's, the step furthest from factor 1."""
    adv = generation_advantages(config, batch, run["generations"])
    results = [step_factor(grads, reference_gradient(config, batch, folder, rows, adv))
               for grads, rows in zip(run["grads"], run["steps"])]
    if not results:
        raise ValueError(f"{setting.name}: the trainer took no optimizer step; check max_steps and the batch layout")
    factor, residual = max(results, key=lambda fr: abs(fr[0] - 1.0))
    worst = max(residual for _, residual in results)
    tol = tolerance(setting.per_device * setting.processes * setting.accumulation)
    ok = abs(factor - 1.0) <= tol and worst <= tol
    detail = (f"{factor:.3f} of the {DOCUMENTED[config.loss_type]} (step furthest from 1 of {len(results)}; "
              f"direction residual {worst:.1e}; float32 tolerance {tol:.1e})")
    return Check(setting.name, "pass" if ok else "fail", factor, detail)


def settings(config, distributed: bool) -> list[Setting]:
    """The settings varied from the user's config: as configured, then each invariance on its own."""
    mb, ga = config.per_device_train_batch_size, config.gradient_accumulation_steps
    spg, it = config.steps_per_generation, config.num_iterations

    def name(*changed: tuple[str, int]) -> str:
        return ", ".join(f"{key} {value}" for key, value in changed)

    keys = ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation", "num_iterations")
    out = [Setting("as configured: " + name(*zip(keys, (mb, ga, spg, it))), mb, ga, spg, it),
           Setting(name((keys[1], 2 * ga), (keys[2], 2 * spg)), mb, 2 * ga, 2 * spg, it),
           Setting(name((keys[1], ga), (keys[2], 2 * spg)), mb, ga, 2 * spg, it),
           Setting(name((keys[1], 2 * ga), (keys[2], spg)), mb, 2 * ga, spg, it),
           Setting(name((keys[3], it + 1)) + " (generation reuse)", mb, ga, spg, it + 1),
           Setting("sample order: prompts and completions permuted, another shuffle seed", mb, ga, spg, it,
                   permuted=True)]
    if mb % 2 == 0 and (mb // 2 * spg * 2) % config.num_generations == 0:
        out.append(Setting(name((keys[0], mb // 2), (keys[1], 2 * ga), (keys[2], 2 * spg)) + " (micro-batch)",
                           mb // 2, 2 * ga, 2 * spg, it))
    if distributed and mb % 2 == 0 and (mb * spg) % config.num_generations == 0:
        out.append(Setting(name((keys[0], mb // 2)) + ", 2 processes (gloo)", mb // 2, ga, spg, it, processes=2))
    return out


def trainer_checks(config, *, trainer_class: type | str | None = None, distributed: bool = False,
                   seed: int = 0) -> list[Check]:
    """TRL's GRPOTrainer on ``config`` (a GRPOConfig) under each Setting of ``settings``: one Check each.

    ``trainer_class`` (a class or 'module:qualname'; default trl.GRPOTrainer) is what runs; ``distributed`` adds
    the two-process check (torchrun, gloo, a few seconds more).
    """
    if config.loss_type not in DOCUMENTED:
        raise ValueError(f"loss_type {config.loss_type!r} has no documented normalisation here; pass one of "
                         f"{', '.join(DOCUMENTED)}")
    cls = trainer_class or "trl:GRPOTrainer"
    runs = settings(config, distributed)
    return [measure(config, setting, cls, seed) for setting in track(runs, "trl trainer checks", len(runs))]


def load_class(spec: type | str) -> type:
    """A class, or 'module:qualname' imported."""
    if isinstance(spec, type):
        return spec
    module, _, name = spec.partition(":")
    import importlib

    return getattr(importlib.import_module(module), name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_distributed(fields: dict[str, Any], batch: Batch, folder: Path, trainer_classes: list[type | str],
                    processes: int, tmp: Path) -> list[dict]:
    """run_trainer for each class, in turn, under one torchrun with ``processes`` CPU processes (gloo); per class:
    steps merged over ranks, rank 0's grads."""
    names = [f"{c.__module__}:{c.__qualname__}" if isinstance(c, type) else c for c in trainer_classes]
    spec = tmp / "spec.pt"
    spec.write_bytes(pickle.dumps({"config": fields, "classes": names, "batch": dataclasses.asdict(batch),
                                   "folder": str(folder)}))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
           f"--master_port={free_port()}", "-m", "pglab.conform.trl_trainer", str(spec)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # the ranks import what this process imports
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the {processes}-process run failed: {done.stderr.strip()[-2000:]}")
    ranks = [pickle.loads((tmp / f"rank{r}.pt").read_bytes()) for r in range(processes)]
    return [{"steps": [sum((rank[c]["steps"][k] for rank in ranks), []) for k in range(len(ranks[0][c]["steps"]))],
             "grads": ranks[0][c]["grads"], "generations": ranks[0][c]["generations"]} for c in range(len(names))]


def main(spec_path: str) -> None:
    """One rank of run_distributed: the spec's runs, one per class, saved beside the spec as rank{RANK}.pt."""
    from trl import GRPOConfig

    spec = pickle.loads(Path(spec_path).read_bytes())  # written by run_distributed into its own temporary folder
    gc.freeze()  # as in measure_each: accelerate's gc.collect() at each train() then skips the imported heap
    runs = [run_trainer(GRPOConfig(**spec["config"]), Batch(**spec["batch"]), Path(spec["folder"]), load_class(name))
            for name in spec["classes"]]
    (Path(spec_path).parent / f"rank{os.environ.get('RANK', '0')}.pt").write_bytes(pickle.dumps(runs))


if __name__ == "__main__":
    main(sys.argv[1])
