"""Noisy-expert imitation: sample complexity on tabular MDPs, and the modular-addition students."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats

from shiftbounds.imitation import lock_continue_probability
from shiftbounds.utils.plotting import new_figure, save_figure, series_style


def plot_noisy_expert(results: dict, stem: Path) -> list[Path]:
    """Median episodes (log scale) against H with 95 % bootstrap bands, one panel per (family,
    eta): the fitted horizons shaded, the lock's ``q^{-(H-1)}`` shape dotted, and NAIL's crossover
    with BC as vertical lines (dashed: predicted from the fitted horizons; solid: measured), with
    the legend below the panels."""
    cfg = results["config"]
    fig, axes = new_figure(ncols=len(cfg["etas"]), nrows=len(cfg["families"]), width=2.6, height=2.4)
    H = np.array(cfg["horizons"], dtype=float)
    for family in cfg["families"]:
        for eta in cfg["etas"]:
            ax = axes[cfg["families"].index(family), cfg["etas"].index(eta)]
            ax.axvspan(H[0], cfg.get("fit_max_h", H[-1]), color="0.93", zorder=0, label="fitted horizons")
            for i, m in enumerate(cfg["methods"]):
                rs = [r for r in results["rows"] if r["family"] == family and r["eta"] == eta and r["method"] == m]
                x = np.array([r["H"] for r in rs], dtype=float)
                med, lo, hi = (np.array([float(r[k]) for r in rs]) for k in ("median_n", "ci_low", "ci_high"))
                med[~np.isfinite(med)] = np.nan
                hi = np.where(np.isfinite(hi), hi, cfg["budget"])
                style = series_style(i)
                ax.plot(x, med, label=m, **style)
                ok = np.isfinite(lo)
                ax.fill_between(x[ok], lo[ok], hi[ok], color=style["color"], alpha=0.15, linewidth=0)
            if family == "lock" and eta > 0:
                q = lock_continue_probability(eta, cfg["n_actions"])
                ax.plot(H, q ** -(H - 1.0), color="0.5", linestyle=":", linewidth=1, label=r"$q^{-(H-1)}$")
            for r in results.get("crossover", []):
                if r["family"] == family and r["eta"] == eta and r["online"] == "nail":
                    for key, ls, lab in (("predicted_H*", "--", "H* predicted (NAIL)"), ("measured_H*", "-", "H* measured (NAIL)")):
                        if np.isfinite(float(r[key])):
                            ax.axvline(float(r[key]), color="k", linestyle=ls, linewidth=0.8, label=lab)
            ax.axhline(cfg["budget"], color="0.6", linewidth=0.6, label="budget")
            ax.set_yscale("log")
            ax.set_ylim(0.7, 2.0 * cfg["budget"])  # the q^{-(H-1)} shape runs past the budget at high noise
            ax.set_xscale("log", base=2)
            ax.set_title(rf"{family}, $\eta$={eta}", fontsize=8)
            ax.set_xlabel("horizon H")
            ax.set_ylabel("episodes to target")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=min(5, len(seen)), frameon=False, fontsize=6)
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


def plot_modadd_curves(results: dict, stem: Path) -> list[Path]:
    """Greedy chain exact match on the held-out prompts against training steps, as in paper 2's
    Figure 1: one panel per (chain length, teacher signal, eta), one colour per method, the mean
    over seeds with a 95 % t-band (clipped to [0, 1]) and the solve threshold dashed. Needs the
    runs' curves (``--curve-every``)."""
    cfg = results["config"]
    runs = [r for r in results["runs"] if r.get("curve")]
    if not runs:
        raise ValueError("no run kept a curve: run with --curve-every > 0")
    panels = list(dict.fromkeys((r["m"], r["teacher_signal"], r["warm_start"], r["eta"]) for r in runs))
    fig, axes = new_figure(ncols=len(panels), width=2.6, height=2.4)
    for c, (m, sig, warm, eta) in enumerate(panels):
        ax = axes[0, c]
        for i, method in enumerate(cfg["methods"]):
            rs = [r for r in runs if (r["m"], r["teacher_signal"], r["warm_start"], r["eta"], r["method"]) == (m, sig, warm, eta, method)]
            if not rs:
                continue
            steps = np.array([p["step"] for p in rs[0]["curve"]], dtype=float)
            y = np.array([[p["chain_exact"] for p in r["curve"]] for r in rs])
            mean = y.mean(0)
            half = stats.t.ppf(0.975, len(rs) - 1) * y.std(0, ddof=1) / np.sqrt(len(rs)) if len(rs) > 1 else np.zeros_like(mean)
            style = series_style(i)
            ax.plot(steps, mean, label=f"{method} ({len(rs)} seeds)", **{**style, "markersize": 2})
            ax.fill_between(steps, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1), color=style["color"], alpha=0.15, linewidth=0)
        ax.axhline(cfg["solve_threshold"], color="0.5", linestyle="--", linewidth=0.7)
        ax.set_xlabel("training steps")
        ax.set_ylabel("chain-of-thought exact match")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"m={m}, eta={eta}, {sig} signal" + (f", warm {warm}" if warm else ""), fontsize=7)
    axes[0, 0].legend(frameon=False, fontsize=6)
    return save_figure(fig, stem)
