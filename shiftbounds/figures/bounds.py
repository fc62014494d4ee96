"""The bound check: exact gaps against their bounds over the horizon, and the cliff's tightness."""

from __future__ import annotations

from pathlib import Path

from shiftbounds.utils.plotting import new_figure, save_figure, series_style


def plot_bound_check(results: dict, stem: Path) -> list[Path]:
    """Left: gap (markers) and bound (thin line) against H, log-log. Right: cliff ratio against eps*H."""
    fig, axes = new_figure(ncols=2, width=3.6, height=2.8)
    ax = axes[0, 0]
    families = list(dict.fromkeys(r["family"] for r in results["rows"]))
    slope = {s["family"]: s for s in results["slopes"]}
    for i, fam in enumerate(families):
        rs = [r for r in results["rows"] if r["family"] == fam]
        st = series_style(i)
        H = [r["H"] for r in rs]
        ax.plot(H, [r["gap"] for r in rs], label=f"{fam} (slope {slope[fam]['gap_slope']:.2f})", **st)
        ax.plot(H, [r["bound"] for r in rs], color=st["color"], linewidth=0.6, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("horizon H (turns)")
    ax.set_ylabel(r"$|J - J_{\mathrm{train}}|$ (markers), bound (dotted)")
    ax.set_title(rf"gap vs $H$ at $\epsilon H \leq {results['config']['eps_H']:.2g}$")
    ax.legend(loc="upper left", frameon=False)
    ax = axes[0, 1]
    cr = results["cliff_ratios"]
    ax.plot([r["eps_H"] for r in cr], [r["ratio"] for r in cr], **series_style(0))
    ax.axhline(1.0, color="0.5", linewidth=0.7)
    ax.set_xscale("log")
    ax.set_xlabel(r"$\epsilon H$")
    ax.set_ylabel("cliff gap / Theorem 1 bound")
    ax.set_title("tightness of Theorem 1 (cliff)")
    return save_figure(fig, stem)
