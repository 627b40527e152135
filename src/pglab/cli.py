"""pglab <command>: thin entry points that parse one settings dataclass, call one function, and print.

Every command's options come from its settings classes through :mod:`pglab.runtime.options`, so
the same setting has the same flag everywhere (``--out``, ``--steps``, ``--seed``, ``--resume [DIR]``,
``--device``). :func:`main` prints a :class:`~pglab.runtime.options.SettingsError` as one line with
exit status 2: the settings check themselves when they are made, before any work, and during the
work only the checks of what the user's own code returns (an environment's step, a reward, a loss)
raise it. Ctrl-C prints one line that says what is on disk and how to continue (exit status 130).
Any other exception is a bug in pglab and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pglab.reporting.report import print_result, write_index, write_report
from pglab.reporting.result import Result
from pglab.runtime.options import Parser, RunOptions, SettingsError, add_options, as_options, check_folder, settings

DEFAULT_OUT = Path("runs")


class Interrupted(Exception):
    """Ctrl-C during a run; the message says what is on disk and how to continue."""


def on_disk(folder: Path, resume: str) -> str:
    """What a stopped run left in ``folder`` (its JSON-lines logs, its checkpoint), and how to continue it."""
    from pglab.trainers.loop import RunDir

    if not folder.is_dir():
        return "nothing was written"
    logs = [f"{p.name} ({len(p.read_text().splitlines())} lines)" for p in sorted(folder.glob("*.jsonl"))]
    step = RunDir(folder, writer=False).checkpoint_step()
    if step is not None:
        beside = f" beside {', '.join(logs)}" if logs else ""
        return f"checkpoint after step {step} in {folder}{beside}; continue with {resume}"
    if logs:
        return f"{folder} holds {', '.join(logs)} but no checkpoint, so there is nothing to resume; run again to start"
    return "nothing was written"


def run_or_stop(work: Callable[[], Any], folder: Path, resume: list[str]) -> Any:
    """``work()``; on Ctrl-C, Interrupted saying what ``folder`` holds and the ``resume`` command."""
    try:
        return work()
    except KeyboardInterrupt:
        raise Interrupted(on_disk(folder, shlex.join(resume))) from None


def overrides_for(exp, args: argparse.Namespace, sets: dict[str, str]) -> dict[str, Any]:
    """Config overrides from --set, --seeds, --first-seed and --backend; with --all, only where the field exists."""
    fields = exp.fields()
    overrides = {key: exp.parse(key, text) for key, text in sets.items() if key in fields or not args.all}
    for key in ("seeds", "first_seed", "backend"):
        value = getattr(args, key)
        if value is None or (args.all and key not in fields):
            continue
        if key not in fields:
            flag = "--" + key.replace("_", "-")
            raise SettingsError(f"experiment {exp.name!r} takes no {flag}; its settings: {', '.join(fields)}")
        overrides[key] = value
    return overrides


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """--set KEY=VALUE items -> {key: raw text}."""
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"--set takes KEY=VALUE, got {item!r}; e.g. --set samples=1000")
        pairs[key.strip()] = value
    return pairs


def reproduce_parser() -> Parser:
    rep = Parser(prog="pglab reproduce", description="reproduce a book chapter's experiment")
    rep.add_argument("name", nargs="?", help="experiment name (see --list)")
    rep.add_argument("--list", action="store_true", help="list the experiments")
    rep.add_argument("--all", action="store_true", help="run every experiment and write index.html")
    rep.add_argument("--seeds", type=int, help="number of seeds (experiments that take seeds)")
    rep.add_argument("--first-seed", type=int, help="first RNG seed (default 0): --first-seed 20 --seeds 20 runs "
                     "seeds 20-39")
    rep.add_argument("--backend", choices=["serial", "process", "ray"], help="seed runner backend")
    rep.add_argument("--out", help="output folder (default: runs/NAME; with --all, the root)")
    rep.add_argument("--quick", action="store_true", help="reduced size, a smoke run: exit status 0 whenever it ran, "
                     "and the claims that need the full size reported as not evaluated")
    rep.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    return rep


def cmd_reproduce(args: argparse.Namespace) -> int:
    from pglab.experiments import experiment_names, get_experiment

    if args.list:
        for name in experiment_names():
            print(f"{name:<24} {get_experiment(name).summary}")
        return 0
    if args.all == bool(args.name):
        raise SettingsError("name one experiment, or pass --all (or --list); see pglab reproduce --help")
    names = experiment_names() if args.all else [args.name]
    out_root = Path(args.out) if args.out else DEFAULT_OUT
    check_folder(out_root)
    sets = parse_sets(args.set)
    if args.all:
        unused = sorted(set(sets) - {k for n in names for k in get_experiment(n).fields()})
        if unused:
            raise SettingsError(f"no experiment has the setting(s) {unused}; each report's Configuration table "
                                "lists its settings")
    # Every experiment's settings are checked before the first one runs.
    plans = []
    for name in names:
        exp = get_experiment(name)
        overrides = overrides_for(exp, args, sets)
        exp.config(quick=args.quick, **overrides)
        plans.append((exp, overrides))
    command = " ".join(["pglab", *sys.argv[1:]]) if sys.argv and sys.argv[0].endswith("pglab") else None
    entries = []
    for exp, overrides in plans:
        print(f"{exp.name}: running{' at quick size' if args.quick else ''}", flush=True)
        start = time.perf_counter()
        result = exp.run(quick=args.quick, command=command, **overrides)
        folder = out_root / exp.name if (args.all or not args.out) else out_root
        written = write_report(result, folder)
        print(f"== {exp.name}: {time.perf_counter() - start:.1f} s")
        print_result(result, folder, written)
        entries.append((result, folder))
    if args.all:
        print(f"index: {write_index(entries, out_root)}")
    return 0 if args.quick or all(result.passed for result, _ in entries) else 1


def bench_parser() -> Parser:
    bench = Parser(prog="pglab bench", description="speed benchmarks, as ratios against a reference measured in "
                   "the same run")
    bench.add_argument("name", nargs="?", help="the benchmark (see --list)")
    bench.add_argument("--list", action="store_true", help="list the benchmarks")
    bench.add_argument("--all", action="store_true", help="run every benchmark")
    bench.add_argument("--quick", action="store_true", help="reduced size")
    bench.add_argument("--out", help="output folder root (default runs/; each benchmark writes bench-NAME/)")
    bench.add_argument("--size", choices=["small", "large", "both"], help="lm-vs-trl only: the model size(s) "
                       "(default both)")
    return bench


def cmd_bench(args: argparse.Namespace) -> int:
    from pglab.bench import BENCHMARKS, check_options, run_benchmark, takes

    if args.list:
        if args.name or args.all:
            raise SettingsError("--list lists every benchmark: drop the name (and --all)")
        for name, summary in BENCHMARKS.items():
            print(f"{name:<12} {summary}")
        return 0
    if args.all == bool(args.name):
        raise SettingsError("name one benchmark, or pass --all (or --list); see pglab bench --help")
    names = list(BENCHMARKS) if args.all else [args.name]
    options = {"size": args.size} if args.size else {}
    if not args.all:
        check_options(args.name, options)
    out_root = Path(args.out or DEFAULT_OUT)
    check_folder(out_root)
    passed = True
    for name in names:
        result = run_benchmark(name, quick=args.quick, **{k: v for k, v in options.items() if k in takes(name)})
        folder = out_root / f"bench-{name}"
        print_result(result, folder, write_report(result, folder))
        print(*(f"{key} = {value:.3f}" for key, value in result.metrics.items()
                if key.startswith(("ratio", "bound"))), sep="\n")
        passed &= result.passed
    return 0 if passed else 1


def demo_parser() -> Parser:
    from pglab.apps.demo import DemoSettings

    demo = Parser(prog="pglab demo", description="the main job on the embedded default: TinyAgent learns to "
                  "repair code in BugFixEnv by REINFORCE")
    add_options(demo, DemoSettings, defaults={"out": str(DEFAULT_OUT / "demo")})
    return demo


def cmd_demo(args: argparse.Namespace) -> int:
    from pglab.apps.demo import DemoSettings, demo

    chosen = settings(DemoSettings, args, defaults={"out": str(DEFAULT_OUT / "demo")})
    folder = Path(chosen.out)
    cost = {} if chosen.format_penalty is None else {"format_penalty": chosen.format_penalty}
    result = run_or_stop(lambda: demo(folder, seed=chosen.seed, quick=chosen.quick, resume=chosen.resume,
                                      steps=chosen.steps, echo=print, **cost), folder,
                         ["pglab", "demo", "--resume", str(folder)])
    print_result(result, folder, write_report(result, folder))
    return 0 if result.passed else 1


def audit_parser() -> Parser:
    from pglab.audit.report import AuditConfig

    audit = Parser(prog="pglab audit", description="the exact expected gradient of a policy-gradient loss on an "
                   "enumerable policy: its bias, its variance and the objective it follows")
    audit.add_argument("--list", action="store_true", help="list the presets")
    add_options(audit, AuditConfig)
    return audit


def cmd_audit(args: argparse.Namespace) -> int:
    from pglab.audit import PRESETS
    from pglab.audit.report import AuditConfig, preset_lines, run_audit, summary_rows, verdict, write_json

    if args.list:
        print(*preset_lines(), sep="\n")
        return 0
    config = settings(AuditConfig, args)
    report = run_audit(config)
    name = config.preset or config.loss
    print(f"verdict: {verdict(report)}")
    warning = getattr(PRESETS.get(config.preset), "warning", None)
    if warning:
        print(f"warning: {warning}")
    print_result(Result(f"audit {name}", {}, tables={f"audit of {name}": summary_rows(report, config.behaviour),
                                                     "objectives": report.candidates}))
    if config.json:
        write_json(report, config, Path(config.json))
        print(f"report written to {config.json}")
    return 0


def conform_parser() -> Parser:
    from pglab.conform.configs import FRAMEWORK_NAMES
    from pglab.conform.report import ConformConfig

    conform = Parser(prog="pglab conform", description="run a framework's own loss, advantage and trainer code on "
                     "pglab's exact batches, against what it documents; exit 1 when a check fails")
    conform.add_argument("framework", choices=FRAMEWORK_NAMES, help="the installed framework to check")
    conform.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                         help="override one config key in the framework's own naming (repeatable), e.g. "
                              "--set loss_type=dapo or --set actor_rollout_ref.actor.use_kl_loss=true")
    add_options(conform, ConformConfig)
    return conform


def cmd_conform(args: argparse.Namespace) -> int:
    from pglab.conform.report import ConformConfig, as_result, payload, run_conform, write_json
    from pglab.reporting.result import provenance

    config = settings(ConformConfig, args)
    sets = parse_sets(args.set)
    framework_config, checks = run_conform(args.framework, sets, config)
    result = as_result(framework_config, checks, sets)
    document = payload(args.framework, checks)
    print(f"verdict: {document['verdict']} ({args.framework} {document['version']})")
    folder = Path(config.out) if config.out else None
    if folder:
        result.provenance = provenance()
    print_result(result, folder, write_report(result, folder) if folder else None)
    if config.json:
        write_json(Path(config.json), document)
        print(f"checks written to {config.json}")
    return 1 if document["verdict"] == "fail" else 0


def serve_parser() -> Parser:
    serve = Parser(prog="pglab serve", description="the course chapter's two demos on a local web page")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    return serve


def cmd_serve(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise SettingsError(f"--port must be in 1..65535, got {args.port}")
    try:
        from pglab.web.server import serve
    except ImportError as err:
        raise SettingsError(f"pglab serve needs the web extra ({err.name} is missing): pip install 'pglab[web]'") \
            from None
    print(f"pglab demos on http://{args.host}:{args.port}/ (Ctrl-C stops)", flush=True)
    serve(args.host, args.port)
    return 0


def inspect_parser() -> Parser:
    inspect = Parser(prog="pglab inspect", description="a run's steps, warnings and recorded transcripts on a local "
                     "web page (docs/inspect.md); a second run goes beside the first")
    inspect.add_argument("runs", nargs="+", metavar="RUN", help="run folder (the --out of demo, train-agent or "
                         "train-lm), or the output_dir of a TRL GRPOTrainer run with log_completions")
    inspect.add_argument("--model", help="a TRL run's model folder: tokenize and score its completions with pglab")
    inspect.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    inspect.add_argument("--port", type=int, default=8001, help="port (default 8001; 0: any free port)")
    inspect.add_argument("--no-browser", action="store_true", help="do not open the page in a browser")
    return inspect


def cmd_inspect(args: argparse.Namespace) -> int:
    if len(args.runs) > 2:
        raise SettingsError(f"pglab inspect shows one or two runs side by side, got {len(args.runs)}; pass at most 2")
    try:
        from pglab.web.inspect import check_port, serve_inspect
    except ImportError as err:
        raise SettingsError(f"pglab inspect needs the web extra ({err.name} is missing): pip install 'pglab[web]'") \
            from None
    from pglab.apps.inspect import load_run

    runs = [load_run(run, model=args.model) for run in args.runs]
    check_port(args.host, args.port)
    serve_inspect(runs, args.host, args.port, browser=not args.no_browser, echo=lambda line: print(line, flush=True))
    return 0


TRAIN_LM = {"output_dir": str(DEFAULT_OUT / "train-lm")}
"""train-lm's defaults where the command's differ from RLConfig's (the library writes no files by default)."""


