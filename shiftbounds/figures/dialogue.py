"""The dialogue studies: the exact regime map (``experiments.dialogue_regimes``) and the neural
main job (``experiments.full_pipeline``), each drawn from its ``results.json``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shiftbounds.dialogue.neural.measures import USER_RATES
from shiftbounds.figures.common import grouped_bars, shifts_against_bounds
from shiftbounds.utils.plotting import new_figure, save_figure, series_style
from shiftbounds.utils.stats import mean_ci

SHORT = {"static-myopic": "SM", "static-one-step": "S1", "static-fitted-q": "SQ", "interactive": "I",
         "calibrated-count": "Cc", "calibrated-shared": "Cs", "tie": "="}


# ---------------------------------------------------------------------------- exact regime study
def plot_regime_per_turn(results: dict, stem: Path) -> list[Path]:
    """Per task: ``Delta_t`` with ``B(eps)_t`` for Static Context RL, and ``D_t`` with ``B(delta)_t``
    for the simulator-trained paradigms, at the main setting (first seed)."""
    tasks = list(results["main"])
    fig, axes = new_figure(ncols=2, nrows=len(tasks), width=3.5, height=2.5)
    for row, task in enumerate(tasks):
        per = results["main"][task]["per_seed"][0]
        shifts_against_bounds(axes[row, 0], [(n, per[n]["Delta"], per[n]["B_eps"]) for n in ("static-myopic", "static-one-step", "static-fitted-q")],
                              shift=r"\Delta_t", bound=r"B(\epsilon)_t")
        axes[row, 0].set_title(f"{task}: policy shift (static)")
        names = ("interactive", "calibrated-count", "calibrated-shared")
        shifts_against_bounds(axes[row, 1], [(n, per[n]["D"], per[n]["B_delta"]) for n in names],
                              shift="D_t", bound=r"B(\delta)_t", first_style=2)
        axes[row, 1].set_title(f"{task}: simulator shift")
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
    vmax = max([0.01] + [abs(c["calibrated_minus_interactive"]) for c in cells])
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
                tie = cell["winner"] == "tie"
                labels[i][j] = ("~" if tie else "") + f"{SHORT[cell['leader'] if tie else cell['winner']]}\n{cell['margin']:.2f}"
            im = ax.imshow(grid, origin="lower", cmap="Greys", vmin=-vmax, vmax=vmax, aspect="auto")
            for i in range(len(lk)):
                for j in range(len(aw)):
                    ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=6,
                            color="white" if np.nan_to_num(grid[i, j]) > 0.5 * vmax else "black")
            ax.set_xticks(range(len(aw)), [f"{v:g}" for v in aw])
            ax.set_yticks(range(len(lk)), [f"{v:g}" for v in lk])
            ax.set_xlabel("simulator accept-wrong rate")
            ax.set_ylabel("leak rate")
            ax.set_title(f"{task}  n={n}  H={H}  {user} user", fontsize=8)
            ax.grid(False)
    fig.colorbar(im, ax=axes, shrink=0.6, label=r"$J_{real}$(Calibrated-shared) $-$ $J_{real}$(Interactive)")
    return save_figure(fig, stem)


def plot_regime_user_models(results: dict, stem: Path) -> list[Path]:
    """Accept-wrong, leak and clarification rates of the real user, the prompted simulator and the
    shared-parameter calibrated simulator (mean over seeds) for each task."""
    tasks = list(results["main"])
    metrics = ("accept_wrong", "leak", "clarify")
    fig, axes = new_figure(ncols=len(tasks), width=3.2, height=2.4)
    for k, task in enumerate(tasks):
        models = results["main"][task]["user_models"]
        grouped_bars(axes[0, k], list(models), metrics, [[float(np.mean(m[x])) for x in metrics] for m in models.values()])
        axes[0, k].set_title(f"{task}: user models")
        axes[0, k].legend(frameon=False)
    return save_figure(fig, stem)


# ---------------------------------------------------------------------------- neural main job
def _arms(results: dict) -> list[str]:
    return list(dict.fromkeys(c["paradigm"] for c in results["curves"]))


def plot_pipeline_curves(results: dict, stem: Path) -> list[Path]:
    """Per task, ``J_real`` (top) and each arm's training return ``J_sim`` (bottom) against agent
    tokens: the mean over seeds with its 95 % t-band, the exact references of the main table
    (real-user optimum, ``pi_data``, the Interactive-RL optimum) as grey lines on top, the exact
    optimum of each simulator's return (where the engine computes one) as dashed lines below, and
    the legend below the panels."""
    tasks, curves = results["config"]["tasks"], results["curves"]
    fig, axes = new_figure(ncols=len(tasks), nrows=2, width=3.4, height=2.4)
    ref_styles = ("-", "--", "-.", ":")
    for j, task in enumerate(tasks):
        for i, paradigm in enumerate(_arms(results)):
            rows = [c for c in curves if c["task"] == task and c["paradigm"] == paradigm]
            steps = sorted({c["agent_tokens"] for c in rows})
            st = series_style(i)
            for ax, key, label in ((axes[0, j], "J_real", paradigm), (axes[1, j], "J_sim", None)):
                if not rows or rows[0][key] is None:
                    continue
                est = [mean_ci(np.array([c[key] for c in rows if c["agent_tokens"] == s])) for s in steps]
                ax.plot(steps, [e.value for e in est], label=label, **st)
                ax.fill_between(steps, [e.low for e in est], [e.high for e in est], color=st["color"], alpha=0.15, linewidth=0)
        refs = [r for r in results["main"] if r["task"] == task and r["paradigm"].endswith("(exact)")]
        for k, r in enumerate(refs):
            axes[0, j].axhline(r["J_real"], color="0.4", linewidth=0.8, linestyle=ref_styles[k % len(ref_styles)], label=r["paradigm"])
        for r in results.get("optimisation", []):
            if r["task"] == task and r["objective"] == "J_sim":
                i = list(_arms(results)).index(r["paradigm"])
                axes[1, j].axhline(r["exact_optimum"], color=series_style(i)["color"], linewidth=0.8, linestyle="--",
                                   label=f"{r['paradigm']}: exact optimum of its J_sim")
        axes[0, j].set_title(task)
        axes[0, j].set_ylabel("J_real (judge, real user)")
        axes[1, j].set_ylabel("J_sim (training user)")
        axes[1, j].set_xlabel("agent tokens generated")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    extra = [(h, lab) for h, lab in zip(*axes[1, 0].get_legend_handles_labels()) if "exact optimum" in lab]
    fig.legend(handles + [h for h, _ in extra], labels + [lab for _, lab in extra], loc="outside lower center", ncol=4,
               frameon=False, fontsize=6)
    return save_figure(fig, stem)


def plot_compounding_sweep(results: dict, stem: Path) -> list[Path]:
    """Per task, every arm's training-to-real gap against ``H`` (solid, mean with 95 % t-band over
    seeds) with its bound (dashed, same colour): Theorem 1 for the Static Context RL arms (left),
    Theorem 2 for the simulator-trained arms (right); the exact end points in grey."""
    tasks = list(dict.fromkeys(r["task"] for r in results["sweep"]))
    fig, axes = new_figure(ncols=2, nrows=len(tasks), width=3.4, height=2.6)
    for j, task in enumerate(tasks):
        for col, theorem in enumerate(("theorem 1", "theorem 2")):
            ax = axes[j, col]
            rows = [r for r in results["sweep"] if r["task"] == task and r["theorem"] == theorem]
            for i, arm in enumerate(dict.fromkeys(r["paradigm"] for r in rows)):
                rs = [r for r in rows if r["paradigm"] == arm]
                H = [r["H"] for r in rs]
                st = series_style(i + 3 * col)
                ax.plot(H, [r["gap"] for r in rs], label=f"{arm}: gap", **st)
                ax.fill_between(H, [r["gap_low"] for r in rs], [r["gap_high"] for r in rs], color=st["color"], alpha=0.15, linewidth=0)
                ax.plot(H, [r["bound"] for r in rs], color=st["color"], linestyle="--", linewidth=1.0, label=f"{arm}: bound")
            for k, arm in enumerate(dict.fromkeys(r["paradigm"] for r in results["exact"] if r["theorem"] == theorem)):
                rs = [r for r in results["exact"] if r["task"] == task and r["paradigm"] == arm]
                ax.plot([r["H"] for r in rs], [r["gap"] for r in rs], color="0.4", marker="x", linewidth=0.8, label=f"{arm}: gap")
                ax.plot([r["H"] for r in rs], [r["bound"] for r in rs], color="0.4", linestyle=":", linewidth=0.8, label=f"{arm}: bound")
            ax.set_xlabel("agent turns H")
            ax.set_ylabel("J_train - J_real")
            ax.set_title(f"{task}\n{theorem} ({'logs-only arms' if col == 0 else 'simulator arms'})", fontsize=8)
            ax.legend(frameon=False, fontsize=5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, stem)


def plot_pipeline_shifts(results: dict, stem: Path) -> list[Path]:
    """Per task: estimated ``Delta_t`` with ``B(eps)_t`` (Static Context RL, myopic) and ``D_t`` with
    ``B(delta)_t`` (Interactive and Calibrated Interactive RL), from the estimated per-turn errors."""
    tasks, per_turn = results["config"]["tasks"], results["per_turn"]
    fig, axes = new_figure(ncols=2, nrows=len(tasks), width=3.4, height=2.5)
    for j, task in enumerate(tasks):
        rows = lambda p: [r for r in per_turn if r["task"] == task and r["paradigm"] == p]  # noqa: E731
        col = lambda p, k: [r[k] for r in rows(p)]  # noqa: E731
        shifts_against_bounds(axes[j, 0], [("static_myopic", col("static_myopic", "Delta"), col("static_myopic", "B_eps"))],
                              shift=r"\Delta_t", bound=r"B(\epsilon)_t")
        axes[j, 0].set_title(f"{task}: policy shift (estimated)")
        shifts_against_bounds(axes[j, 1], [(p, col(p, "D"), col(p, "B_delta")) for p in ("interactive", "calibrated")],
                              shift="D_t", bound=r"B(\delta)_t", first_style=2)
        axes[j, 1].set_title(f"{task}: simulator shift (estimated)")
    return save_figure(fig, stem)


def plot_pipeline_user_models(results: dict, stem: Path) -> list[Path]:
    """Each user model's rates (:data:`~shiftbounds.dialogue.neural.measures.USER_RATES`) at held-out logged histories."""
    tasks, sims = results["config"]["tasks"], results["simulators"]
    fig, axes = new_figure(ncols=len(tasks), width=4.8, height=2.6)
    for j, task in enumerate(tasks):
        rows = [s for s in sims if s["task"] == task]
        grouped_bars(axes[0, j], [r["user_model"] for r in rows], USER_RATES, [[float(r[k]) for k in USER_RATES] for r in rows])
        axes[0, j].set_title(task)
    axes[0, 0].legend(frameon=False, fontsize=6)
    return save_figure(fig, stem)


