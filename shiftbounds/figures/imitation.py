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
    """Left: chain exact match against eta per method; right: final-answer exact match."""
    cfg = results["config"]
    fig, axes = new_figure(ncols=2, width=3.3, height=2.6)
    for j, key in enumerate(("chain_exact", "answer_exact")):
        ax = axes[0, j]
        for i, m in enumerate(cfg["methods"]):
            rs = [r for r in results["rows"] if r["method"] == m]
            ax.plot([r["eta"] for r in rs], [r[key] for r in rs], label=m, **series_style(i))
        ax.set_xlabel(r"teacher noise $\eta$")
        ax.set_ylabel("chain-of-thought exact match" if j == 0 else "final-answer exact match")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"p={cfg['p']}, m={cfg['m']}, {cfg['law']} law", fontsize=8)
    axes[0, 0].legend(frameon=False, fontsize=6)
    return save_figure(fig, stem)