def train_lm_parser() -> Parser:
    """The options of pglab train-lm: --pretrain, and one per RLConfig field."""
    from pglab.trainers.lm import RLConfig

    lm = Parser(prog="pglab train-lm", description="REINFORCE / RLOO / GRPO with a KL penalty on a Hugging Face "
                "causal LM; the embedded default runs offline")
    lm.add_argument("--pretrain", action="store_true", help="(re)build the embedded default tiny GPT-2 and exit")
    add_options(lm, RLConfig, defaults=TRAIN_LM)
    return lm


def train_lm_config(args: argparse.Namespace):
    """The RLConfig of parsed train-lm options (runs/train-lm unless --out or --resume DIR names a folder)."""
    from pglab.trainers.lm import RLConfig

    return settings(RLConfig, args, defaults=TRAIN_LM)


def cmd_train_lm(args: argparse.Namespace) -> int:
    from pglab.apps.train_lm import lm_result
    from pglab.models.default_lm import ensure_default_model
    from pglab.trainers.lm import train_lm
    from pglab.trainers.lm.logging import Console

    if args.pretrain:
        print(f"embedded default: {ensure_default_model(getattr(args, 'default_size', 'full'), force=True)}")
        return 0
    cfg = train_lm_config(args)
    console = Console()
    out = Path(cfg.output_dir)
    resume = ["pglab", "train-lm", *as_options(cfg, skip=("output_dir", "resume")), "--resume", str(out)]
    run = run_or_stop(lambda: train_lm(cfg, log=lambda r: console.step(r) if (r["step"] - 1) % cfg.log_every == 0
                                       or r["step"] == cfg.max_steps else None), out, resume)
    if int(os.environ.get("RANK", "0")) != 0:             # under torchrun, rank 0 alone reports
        return 0
    result = lm_result(run)
    write_report(result, out)
    console.evaluation(run.evals)
    console.worked_example(run.worked_example, run.worked_check)
    for line in result.warnings:
        console.rich.print(line, markup=False, style="bold yellow", soft_wrap=True)
    console.rich.print(f"written to {out}: metrics.jsonl, eval.jsonl, checkpoint.pt, policy/, curves.png, "
                       "result.json, report.md, report.html", markup=False)
    return 0


