"""Figures of the tabular dialogue study, drawn from saved results (used by the experiment,
the notebooks and ``python -m paper_figures``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from matplotlib.ticker import MaxNLocator

from shiftbounds.utils.plotting import new_figure, save_figure, series_style

SHORT = {"static-myopic": "SM", "static-one-step": "S1", "interactive": "I",
         "calibrated-count": "Cc", "calibrated-shared": "Cs", "tie": "="}


def plot_per_turn(results: dict, stem: Path) -> list[Path]:
    """Per task: ``Delta_t`` with ``B(eps)_t`` for Static Context RL, and ``D_t`` with ``B(delta)_t``
    for the simulator-trained paradigms, at the main setting (first seed)."""
    tasks = list(results["main"])
    fig, axes = new_figure(ncols=2, nrows=len(tasks), width=3.5, height=2.5)
    for row, task in enumerate(tasks):
        per = results["main"][task]["per_seed"][0]
        ax = axes[row, 0]
        for i, name in enumerate(("static-myopic", "static-one-step")):
            st = series_style(i)
            t = np.arange(len(per[name]["Delta"]))
            ax.plot(t, per[name]["Delta"], label=rf"{name} $\Delta_t$", **st)
            ax.plot(t, per[name]["B_eps"], color=st["color"], linestyle=":", linewidth=1.0, label=rf"{name} $B(\epsilon)_t$")
        ax.set_title(f"{task}: policy shift (static)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("turn t")
        ax.set_ylabel("TV")
        ax.legend(frameon=False, fontsize=6)
        ax = axes[row, 1]
        for i, name in enumerate(("interactive", "calibrated-count", "calibrated-shared")):
            st = series_style(i + 2)
            t = np.arange(len(per[name]["D"]))
            ax.plot(t, per[name]["D"], label=rf"{name} $D_t$", **st)
            ax.plot(t, per[name]["B_delta"], color=st["color"], linestyle=":", linewidth=1.0, label=rf"{name} $B(\delta)_t$")
        ax.set_title(f"{task}: simulator shift")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("turn t")
        ax.set_ylabel("TV")
        ax.legend(frameon=False, fontsize=6)
    return save_figure(fig, stem)


def plot_regime_map(results: dict, stem: Path) -> list[Path]:
    """For each task (rows) and log size ``n`` (columns), at the main horizon and real user: shade =
    ``J_real`` of Calibrated Interactive RL (shared model) minus that of Interactive RL, against the
    prompted simulator's sycophancy (x) and leak rate (y). Cell text: the leader (``~`` when its
    lead is not significant) and its margin over the runner-up."""
    cfg = results["config"]
    tasks, ns = list(cfg["tasks"]), list(cfg["n_logs"])
    aw, lk = list(cfg["accept_wrong_grid"]), list(cfg["leak_grid"])
    H, user = cfg["horizon"], cfg["real_user"]
    cells = [c for c in results["regimes"] if c["H"] == H and c["real_user"] == user]
    fig, axes = new_figure(ncols=len(ns), nrows=len(tasks), width=2.8, height=2.3)
    vals = [abs(c["calibrated_minus_interactive"]) for c in cells]
    vmax = max([0.01] + vals)
    for r, task in enumerate(tasks):
        for c, n in enumerate(ns):
            ax = axes[r, c]
            grid = np.full((len(lk), len(aw)), np.nan)
            labels = [["" for _ in aw] for _ in lk]
            for cell in cells:
                if cell["task"] != task or cell["n"] != n:
                    continue
                i, j = lk.index(cell["leak"]), aw.index(cell["accept_wrong"])
                grid[i, j] = cell["calibrated_minus_interactive"]
                lead = SHORT[cell["leader"]] if cell["winner"] == "tie" else SHORT[cell["winner"]]
                labels[i][j] = ("~" if cell["winner"] == "tie" else "") + f"{lead}\n{cell['margin']:.2f}"
            im = ax.imshow(grid, origin="lower", cmap="Greys", vmin=-vmax, vmax=vmax, aspect="auto")
            for i in range(len(lk)):
                for j in range(len(aw)):
                    val = grid[i, j]
                    ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=6,
                            color="white" if np.nan_to_num(val) > 0.5 * vmax else "black")
            ax.set_xticks(range(len(aw)), [f"{v:g}" for v in aw])
            ax.set_yticks(range(len(lk)), [f"{v:g}" for v in lk])
            ax.set_xlabel("simulator accept-wrong rate")
            ax.set_ylabel("leak rate")
            ax.set_title(f"{task}  n={n}  H={H}  {user} user", fontsize=8)
            ax.grid(False)
    fig.colorbar(im, ax=axes, shrink=0.6, label=r"$J_{real}$(Calibrated-shared) $-$ $J_{real}$(Interactive)")
    return save_figure(fig, stem)


def plot_sycophancy(results: dict, stem: Path) -> list[Path]:
    """Accept-wrong, leak and clarification rates of the real user, the prompted simulator and
    the shared-parameter calibrated simulator (mean over seeds) for each task."""
    tasks = list(results["main"])
    fig, axes = new_figure(ncols=len(tasks), width=3.2, height=2.4)
    metrics = ("accept_wrong", "leak", "clarify")
    for k, task in enumerate(tasks):
        ax = axes[0, k]
        models = results["main"][task]["user_models"]
        names = list(models)
        x = np.arange(len(metrics))
        w = 0.8 / len(names)
        for i, name in enumerate(names):
            vals = [float(np.mean(models[name][m])) for m in metrics]
            ax.bar(x + i * w, vals, w, label=name, color=series_style(i)["color"], hatch=("", "//", "..")[i % 3],
                   edgecolor="black", linewidth=0.4)
        ax.set_xticks(x + w * (len(names) - 1) / 2, metrics)
        ax.set_ylabel("rate")
        ax.set_title(f"{task}: user models")
        ax.legend(frameon=False)
    return save_figure(fig, stem)
