"""pglab <command>: thin wrappers that parse, call one function, and print."""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
import time
import typing
from pathlib import Path
from typing import Any

from pglab.reporting.report import print_result, write_index, write_report
from pglab.reporting.result import Result

DEFAULT_OUT = Path("runs")


class UsageError(ValueError):
    """Bad command-line input: printed as one line, exit status 2."""


def parse_value(text: str, field_type: Any) -> Any:
    """A --set value: a Python literal (number, tuple, True, None), or the raw text for a str setting."""
    if field_type is str:
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """--set KEY=VALUE items -> {key: raw text}."""
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set takes KEY=VALUE, got {item!r}; e.g. --set samples=1000")
        pairs[key.strip()] = value
    return pairs


def overrides_for(exp, args, sets: dict[str, str]) -> dict[str, Any]:
    """Config overrides from --set, --seeds, --first-seed and --backend; with --all, only where the field exists."""
    fields = exp.fields()
    overrides: dict[str, Any] = {}
    for key, text in sets.items():
        if key in fields:
            overrides[key] = parse_value(text, fields[key])
        elif not args.all:
            raise UsageError(f"experiment {exp.name!r} has no setting {key!r}; its settings: {', '.join(fields)}")
    for key in ("seeds", "first_seed", "backend"):
        value = getattr(args, key)
        if value is None:
            continue
        if key not in fields:
            if args.all:
                continue
            flag = "--" + key.replace("_", "-")
            raise UsageError(f"experiment {exp.name!r} takes no {flag}; its settings: {', '.join(fields)}")
        overrides[key] = value
    return overrides