TRAIN_AGENT = {"out": str(DEFAULT_OUT / "train-agent")}


def train_agent_parser() -> Parser:
    """The options of pglab train-agent: one per AgentConfig field, and --out, --resume [DIR], --quick."""
    from pglab.trainers.agent_config import AgentConfig

    agent = Parser(prog="pglab train-agent", description="REINFORCE / RLOO / GRPO for a Hugging Face causal LM "
                   "that writes tool calls, in BugFixEnv or your own text-turn environment")
    add_options(agent, AgentConfig)
    add_options(agent, RunOptions, defaults=TRAIN_AGENT)
    return agent


def cmd_train_agent(args: argparse.Namespace) -> int:
    from pglab.apps.train_agent import agent_result
    from pglab.trainers.agent_config import AgentConfig

    cfg, run = settings(AgentConfig, args), settings(RunOptions, args, defaults=TRAIN_AGENT)
    folder = Path(run.out)
    resume = ["pglab", "train-agent", *as_options(cfg), *as_options(run, skip=("out", "resume")), "--resume",
              str(folder)]
    result = run_or_stop(lambda: agent_result(cfg, folder, quick=run.quick, resume=run.resume, echo=print), folder,
                         resume)
    if int(os.environ.get("RANK", "0")) == 0:             # under torchrun, rank 0 alone reports
        print_result(result, folder, write_report(result, folder))
    return 0


