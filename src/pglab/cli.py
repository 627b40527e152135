"""pglab <command>: thin wrappers that parse, call one function, and print."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import sys
import time
import typing
from pathlib import Path
from typing import Any

from pglab.report import format_value, write_index, write_report
from pglab.result import Result

DEFAULT_OUT = Path("runs")


def print_result(result: Result, folder: Path | None = None, max_rows: int = 20) -> None:
    """Print a Result's claims and tables on the terminal."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)  # logs and pipes get whole columns
    for name, rows in result.tables.items():
        if not rows:
            continue
        table = Table(title=name, title_justify="left")
        columns = list(dict.fromkeys(k for row in rows for k in row))
        for c in columns:
            table.add_column(str(c))
        for row in rows[:max_rows]:
            table.add_row(*(format_value(row.get(c, "")) for c in columns))
        if len(rows) > max_rows:
            table.caption = f"{len(rows) - max_rows} more rows in the CSV"
        console.print(table)
    if result.checks:
        table = Table(title="claims", title_justify="left")
        for c in ("claim", "measured", "expected", "ok"):
            table.add_column(c)
        for check in result.checks:
            ok = "[green]yes[/green]" if check.passed else "[red]NO[/red]"
            table.add_row(check.claim, format_value(check.value), check.expected, ok)
        console.print(table)
    if folder is not None:
        console.print(f"results written to [bold]{folder}[/bold] (report.md, result.json, csv, png)")


def _parse_value(text: str, field_type: Any) -> Any:
    if field_type in (str, "str"):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _overrides(exp, args) -> dict[str, Any]:
    """Config overrides from --set, --seeds and --backend (with --all, only where the experiment has the field)."""
    fields = {f.name: f for f in dataclasses.fields(exp.config_cls)}
    overrides: dict[str, Any] = {}
    for item in args.set or []:
        if "=" not in item:
            raise ValueError(f"--set takes key=value, got {item!r}")
        key, value = item.split("=", 1)
        overrides[key] = _parse_value(value, fields[key].type if key in fields else str)
    for key in ("seeds", "backend"):
        value = getattr(args, key)
        if value is None:
            continue
        if key not in fields:
            if args.all:
                continue
            raise ValueError(f"experiment {exp.name!r} takes no --{key}; its settings: {sorted(fields)}")
        overrides[key] = value
    return overrides


def cmd_reproduce(args) -> int:
    from pglab.experiments import experiment_names, get_experiment

    if args.list:
        for name in experiment_names():
            print(f"{name:<24} {get_experiment(name).summary}")
        return 0
    if not args.all and not args.name:
        print("pglab reproduce: name an experiment, or pass --list or --all", file=sys.stderr)
        return 2
    names = experiment_names() if args.all else [args.name]
    out_root = Path(args.out) if args.out else DEFAULT_OUT
    entries = []
    for name in names:
        exp = get_experiment(name)
        start = time.perf_counter()
        result = exp.run(quick=args.quick, **_overrides(exp, args))
        folder = write_report(result, out_root / name if (args.all or not args.out) else out_root)
        print(f"== {name}: {time.perf_counter() - start:.1f} s")
        print_result(result, folder)
        entries.append((name, folder, result.passed))
    if args.all:
        print(f"index: {write_index(entries, out_root)}")
    return 0 if all(passed for _, _, passed in entries) else 1


def cmd_bench(args) -> int:
    from pglab.bench import BENCHMARKS, run_benchmark

    if args.list or (not args.all and not args.name):
        for name, summary in BENCHMARKS.items():
            print(f"{name:<12} {summary}")
        return 0
    passed = True
    for name in BENCHMARKS if args.all else [args.name]:
        result = run_benchmark(name, quick=args.quick)
        folder = write_report(result, Path(args.out or DEFAULT_OUT) / f"bench-{name}")
        print_result(result, folder)
        print(*(f"{key} = {value:.3f}" for key, value in result.metrics.items() if key.startswith("ratio")), sep="\n")
        passed &= result.passed
    return 0 if passed else 1


def cmd_demo(args) -> int:
    from pglab.experiments import get_experiment

    result = get_experiment("bandit-variance").run(quick=args.quick)
    folder = write_report(result, Path(args.out or DEFAULT_OUT) / "demo")
    print_result(result, folder)
    return 0 if result.passed else 1


def cmd_train_lm(args) -> int:
    from pglab.experiments.registry import check_type
    from pglab.trainers.lm import RLConfig, curves_figure, train_lm
    from pglab.trainers.lm_default import ensure_default_model

    if args.pretrain:
        print(f"embedded default: {ensure_default_model(args.default_size or 'full', force=True)}")
        return 0
    hints = typing.get_type_hints(RLConfig)
    values = {}
    for name, hint in hints.items():
        text = getattr(args, name)
        if text is not None:  # str fields take the text as it is; others parse as Python literals (true/false too)
            value = text if str in (hint, *typing.get_args(hint)) else _parse_value(
                {"true": "True", "false": "False"}.get(text.lower(), text), None)
            value = (value,) if "tuple" in str(hint) and isinstance(value, int) else value
            values[name] = check_type(f"--{name.replace('_', '-')}", value, hint)
    run = train_lm(RLConfig(**values), log=lambda record: print(json.dumps(record), flush=True))
    if run.config["output_dir"] and run.evals:
        curves_figure({"policy": run}).savefig(Path(run.config["output_dir"]) / "curves.png")
    for record in (run.evals[0], run.evals[-1]) if run.evals else ():
        print(json.dumps({"eval_step": record["step"], **{k: v for k, v in record.items() if k != "step"}}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pglab", description="A policy-gradient laboratory.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the main job on the embedded default")
    demo.add_argument("--out", help="output folder root (default: runs/)")
    demo.add_argument("--quick", action="store_true", help="reduced size")
    demo.set_defaults(func=cmd_demo)

    rep = sub.add_parser("reproduce", help="reproduce a seed chapter's experiment")
    rep.add_argument("name", nargs="?", help="experiment name (see --list)")
    rep.add_argument("--list", action="store_true", help="list the experiments")
    rep.add_argument("--all", action="store_true", help="run every experiment and write index.html")
    rep.add_argument("--seeds", type=int, help="number of seeds (experiments that take seeds)")
    rep.add_argument("--backend", choices=["serial", "process", "ray"], help="seed runner backend")
    rep.add_argument("--out", help="output folder (default: runs/NAME)")
    rep.add_argument("--quick", action="store_true", help="reduced size, as the tests run it")
    rep.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    rep.set_defaults(func=cmd_reproduce)

    bench = sub.add_parser("bench", help="run a speed benchmark (pglab bench --list)")
    bench.add_argument("name", nargs="?")
    bench.add_argument("--list", action="store_true")
    bench.add_argument("--all", action="store_true")
    bench.add_argument("--quick", action="store_true")
    bench.add_argument("--out")
    bench.set_defaults(func=cmd_bench)

    from pglab.trainers.lm import RLConfig, config_help

    lm = sub.add_parser("train-lm", help="REINFORCE / RLOO / GRPO with a KL penalty on a Hugging Face causal LM")
    lm.add_argument("--pretrain", action="store_true", help="(re)build the embedded default tiny GPT-2 and exit")
    for name, doc in config_help().items():
        lm.add_argument(f"--{name.replace('_', '-')}", dest=name, help=f"{doc} (default {getattr(RLConfig, name)})")
    lm.set_defaults(func=cmd_train_lm)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"pglab: {err}", file=sys.stderr)
        return 2
