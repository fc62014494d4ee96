"""Panels shared by several figures: grouped bars of rates, and per-turn shifts against their bounds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.ticker import MaxNLocator

from shiftbounds.utils.plotting import series_style

HATCHES = ("", "//", "..", "xx", "\\\\")


def grouped_bars(ax, groups: Sequence[str], metrics: Sequence[str], values: Sequence[Sequence[float]], *,
                 labels: Sequence[str] | None = None) -> None:
    """One bar group per metric, one bar per group member (``values[i][j]``: member ``i``, metric
    ``j``; ``nan`` drawn as a gap); member ``i`` keeps one colour and hatch across figures."""
    w = 0.8 / max(len(groups), 1)
    x = np.arange(len(metrics))
    for i, name in enumerate(groups):
        ax.bar(x + w * i, [np.nan if v is None else v for v in values[i]], w, label=name, color=series_style(i)["color"],
               hatch=HATCHES[i % len(HATCHES)], edgecolor="black", linewidth=0.4)
    ax.set_xticks(x + w * (len(groups) - 1) / 2, labels or metrics, rotation=30 if len(metrics) > 3 else 0,
                  ha="right" if len(metrics) > 3 else "center", fontsize=6)
    ax.set_ylabel("rate")


def shifts_against_bounds(ax, series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *, shift: str, bound: str,
                          first_style: int = 0) -> None:
    """Per-turn shifts (solid) with their compounding bounds (dotted): ``series`` holds
    ``(name, shift_t, bound_t)``; ``shift`` / ``bound`` are the LaTeX symbols of the legend."""
    for i, (name, values, bounds) in enumerate(series):
        st = series_style(i + first_style)
        t = np.arange(len(values))
        ax.plot(t, values, label=rf"{name} ${shift}$", **st)
        ax.plot(t, bounds, color=st["color"], linestyle=":", linewidth=1.0, label=rf"{name} ${bound}$")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("turn t")
    ax.set_ylabel("TV")
    ax.legend(frameon=False, fontsize=6)
