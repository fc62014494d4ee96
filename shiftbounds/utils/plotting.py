"""One figure style for the package (readable in greyscale) and saving as PNG + PDF."""

from __future__ import annotations

from pathlib import Path

# No backend is forced: without a display matplotlib falls back to Agg by itself, and inside a
# notebook the inline backend stays active (forcing Agg here used to hide notebook figures).
import matplotlib.pyplot as plt

from shiftbounds.utils.io import atomic_replace

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")
GREYS = ("0.0", "0.35", "0.6", "0.8")
COLORS = ("#1b4f72", "#b03a2e", "#1e8449", "#7d3c98", "#b9770e", "#5d6d7e", "#111111")

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 200,
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def series_style(i: int) -> dict:
    """Colour, marker and line style for the ``i``-th series: distinct even when printed grey."""
    return {
        "color": COLORS[i % len(COLORS)],
        "marker": MARKERS[i % len(MARKERS)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
        "markersize": 4,
        "linewidth": 1.3,
    }


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 3.4, height: float = 2.6):
    """A figure with the package style and ``nrows x ncols`` axes of the given size each."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    fig.set_layout_engine("constrained")
    return fig, axes


def save_figure(fig, path_stem: str | Path) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` and ``<stem>.pdf``; returns both paths; closes the figure."""
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    with plt.rc_context(STYLE):
        for ext in ("png", "pdf"):
            p = stem.with_suffix(f".{ext}")
            # no creation date in the PDF: the same figure gives the same bytes on every run
            meta = {"CreationDate": None} if ext == "pdf" else None
            atomic_replace(p, lambda tmp, ext=ext, meta=meta: fig.savefig(tmp, format=ext, metadata=meta))
            out.append(p)
    plt.close(fig)
    return out
