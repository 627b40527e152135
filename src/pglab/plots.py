"""Figures for reports, built without pyplot: no backend is selected and nothing is left open."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure


def new_figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A Figure and its axes (``Figure.subplots`` arguments); ``Result.figures`` takes the Figure."""
    subplot_keys = {"sharex", "sharey", "squeeze", "width_ratios", "height_ratios", "subplot_kw", "gridspec_kw"}
    subplot_args = {k: kwargs.pop(k) for k in list(kwargs) if k in subplot_keys}
    fig = Figure(**kwargs)
    return fig, fig.subplots(nrows, ncols, **subplot_args)
