"""Write a Result to its output folder: result.json, report.md, one CSV per table, one PNG per figure."""

from __future__ import annotations

import csv
import html
import json
import math
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pglab.reporting.result import Result


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


def _claim_rows(result: Result) -> list[dict[str, Any]]:
    return [{"claim": c.claim, "measured": c.value, "expected": c.expected, "tolerance": c.tolerance,
             "p-value": "exact" if c.p_value is None else f"{c.p_value:.2g}", "ok": c.status} for c in result.checks]


def _settings_rows(mapping: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [{key: k, "value": v} for k, v in mapping.items()]


def render_markdown(result: Result) -> str:
    """The report of one Result as Markdown, figures embedded by file name."""
    parts = [f"# {result.name}", ""]
    if result.summary:
        parts += [result.summary.strip(), ""]
    if result.warnings:
        parts += ["## Warnings", "", *(f"- {line}" for line in result.warnings), ""]
    if result.checks:
        parts += [f"## Claims ({result.status})", "", result.family_line, "", markdown_table(_claim_rows(result)), ""]
    if result.metrics:
        parts += ["## Metrics", "", markdown_table(_settings_rows(result.metrics, "metric")), ""]
    for name, rows in result.tables.items():
        parts += [f"## {name}", "", markdown_table(rows), ""]
    for name in result.figures:
        parts += [f"## Figure: {name}", "", f"![{name}]({name}.png)", ""]
    parts += ["## Configuration", "", markdown_table(_settings_rows(result.config, "key")), ""]
    if result.provenance:
        parts += ["## Provenance", "", markdown_table(_settings_rows(result.provenance, "key")), ""]
    return "\n".join(parts)


def html_table(rows: list[dict[str, Any]]) -> str:
    """Rows of dicts -> an HTML table (columns in order of first appearance); a cell "NO" is marked failed, a cell
    "not evaluated" muted."""
    if not rows:
        return "<p><em>(empty)</em></p>"
    columns = _columns(rows)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            text = format_value(row.get(c, ""))
            cls = {"NO": ' class="fail"', "not evaluated": ' class="unjudged"'}.get(text, "")
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}"
          "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:14px}"
          "th,td{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
          "th{background:#f4f4f4}td.fail{color:#b00;font-weight:bold}td.unjudged{color:#888}img{max-width:100%}"
          ".fail-banner{color:#b00}")


def render_html(result: Result) -> str:
    """The report of one Result as a standalone HTML page (figures by file name)."""
    title = html.escape(result.name)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
             f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{_STYLE}</style>"
             f"</head><body><h1>{title}</h1>"]
    if result.summary:
        parts.append(f"<p>{html.escape(result.summary.strip())}</p>")
    if result.warnings:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in result.warnings)
        parts.append(f"<h2 class='fail-banner'>Warnings</h2><ul>{items}</ul>")
    if result.checks:
        cls = "" if result.passed else " class='fail-banner'"
        parts.append(f"<h2{cls}>Claims ({html.escape(result.status)})</h2><p>{html.escape(result.family_line)}</p>"
                     f"{html_table(_claim_rows(result))}")
    if result.metrics:
        parts.append(f"<h2>Metrics</h2>{html_table(_settings_rows(result.metrics, 'metric'))}")
    for name, rows in result.tables.items():
        parts.append(f"<h2>{html.escape(name)}</h2>{html_table(rows)}")
    for name in result.figures:
        src = html.escape(f"{name}.png")
        parts.append(f"<h2>Figure: {html.escape(name)}</h2><img src='{src}' alt='{html.escape(name)}'>")
    parts.append(f"<h2>Configuration</h2>{html_table(_settings_rows(result.config, 'key'))}")
    if result.provenance:
        parts.append(f"<h2>Provenance</h2>{html_table(_settings_rows(result.provenance, 'key'))}")
    parts.append("</body></html>")
    return "".join(parts)


def _manifest(folder: Path, name: str) -> Path:
    return folder / f".pglab-{name}-files.json"