def plot_log_size(exact: list[dict], learned: list[dict], stem: Path) -> list[Path]:
    """Per task (rows) and comparison (columns: against Interactive RL, against the best logs-only
    arm), each calibrated arm's paired ``J_real`` difference against the log size: the exact engine's
    prediction (mean with 95 % band over log draws) and the learned agents (mean with 95 % interval
    over seeds, markers)."""
    tasks = list(dict.fromkeys(r["task"] for r in exact + learned))
    fig, axes = new_figure(ncols=2, nrows=len(tasks), width=3.4, height=2.6)
    for j, task in enumerate(tasks):
        for col, against in enumerate(("interactive", "best logs-only")):
            ax = axes[j, col]
            for i, (rows, kind) in enumerate(((exact, "exact"), (learned, "learned"))):
                sel = [r for r in rows if r["task"] == task and r["against"].startswith(against)]
                for k, cal in enumerate(dict.fromkeys(r["calibrated"] for r in sel)):
                    rs = sorted((r for r in sel if r["calibrated"] == cal), key=lambda r: r["n_logs"])
                    n, m = [r["n_logs"] for r in rs], [r["mean"] for r in rs]
                    st = series_style(2 * i + k)
                    if kind == "exact":
                        ax.plot(n, m, label=f"{cal} (exact)", **st)
                        ax.fill_between(n, [r["low"] for r in rs], [r["high"] for r in rs], color=st["color"], alpha=0.15, linewidth=0)
                    else:
                        ax.errorbar(n, m, yerr=[np.subtract(m, [r["low"] for r in rs]), np.subtract([r["high"] for r in rs], m)],
                                    fmt="o", color=st["color"], capsize=2, markersize=3, label=f"{cal} (learned)")
            ax.axhline(0.0, color="0.5", linewidth=0.6)
            ax.set_xscale("log")
            ax.set_xlabel("logged dialogues")
            ax.set_ylabel("J_real difference")
            ax.set_title(f"{task}: calibrated - {against}", fontsize=8)
            ax.legend(frameon=False, fontsize=5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, stem)