@dataclass(frozen=True)
class Command:
    """One pglab command: its line in ``pglab --help``, its options, and what it runs."""

    help: str
    """Its line in ``pglab --help``."""
    parser: Callable[[], Parser]
    """Its options, built when the command runs (the settings of some import torch)."""
    run: Callable[[argparse.Namespace], int]
    """The command itself; returns the exit status."""


COMMANDS = {
    "demo": Command("run the main job on the embedded default", demo_parser, cmd_demo),
    "reproduce": Command("reproduce a book chapter's experiment", reproduce_parser, cmd_reproduce),
    "serve": Command("the course chapter's two demos on a local web page (the web extra)", serve_parser, cmd_serve),
    "inspect": Command("a run's steps, warnings and token-by-token transcripts on a local web page (the web extra)",
                       inspect_parser, cmd_inspect),
    "audit": Command("exact bias and variance of a policy-gradient loss (pglab audit --list)", audit_parser,
                     cmd_audit),
    "conform": Command("check TRL, verl or OpenRLHF: their own loss code on your config against what they document",
                       conform_parser, cmd_conform),
    "bench": Command("run a speed benchmark (pglab bench --list)", bench_parser, cmd_bench),
    "train-lm": Command("REINFORCE / RLOO / GRPO with a KL penalty on a Hugging Face causal LM", train_lm_parser,
                        cmd_train_lm),
    "train-agent": Command("agent RL for a Hugging Face causal LM in BugFixEnv or your own environment",
                           train_agent_parser, cmd_train_agent),
}


def command_parser() -> Parser:
    """``pglab --help``, ``--version`` and the one-line error for a missing or unknown command."""
    from pglab import __version__

    parser = Parser(prog="pglab", description="A policy-gradient laboratory; pglab COMMAND --help lists a "
                    "command's options.")
    parser.add_argument("--version", action="version", version=f"pglab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub.add_parser(name, help=command.help, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; a SettingsError is one line on stderr with exit 2, Ctrl-C one line with exit 130."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if not argv or argv[0] not in COMMANDS:
            command_parser().parse_args(argv[:1])          # --help, --version, or a one-line error
        command = COMMANDS[argv[0]]
        return command.run(command.parser().parse_args(argv[1:]))
    except SettingsError as err:
        message = " ".join(str(err).splitlines())
        print(message if message.startswith("pglab") else f"pglab: {message}", file=sys.stderr)
        return 2
    except Interrupted as stop:
        print(f"pglab: interrupted; {stop}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("pglab: interrupted; nothing was written for the unfinished run", file=sys.stderr)
        return 130