def write_report(result: Result, out_dir: str | Path) -> list[Path]:
    """Write result.json, report.md, report.html, <table>.csv and <figure>.png into ``out_dir``.

    Files are written to a temporary folder first and moved in at the end, so an interrupted write
    leaves the folder as it was. The files this experiment wrote last time and no longer writes are
    removed; files of anything else in the folder are never touched. Returns the paths written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{result.name}-", dir=out))
    try:
        for name, rows in result.tables.items():
            with open(staging / f"{name}.csv", "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=_columns(rows))
                writer.writeheader()
                writer.writerows({k: _jsonable(v) for k, v in row.items()} for row in rows)
        for name, fig in result.figures.items():
            fig.savefig(staging / f"{name}.png", dpi=120, bbox_inches="tight")
        payload = {
            "name": result.name,
            "config": result.config,
            "metrics": result.metrics,
            "tables": result.tables,
            "checks": [asdict(c) for c in result.checks],
            "passed": result.passed,
            "family": result.family,
            "quick": result.quick,
            "warnings": result.warnings,
            "figures": [f"{name}.png" for name in result.figures],
            "provenance": result.provenance,
        }
        (staging / "result.json").write_text(json.dumps(_jsonable(payload), indent=2))
        (staging / "report.md").write_text(render_markdown(result))
        (staging / "report.html").write_text(render_html(result))
        names = sorted(p.name for p in staging.iterdir())
        manifest = _manifest(out, result.name)
        previous = json.loads(manifest.read_text()) if manifest.exists() else []
        for stale in set(previous) - set(names):
            (out / Path(stale).name).unlink(missing_ok=True)
        for name in names:
            os.replace(staging / name, out / name)
        manifest.write_text(json.dumps(names))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    order = {"report.html": 0, "report.md": 1, "result.json": 2}
    return sorted((out / n for n in names), key=lambda p: (order.get(p.name, 3), p.suffix, p.name))


def write_index(entries: list[tuple[Result, Path]], out_dir: str | Path) -> Path:
    """index.html linking every report.html: entries are (an experiment's Result, its folder)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for result, folder in entries:
        name, status = result.name, html.escape(result.status)
        rel = folder.relative_to(out) if folder.is_relative_to(out) else folder
        figures = "".join(
            f'<a href="{html.escape(str(rel / p.name))}"><img src="{html.escape(str(rel / p.name))}" height="120"></a>'
            for p in sorted(folder.glob("*.png"))
        )
        rows.append(
            f'<tr><td><a href="{html.escape(str(rel / "report.html"))}">{html.escape(name)}</a></td>'
            f'<td>{status if result.passed else f"<b>{status}</b>"}</td><td>{figures}</td></tr>'
        )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>pglab results</title>"
        f"<style>{_STYLE}</style></head><body><h1>pglab: reproduced experiments</h1><table>"
        + "".join(rows)
        + "</table></body></html>"
    )
    path = out / "index.html"
    path.write_text(page)
    return path


def print_result(result: Result, folder: Path | None = None, written: list[Path] | None = None,
                 max_rows: int = 20) -> None:
    """Print a Result's claims and tables on the terminal, then its warnings (one line each)."""
    from rich.console import Console
    from rich.markup import escape
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
            table.add_row(*(escape(format_value(row.get(c, ""))) for c in columns))
        if len(rows) > max_rows:
            table.caption = f"{len(rows) - max_rows} more rows in the CSV"
        console.print(table)
    if result.checks:
        table = Table(title="claims", title_justify="left", caption=result.family_line, caption_justify="left")
        for c in ("claim", "measured", "expected", "ok"):
            table.add_column(c)
        colour = {"yes": "green", "NO": "red", "not evaluated": "yellow"}
        for check in result.checks:
            ok = f"[{colour[check.status]}]{check.status}[/{colour[check.status]}]"
            table.add_row(escape(check.claim), format_value(check.value), escape(check.expected), ok)
        console.print(table)
    for line in result.warnings:
        console.print(line, markup=False, style="bold yellow", soft_wrap=True)
    if folder is not None:
        kinds = ", ".join(dict.fromkeys(p.suffix.lstrip(".") for p in written or []))
        console.print(f"results written to [bold]{folder}[/bold] ({kinds})")