def plot_learner_gaps(results: dict, stem: Path) -> list[Path]:
    """``experiments.learner_study``: per task (columns), top: the median over seeds of each
    exact-optimum arm's gap to its objective's optimum per tried configuration (bars: smallest to
    largest seed; dashed: the 0.03 target); bottom: every arm's ``J_real`` per configuration."""
    rows = results["rows"]
    variants = list(results["variants"])
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = new_figure(ncols=len(tasks), nrows=2, width=3.6, height=2.4)
    x = np.arange(len(variants))
    for col, task in enumerate(tasks):
        gap_ax, j_ax = axes[0, col], axes[1, col]
        arms = list(dict.fromkeys(r["arm"] for r in rows if r["task"] == task))
        for i, arm in enumerate(arms):
            by = {r["variant"]: r for r in rows if r["task"] == task and r["arm"] == arm}
            style = series_style(i)
            j_ax.plot(x, [by[v]["J_real"] for v in variants], marker=style["marker"], linestyle=style["linestyle"],
                      color=style["color"], ms=3, lw=0.8, label=arm)
            if "gap_median" in by[variants[0]]:
                med = np.array([by[v]["gap_median"] for v in variants])
                top = np.array([by[v]["gap_max"] for v in variants])
                gap_ax.errorbar(x + 0.1 * (i - 1), med, yerr=[np.zeros_like(med), top - med], fmt=style["marker"], color=style["color"],
                                ms=3, lw=0.8, capsize=2, label=arm)
        gap_ax.axhline(0.03, color="0.5", lw=0.8, ls="--")
        gap_ax.axhline(0.0, color="0.7", lw=0.6)
        gap_ax.set_title(task)
        gap_ax.set_ylabel("gap to exact optimum (median)")
        j_ax.set_ylabel("J_real (mean over seeds)")
        for ax in (gap_ax, j_ax):
            ax.set_xticks(x, variants, rotation=60, ha="right", fontsize=5)
        gap_ax.legend(frameon=False, fontsize=5)
    axes[1, -1].legend(frameon=False, fontsize=5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, stem)