def check_out_folder(path: Path) -> None:
    """Refuse an --out that is a file or cannot be written, before any work is done (nothing is created)."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {path} is a file; pass a folder (it is created if missing)")
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    try:
        if not existing.is_dir():
            raise OSError
        fd, probe = tempfile.mkstemp(prefix=".pglab-probe-", dir=existing)   # root ignores access bits: try it
        os.close(fd)
        os.unlink(probe)
    except OSError:
        raise UsageError(f"--out {path}: cannot write in {existing}; pass a folder you can write to") from None


def cmd_reproduce(args) -> int:
    from pglab.experiments import experiment_names, get_experiment

    if args.list:
        for name in experiment_names():
            print(f"{name:<24} {get_experiment(name).summary}")
        return 0
    if args.all == bool(args.name):
        raise UsageError("name one experiment, or pass --all (or --list); see pglab reproduce --help")
    names = experiment_names() if args.all else [args.name]
    out_root = Path(args.out) if args.out else DEFAULT_OUT
    check_out_folder(out_root)
    sets = parse_sets(args.set)
    if args.all:
        unused = sorted(set(sets) - {k for n in names for k in get_experiment(n).fields()})
        if unused:
            raise UsageError(f"no experiment has the setting(s) {unused}; each report's Configuration table "
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
        start = time.perf_counter()
        result = exp.run(quick=args.quick, command=command, **overrides)
        folder = out_root / exp.name if (args.all or not args.out) else out_root
        written = write_report(result, folder)
        print(f"== {exp.name}: {time.perf_counter() - start:.1f} s")
        print_result(result, folder, written)
        entries.append((exp.name, folder, result.passed))
    if args.all:
        print(f"index: {write_index(entries, out_root)}")
    return 0 if all(passed for _, _, passed in entries) else 1


def cmd_bench(args) -> int:
    from pglab.bench import BENCHMARKS, run_benchmark

    if args.list or (not args.all and not args.name):
        for name, summary in BENCHMARKS.items():
            print(f"{name:<12} {summary}")
        return 0
    if args.name and args.name not in BENCHMARKS:
        raise UsageError(f"unknown benchmark {args.name!r}; `pglab bench --list` shows: {', '.join(BENCHMARKS)}")
    out_root = Path(args.out or DEFAULT_OUT)
    check_out_folder(out_root)
    passed = True
    for name in BENCHMARKS if args.all else [args.name]:
        result = run_benchmark(name, quick=args.quick, **({"size": args.size} if args.size else {}))
        folder = out_root / f"bench-{name}"
        print_result(result, folder, write_report(result, folder))
        print(*(f"{key} = {value:.3f}" for key, value in result.metrics.items()
                if key.startswith(("ratio", "bound"))), sep="\n")
        passed &= result.passed
    return 0 if passed else 1


def cmd_demo(args) -> int:
    from pglab.apps.demo import demo
    from pglab.trainers.loop import RunDir

    if args.seed < 0:
        raise ValueError(f"--seed must be a whole number >= 0, got {args.seed}")
    if args.format_penalty is not None and not 0 <= args.format_penalty < float("inf"):
        raise ValueError(f"--format-penalty is the cost of a malformed call, a number >= 0; got {args.format_penalty}")
    if args.format_penalty is not None and args.resume:
        raise ValueError("--resume continues with the run's own format penalty; drop --format-penalty")
    options = {} if args.format_penalty is None else {"format_penalty": args.format_penalty}
    folder = Path(args.resume) if args.resume else Path(args.out or DEFAULT_OUT) / "demo"
    check_out_folder(folder)
    try:
        result = demo(folder, seed=args.seed, quick=args.quick, resume=bool(args.resume),
                      echo=print, **options)
    except KeyboardInterrupt:
        step = RunDir(folder).checkpoint_step() if folder.is_dir() else None
        if step is None:
            raise
        print(f"pglab: interrupted; the checkpoint after step {step} is kept in {folder}; continue with "
              f"pglab demo --resume {folder}", file=sys.stderr)
        return 130
    print_result(result, folder, write_report(result, folder))
    return 0 if result.passed else 1


def cmd_audit(args) -> int:
    from pglab.audit.report import AuditConfig, preset_lines, run_audit, summary_rows, write_json

    if args.list:
        print(*preset_lines(), sep="\n")
        return 0
    if args.json and not Path(args.json).absolute().parent.is_dir():
        raise UsageError(f"--json {args.json}: its folder does not exist; pass a file in an existing folder")
    config = AuditConfig(**{k: v for k, v in vars(args).items() if k in AuditConfig.__dataclass_fields__})
    report = run_audit(config)
    name = args.preset or args.loss
    print_result(Result(f"audit {name}", {}, tables={f"audit of {name}": summary_rows(report),
                                                     "objectives": report.candidates}))
    if args.json:
        write_json(report, config, Path(args.json))
        print(f"report written to {args.json}")
    return 0


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and no abbreviated options (``--seed`` is not ``--seeds``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str) -> None:
        raise UsageError(f"{self.prog}: {message}; see {self.prog} --help")


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects an integer, got {text!r}") from None


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a number, got {text!r}") from None


def cmd_serve(args) -> int:
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    try:
        from pglab.web.server import serve
    except ImportError as err:
        raise ValueError(f"pglab serve needs the web extra ({err.name} is missing): pip install 'pglab[web]'") from None
    print(f"pglab demos on http://{args.host}:{args.port}/ (Ctrl-C stops)", flush=True)
    serve(args.host, args.port)
    return 0


TRAIN_LM_OUT = DEFAULT_OUT / "train-lm"


def train_lm_parser() -> argparse.ArgumentParser:
    """The options of pglab train-lm: --pretrain, --resume [DIR], and one per RLConfig field."""
    from pglab.trainers.lm import RLConfig, config_help

    lm = Parser(prog="pglab train-lm", description="REINFORCE / RLOO / GRPO with a KL penalty on a Hugging Face "
                "causal LM; the embedded default runs offline")
    lm.add_argument("--pretrain", action="store_true", help="(re)build the embedded default tiny GPT-2 and exit")
    for name, doc in config_help().items():
        flag = f"--{name.replace('_', '-')}"
        if name == "resume":
            lm.add_argument(flag, nargs="?", const=True, metavar="DIR",
                            help="continue the stopped run in --output-dir (or in DIR)")
        elif name == "output_dir":
            lm.add_argument(flag, dest=name, help=f"{doc} (default {TRAIN_LM_OUT})")
        else:
            lm.add_argument(flag, dest=name, help=f"{doc} (default {getattr(RLConfig, name)})")
    return lm


def train_lm_value(name: str, text: str, hint: Any) -> Any:
    """One --option's text as the RLConfig field's type: str fields as they are, others as Python literals
    (true/false too), a single value for a tuple field as a 1-tuple, comma-separated words for a tuple of str."""
    from pglab.experiments.registry import check_type

    flag = f"--{name.replace('_', '-')}"
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args[:1] == (str,):
        value: Any = tuple(w.strip() for w in text.split(",") if w.strip())
    elif str in (hint, *args):
        value = None if text == "None" and type(None) in args else text
    else:
        value = parse_value({"true": "True", "false": "False"}.get(text.lower(), text), None)
        if "tuple" in str(hint) and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = (value,)
    return check_type(flag, value, hint)


def train_lm_config(args: argparse.Namespace):
    """The RLConfig of parsed train-lm options: --resume [DIR] and the runs/train-lm default folder applied."""
    from pglab.trainers.lm import RLConfig

    values = {}
    for name, hint in typing.get_type_hints(RLConfig).items():
        text = getattr(args, name)
        if name != "resume" and text is not None:
            values[name] = train_lm_value(name, text, hint)
    if isinstance(args.resume, str):
        if values.get("output_dir", args.resume) != args.resume:
            raise UsageError(f"--resume {args.resume} and --output-dir {values['output_dir']} differ; pass one of them")
        values["output_dir"] = args.resume
    values.setdefault("output_dir", str(TRAIN_LM_OUT))
    values["resume"] = bool(args.resume)
    return RLConfig(**values)


def cmd_train_lm(options: list[str]) -> int:
    from pglab.models.default_lm import ensure_default_model
    from pglab.trainers.lm import curves_figure, train_lm
    from pglab.trainers.lm.logging import Console

    args = train_lm_parser().parse_args(options)
    if args.pretrain:
        print(f"embedded default: {ensure_default_model(args.default_size or 'full', force=True)}")
        return 0
    cfg = train_lm_config(args)
    console = Console()
    run = train_lm(cfg, log=lambda r: console.step(r) if (r["step"] - 1) % cfg.log_every == 0 or
                   r["step"] == cfg.max_steps else None)
    out = Path(cfg.output_dir)
    if run.evals:
        curves_figure({"policy": run}).savefig(out / "curves.png")
    console.evaluation(run.evals)
    console.worked_example(run.worked_example, run.worked_check)
    console.rich.print(f"written to {out}: metrics.jsonl, eval.jsonl, checkpoint.pt, policy/, curves.png", markup=False)
    return 0


def train_agent_parser() -> argparse.ArgumentParser:
    """The options of pglab train-agent: one per AgentConfig field, --quick, --out, --resume."""
    from pglab.runtime.options import add_options
    from pglab.trainers.agent_config import AgentConfig

    agent = Parser(prog="pglab train-agent", description="REINFORCE / RLOO / GRPO for a Hugging Face causal LM "
                   "that writes tool calls, in BugFixEnv or your own text-turn environment")
    add_options(agent, AgentConfig)
    agent.add_argument("--quick", action="store_true", help="reduced size: a first look in seconds")
    agent.add_argument("--out", help=f"run folder (default {DEFAULT_OUT}/train-agent)")
    agent.add_argument("--resume", action="store_true", help="continue the stopped run in --out")
    return agent


def cmd_train_agent(options: list[str]) -> int:
    from pglab.apps.train_agent import agent_result
    from pglab.runtime.options import from_options
    from pglab.trainers.agent_config import AgentConfig

    args = train_agent_parser().parse_args(options)
    folder = Path(args.out or Path(DEFAULT_OUT) / "train-agent")
    check_out_folder(folder)
    result = agent_result(from_options(AgentConfig, args), folder, quick=args.quick, resume=args.resume, echo=print)
    if int(os.environ.get("RANK", "0")) == 0:             # under torchrun, rank 0 alone reports
        print_result(result, folder, write_report(result, folder))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from pglab import __version__

    parser = Parser(prog="pglab", description="A policy-gradient laboratory.")
    parser.add_argument("--version", action="version", version=f"pglab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    demo = sub.add_parser("demo", help="run the main job on the embedded default")
    demo.add_argument("--out", help="output folder root (default: runs/)")
    demo.add_argument("--quick", action="store_true", help="reduced size: a first look in seconds")
    demo.add_argument("--seed", type=int, default=0, help="RNG seed of the whole run (default 0)")
    demo.add_argument("--resume", metavar="DIR", help="continue the stopped run in DIR (its output folder)")
    demo.add_argument("--format-penalty", type=number, default=None, metavar="C",
                      help="training cost of one malformed call, placed on its own tokens (default: the swept "
                           "value, pglab.trainers.tinyagent.FORMAT_PENALTY)")
    demo.set_defaults(func=cmd_demo)

    rep = sub.add_parser("reproduce", help="reproduce a book chapter's experiment")
    rep.add_argument("name", nargs="?", help="experiment name (see --list)")
    rep.add_argument("--list", action="store_true", help="list the experiments")
    rep.add_argument("--all", action="store_true", help="run every experiment and write index.html")
    rep.add_argument("--seeds", type=integer, help="number of seeds (experiments that take seeds)")
    rep.add_argument("--first-seed", type=integer, help="first RNG seed (default 0): --first-seed 20 "
                     "--seeds 20 runs seeds 20-39")
    rep.add_argument("--backend", choices=["serial", "process", "ray"], help="seed runner backend")
    rep.add_argument("--out", help="output folder (default: runs/NAME; with --all, the root)")
    rep.add_argument("--quick", action="store_true", help="reduced size, as the tests run it")
    rep.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    rep.set_defaults(func=cmd_reproduce)

    serve = sub.add_parser("serve", help="the course chapter's two demos on a local web page (the web extra)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.set_defaults(func=cmd_serve)

    audit = sub.add_parser("audit", help="exact bias and variance of a policy-gradient loss (pglab audit --list)")
    audit.add_argument("--preset", help="a named configuration (see --list)")
    audit.add_argument("--loss", help="module:function or file.py:function with the signature "
                       "loss_fn(logp, ref_logp, rewards, mask, group) -> scalar")
    audit.add_argument("--list", action="store_true", help="list the presets")
    audit.add_argument("--beta", type=float, default=0.1, help="KL price of the objective J and of a preset (0.1)")
    audit.add_argument("--group-size", type=integer, default=4, help="replies per prompt in a batch (4)")
    audit.add_argument("--policy", choices=["table", "gpt2"], default="table", help="parametrisation (table)")
    audit.add_argument("--variable-length", action="store_true", help="an end token: replies of 1 or 2 tokens")
    audit.add_argument("--prompts", type=integer, default=2, help="prompts in a batch, one group each (2)")
    audit.add_argument("--seed", type=integer, default=0, help="RNG seed of the policy, the rewards and sampling (0)")
    audit.add_argument("--monte-carlo", action="store_true", help="draw batches even where enumeration fits")
    audit.add_argument("--max-batches", type=integer, default=20_000, help="enumerate up to this many batches, "
                       "else draw --samples (20000)")
    audit.add_argument("--samples", type=integer, default=5_000, help="batches drawn in Monte Carlo mode (5000)")
    audit.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    audit.set_defaults(func=cmd_audit)

    bench = sub.add_parser("bench", help="run a speed benchmark (pglab bench --list)")
    bench.add_argument("name", nargs="?")
    bench.add_argument("--list", action="store_true")
    bench.add_argument("--all", action="store_true")
    bench.add_argument("--quick", action="store_true")
    bench.add_argument("--out")
    bench.add_argument("--size", choices=["small", "large", "both"], help="lm-vs-trl: the model size(s) (default both)")
    bench.set_defaults(func=cmd_bench)

    # Its options come from RLConfig, whose module imports torch: they are parsed in cmd_train_lm, so that
    # the other commands start without torch.
    lm = sub.add_parser("train-lm", add_help=False, help="REINFORCE / RLOO / GRPO with a KL penalty on a Hugging Face "
                        "causal LM (pglab train-lm --help)")
    lm.add_argument("options", nargs=argparse.REMAINDER)
    lm.set_defaults(func=lambda args: cmd_train_lm(args.options))
    agent = sub.add_parser("train-agent", add_help=False, help="agent RL for a Hugging Face causal LM in BugFixEnv "
                           "or your own environment (pglab train-agent --help)")
    agent.add_argument("options", nargs=argparse.REMAINDER)
    agent.set_defaults(func=lambda args: cmd_train_agent(args.options))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input is one line on stderr with exit 2, Ctrl-C one line with exit 130."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["train-lm"]:          # its options are parsed where RLConfig (and torch) is imported
            return cmd_train_lm(argv[1:])
        if argv[:1] == ["train-agent"]:
            return cmd_train_agent(argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except ValueError as err:
        print(f"pglab: {err}" if not str(err).startswith("pglab") else str(err), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pglab: interrupted; nothing was written for the unfinished run", file=sys.stderr)
        return 130
