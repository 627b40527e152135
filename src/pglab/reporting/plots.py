"""Figures for reports, built without pyplot (no backend is selected, nothing is left open), in one style.

Every figure starts from :func:`new_figure` (constrained layout, light grid, no top/right spines,
readable ticks). Reference lines go through :func:`reference_line` so that each is labelled, spreads
over runs through :func:`median_band` (median line and interquartile band in one colour), and
legends through :func:`outside_legend`, which puts them beside the axes where they cover no data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

FONT_SIZE = 9
"""Tick, label and legend size in points."""


def new_figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A styled Figure and its axes (``Figure.subplots`` arguments); ``Result.figures`` takes the Figure."""
    subplot_keys = {"sharex", "sharey", "squeeze", "width_ratios", "height_ratios", "subplot_kw", "gridspec_kw"}
    subplot_args = {k: kwargs.pop(k) for k in list(kwargs) if k in subplot_keys}
    fig = Figure(layout="constrained", **kwargs)
    axes = fig.subplots(nrows, ncols, **subplot_args)
    for ax in np.atleast_1d(axes).flat:
        ax.grid(True, alpha=0.3, lw=0.6)
        ax.spines[["top", "right"]].set_visible(False)
        ax.tick_params(labelsize=FONT_SIZE)
        ax.xaxis.label.set_size(FONT_SIZE + 1)
        ax.yaxis.label.set_size(FONT_SIZE + 1)
        ax.title.set_size(FONT_SIZE + 1)
    return fig, axes


def reference_line(ax: Axes, value: float, label: str, *, vertical: bool = False, color: str = "0.35",
                   ls: str = ":") -> None:
    """A labelled horizontal (or vertical) line at ``value``; the label goes to the legend."""
    draw = ax.axvline if vertical else ax.axhline
    draw(value, color=color, ls=ls, lw=1.2, label=label, zorder=1)


def median_band(ax: Axes, x: np.ndarray, curves: np.ndarray, color: str, label: str, ls: str = "-") -> None:
    """Median over runs as a line and the interquartile range as a band of the same colour; curves [runs, len(x)]."""
    low, median, high = np.percentile(np.asarray(curves, dtype=float), [25.0, 50.0, 75.0], axis=0)
    ax.fill_between(x, low, high, color=color, alpha=0.18, lw=0)
    ax.plot(x, median, color=color, ls=ls, lw=1.6, label=label)


def log_axis(ax: Axes, ticks: list[float], axis: str = "y") -> None:
    """A log scale on ``axis`` with the given ticks printed as plain numbers (no 10^k) and unlabelled minor ticks."""
    getattr(ax, f"set_{axis}scale")("log")
    scale = getattr(ax, f"{axis}axis")
    scale.set_major_locator(FixedLocator(ticks))
    scale.set_major_formatter(ScalarFormatter())
    scale.set_minor_formatter(NullFormatter())


def outside_legend(ax: Axes, title: str | None = None, below: bool = False, **kwargs: Any) -> None:
    """The legend of ``ax`` outside the data area: to the right of the axes, or below them."""
    place = dict(loc="upper center", bbox_to_anchor=(0.5, -0.16)) if below else dict(
        loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ax.legend(borderaxespad=0.0, fontsize=FONT_SIZE, title=title, title_fontsize=FONT_SIZE, frameon=False,
              **place, **kwargs)