def plot_gap_split(results: dict, stem: Path) -> list[Path]:
    """``experiments.learner_study``'s exact split: one panel per (task, exact-optimum arm), per tried
    configuration the mean over seeds of the gap to the unregularised optimum as a stack of the KL
    regularisation's cost (lower) and the optimisation error (upper; below 0 where the learner beat
    the soft optimum's objective), the median gap as a tick, the 0.03 target dashed."""
    split = results["split"]
    variants = list(results["variants"])
    tasks = list(dict.fromkeys(r["task"] for r in split))
    arms = list(dict.fromkeys(r["arm"] for r in split))
    fig, axes = new_figure(ncols=len(arms), nrows=len(tasks), width=2.6, height=2.3)
    x = np.arange(len(variants))
    for row, task in enumerate(tasks):
        axes[row, 0].set_ylabel("gap to the optimum (mean)")
    for (row, task), (col, arm) in ((t, a) for t in enumerate(tasks) for a in enumerate(arms)):
        ax = axes[row, col]
        by = {r["variant"]: r for r in split if (r["task"], r["arm"]) == (task, arm)}
        reg = np.array([by[v]["regularisation_cost_mean"] for v in variants])
        opt = np.array([by[v]["optimisation_error_mean"] for v in variants])
        ax.bar(x, reg, color=series_style(0)["color"], label="regularisation cost")
        ax.bar(x, opt, bottom=reg, color=series_style(1)["color"], label="optimisation error")
        ax.plot(x, [by[v]["gap_median"] for v in variants], "k_", ms=6, label="gap (median)")
        ax.axhline(0.03, color="0.5", lw=0.8, ls="--")
        ax.set_ylim(bottom=min(0.0, float((reg + np.minimum(opt, 0)).min())))
        ax.set_title(f"{task}: {arm}", fontsize=7)
        ax.set_xticks(x, variants, rotation=60, ha="right", fontsize=5)
    axes[0, -1].legend(frameon=False, fontsize=5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, stem)


def plot_variance_components(results: dict, stem: Path) -> list[Path]:
    """``experiments.variance_study``: left, each level's share of the variance of Calibrated -
    Interactive RL (bars; 95 % interval from resampling the draws); right, every unit's difference
    by log draw (points: one per fit and RL seed, coloured by fit)."""
    comps, units = results["components"], results["units"]
    fig, axes = new_figure(ncols=2, width=3.2, height=2.4)
    share, spread = axes[0]
    x = np.arange(len(comps))
    val = np.array([c["share"] for c in comps])
    share.bar(x, val, color="0.6", yerr=[val - [c["share_low"] for c in comps], [c["share_high"] for c in comps] - val], capsize=3)
    share.set_xticks(x, [c["level"] for c in comps], fontsize=6)
    share.set_ylabel("share of the variance")
    share.set_ylim(0, 1)
    for j in sorted({u["fit"] for u in units}):
        style = series_style(j)
        pts = [u for u in units if u["fit"] == j]
        spread.plot([u["draw"] + 0.1 * (j - 1) for u in pts], [u["difference"] for u in pts], style["marker"], color=style["color"],
                    ms=3, label=f"fit {j}")
    spread.axhline(0.0, color="0.6", lw=0.8, ls=":")
    spread.set_xlabel("log draw")
    spread.set_ylabel("J_real: calibrated - interactive")
    spread.legend(frameon=False, fontsize=5)
    return save_figure(fig, stem)
