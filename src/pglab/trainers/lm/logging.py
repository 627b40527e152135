"""What ``train_lm`` shows and logs: a table of step metrics, samples with control characters escaped,
the worked example, and TensorBoard scalars (``--report-to tensorboard``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pglab.runtime.options import SettingsError

STEP_COLUMNS = ("step", "reward", "reward_std", "kl_k1", "loss", "grad_norm", "zero_adv_groups", "lr", "seconds")
"""The metrics of a step the console table shows (every metric goes to metrics.jsonl)."""
EVAL_COLUMNS = ("step", "reward", "reward_se", "p_positive", "pass_at_1", "pass_at_k", "kl_exact", "kl_k1", "entropy",
                "ref_perplexity", "distinct_1", "distinct_2")


def escaped(text: str) -> str:
    """``text`` with control and other non-printable characters written as escapes (``\\r``, ``\\x1b``)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"
    return escaped(str(value))


class Console:
    """Rich tables on stdout: one row per logged step (the header printed once), evaluations, samples."""

    def __init__(self, file: Any = None) -> None:
        from rich.console import Console as RichConsole

        out = file or sys.stdout
        self.rich = RichConsole(file=out, width=None if getattr(out, "isatty", lambda: False)() else 160,
                                highlight=False, soft_wrap=False)
        self.rows = 0

    def _table(self, columns: tuple[str, ...], header: bool, title: str | None = None):
        from rich.table import Table

        table = Table(show_header=header, title=title, title_justify="left", box=None, pad_edge=False)
        for c in columns:
            table.add_column(c, justify="right", min_width=max(len(c), 9))
        return table

    def step(self, record: dict) -> None:
        """One row of the step table."""
        columns = tuple(c for c in STEP_COLUMNS if c in record)
        table = self._table(columns, header=self.rows == 0)
        table.add_row(*(number(record.get(c)) for c in columns))
        self.rich.print(table)
        self.rows += 1

    def evaluation(self, records: list[dict]) -> None:
        """The evaluations (before and after training, and any between), then the last one's samples."""
        if not records:
            return
        columns = tuple(c for c in EVAL_COLUMNS if any(r.get(c) is not None for r in records))
        table = self._table(columns, header=True, title="held-out evaluation")
        for r in records:
            table.add_row(*(number(r.get(c)) for c in columns))
        self.rich.print(table)
        for name, record in (("first", records[0]), ("last", records[-1])):
            for text in record.get("samples", []):
                self.rich.print(f"  [{name} evaluation, step {record['step']}] {escaped(text)}", markup=False)

    def worked_example(self, rows: list[dict], check: dict) -> None:
        """llm-ch6 §6.12's token table for one held-out reply, and the check that its rewards sum to G_0."""
        if not rows:
            return
        columns = ("t", "token", "log_pi", "log_ref", "log_ratio", "r_t", "G_t")
        table = self._table(columns, header=True, title=f"worked example: prompt {escaped(check['prompt'])!r}, "
                                                          f"R = {check['R']:.4g}, beta = {check['beta']:g}")
        for r in rows:
            table.add_row(*(number(r[c]) for c in columns))
        self.rich.print(table)
        self.rich.print(f"R - beta * sum(log-ratio) = {check['R_minus_beta_sum']:.6g}, G_0 = {check['G_0']:.6g}, "
                        f"sum of r_t = {check['sum_r_t']:.6g}: "
                        f"{'they agree' if check['sums_agree'] else 'THEY DIFFER'}", markup=False)


class TensorBoard:
    """Scalars of every step and evaluation under ``folder`` (SummaryWriter; needs the tensorboard package)."""

    def __init__(self, folder: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(folder))

    def scalars(self, prefix: str, record: dict) -> None:
        step = int(record["step"])
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"{prefix}/{key}", value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def check_report_to(report_to: str) -> None:
    """Refuse --report-to tensorboard without the package, before any work."""
    if report_to == "tensorboard":
        try:
            import tensorboard  # noqa: F401
        except ImportError:
            raise SettingsError("--report-to tensorboard needs the tensorboard package: "
                                "pip install 'pglab[tensorboard]' (or pass --report-to none)") from None


def tensorboard_logger(report_to: str, folder: Path | None) -> Callable[[str, dict], None] | None:
    """A (prefix, record) logger writing TensorBoard scalars under folder/tensorboard, or None."""
    if report_to != "tensorboard" or folder is None:
        return None
    return TensorBoard(folder / "tensorboard").scalars


__all__ = ["Console", "EVAL_COLUMNS", "STEP_COLUMNS", "TensorBoard", "check_report_to", "escaped", "number",
           "tensorboard_logger"]
