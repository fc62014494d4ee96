"""Noisy-expert imitation: sample complexity on tabular MDPs, and the modular-addition students."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shiftbounds.imitation import lock_continue_probability
from shiftbounds.utils.plotting import new_figure, save_figure, series_style


def plot_noisy_expert(results: dict, stem: Path) -> list[Path]:
    """Median episodes (log scale) against H, one panel per (family, eta), with the lock's
    ``q^{-(H-1)}`` shape overlaid where it applies."""
    cfg = results["config"]
    fig, axes = new_figure(ncols=len(cfg["etas"]), nrows=len(cfg["families"]), width=2.7, height=2.4)
    for family in cfg["families"]:
        for eta in cfg["etas"]:
            ax = axes[cfg["families"].index(family), cfg["etas"].index(eta)]
            for i, m in enumerate(cfg["methods"]):
                rs = [r for r in results["rows"] if r["family"] == family and r["eta"] == eta and r["method"] == m]
                med = [float(r["median_n"]) if np.isfinite(float(r["median_n"])) else np.nan for r in rs]
                ax.plot([r["H"] for r in rs], med, label=m, **series_style(i))
            if family == "lock" and eta > 0:
                q = lock_continue_probability(eta, cfg["n_actions"])
                H = np.array(cfg["horizons"])
                ax.plot(H, q ** -(H - 1.0), color="0.5", linestyle=":", linewidth=1, label=r"$q^{-(H-1)}$")
            ax.set_yscale("log")
            ax.set_title(rf"{family}, $\eta$={eta}", fontsize=8)
            ax.set_xlabel("horizon H")
            ax.set_ylabel("episodes to target")
    axes[0, -1].legend(frameon=False, fontsize=5.5, loc="upper left")
    return save_figure(fig, stem)


def plot_modadd(results: dict, stem: Path) -> list[Path]:
    """Chain-of-thought exact match against the chain length ``m``, one panel per (teacher signal,
    warm start), one colour per method: solid at the largest ``eta`` with 95 % CIs over seeds,
    dotted at ``eta = 0`` (when run)."""
    cfg = results["config"]
    rows = results["rows"]
    cells = list(dict.fromkeys((r["teacher_signal"], r["warm_start"]) for r in rows))
    fig, axes = new_figure(ncols=len(cells), width=3.0, height=2.6)
    top = max(cfg["etas"])
    for c, (sig, warm) in enumerate(cells):
        ax = axes[0, c]
        for i, method in enumerate(cfg["methods"]):
            for eta, dotted in ((top, False), (0.0, True)):
                rs = sorted((r for r in rows if r["method"] == method and r["eta"] == eta and r["teacher_signal"] == sig
                             and r["warm_start"] == warm), key=lambda r: r["m"])
                if not rs or (dotted and top == 0.0):
                    continue
                x = np.array([r["m"] for r in rs], dtype=float)
                y = np.array([r["chain_exact"] for r in rs])
                ci = np.array([[float(v) for v in r["chain_ci"].strip("[]").split(",")] for r in rs])
                style = series_style(i)
                if dotted:
                    ax.plot(x, y, **{**style, "linestyle": ":", "markersize": 3, "alpha": 0.6})
                else:
                    ax.errorbar(x, y, yerr=np.abs(ci.T - y), capsize=2, label=method, **style)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("chain length m")
        ax.set_ylabel("chain-of-thought exact match")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"{sig} signal, warm start {warm}; eta={top} (dotted: 0)", fontsize=7)
    axes[0, 0].legend(frameon=False, fontsize=6)
    return save_figure(fig, stem)
