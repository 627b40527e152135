"""Write a Result to its output folder: result.json, report.md, one CSV per table, one PNG per figure."""

from __future__ import annotations

import csv
import html
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pglab.result import Result


def format_value(value: Any) -> str:
    """Numbers with 4 significant digits (integers and strings as they are, None as an empty cell)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.4g}"
        return f"{value:.4f}".rstrip("0").rstrip(".") if abs(value) < 1 else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(format_value(v) for v in value) + ")"
    return str(value)


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    return columns


def _cell(value: Any) -> str:
    """A table cell: the formatted value with pipes escaped and newlines folded."""
    return format_value(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Rows of dicts -> a Markdown table (columns in order of first appearance)."""
    if not rows:
        return "_(empty)_"
    columns = _columns(rows)
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def render_markdown(result: Result) -> str:
    """The report of one Result as Markdown, figures embedded by file name."""
    parts = [f"# {result.name}", ""]
    if result.summary:
        parts += [result.summary.strip(), ""]
    if result.checks:
        status = "all claims hold" if result.passed else f"{len(result.failed_checks())} claim(s) FAILED"
        parts += [f"## Claims ({status})", ""]
        parts.append(markdown_table([
            {"claim": c.claim, "measured": c.value, "expected": c.expected,
             "tolerance": c.tolerance, "ok": "yes" if c.passed else "NO"}
            for c in result.checks
        ]))
        parts.append("")
    if result.metrics:
        parts += ["## Metrics", "", markdown_table([{"metric": k, "value": v} for k, v in result.metrics.items()]), ""]
    for name, rows in result.tables.items():
        parts += [f"## {name}", "", markdown_table(rows), ""]
    for name in result.figures:
        parts += [f"## Figure: {name}", "", f"![{name}]({name}.png)", ""]
    parts += ["## Configuration", "", markdown_table([{"key": k, "value": v} for k, v in result.config.items()]), ""]
    return "\n".join(parts)


def write_report(result: Result, out_dir: str | Path) -> Path:
    """Write result.json, report.md, <table>.csv and <figure>.png into ``out_dir``; return the folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in result.tables.items():
        with open(out / f"{name}.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=_columns(rows))
            writer.writeheader()
            writer.writerows({k: _jsonable(v) for k, v in row.items()} for row in rows)
    for name, fig in result.figures.items():
        fig.savefig(out / f"{name}.png", dpi=120, bbox_inches="tight")
    payload = {
        "name": result.name,
        "config": result.config,
        "metrics": result.metrics,
        "tables": result.tables,
        "checks": [asdict(c) for c in result.checks],
        "passed": result.passed,
        "figures": [f"{name}.png" for name in result.figures],
    }
    (out / "result.json").write_text(json.dumps(_jsonable(payload), indent=2))
    (out / "report.md").write_text(render_markdown(result))
    return out


def write_index(entries: list[tuple[str, Path, bool]], out_dir: str | Path) -> Path:
    """index.html linking every report: entries are (experiment name, its folder, all claims held)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, folder, passed in entries:
        rel = folder.relative_to(out) if folder.is_relative_to(out) else folder
        figures = "".join(
            f'<a href="{html.escape(str(rel / p.name))}"><img src="{html.escape(str(rel / p.name))}" height="120"></a>'
            for p in sorted(folder.glob("*.png"))
        )
        rows.append(
            f'<tr><td><a href="{html.escape(str(rel / "report.md"))}">{html.escape(name)}</a></td>'
            f'<td>{"all claims hold" if passed else "<b>claims failed</b>"}</td><td>{figures}</td></tr>'
        )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>pglab results</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{padding:6px;border-bottom:1px solid #ddd}</style>"
        "</head><body><h1>pglab: reproduced experiments</h1><table>"
        + "".join(rows)
        + "</table></body></html>"
    )
    path = out / "index.html"
    path.write_text(page)
    return path
