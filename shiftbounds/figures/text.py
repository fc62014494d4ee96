"""The text path on Taskmaster (``experiments.real_dialogue``): realism by turn, sycophancy probes,
goal success of the paradigms and their training curves."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from shiftbounds.figures.common import grouped_bars
from shiftbounds.utils.plotting import new_figure, save_figure, series_style


def _errorbar(ax, xs, estimates, i, label):
    ax.errorbar(xs, [e["value"] for e in estimates], capsize=2, label=label,
                yerr=[[e["value"] - e["low"] for e in estimates], [e["high"] - e["value"] for e in estimates]], **series_style(i))


def plot_text_realism(results: dict, stem: Path) -> list[Path]:
    """Left: NLL per token of held-out human user turns by Taskmaster-3 user turn, per user model;
    right: each simulator's real-vs-simulated discriminator AUC by user turn, 95 % intervals (0.5
    dotted: indistinguishable)."""
    fig, axes = new_figure(ncols=2, width=3.8, height=2.6)
    left, right = axes[0]
    for i, (name, r) in enumerate(results["realism"]["tm3"].items()):
        _errorbar(left, list(r["by_turn"]), list(r["by_turn"].values()), i, name)
    for i, (name, d) in enumerate(results["discriminator"].items()):
        _errorbar(right, list(d["by_turn"]), list(d["by_turn"].values()), i, name)
    left.set_ylabel("NLL per token, human user turns")
    right.set_ylabel("discriminator AUC")
    right.set_title("real vs simulated user turns", fontsize=7)
    for ax in (left, right):
        ax.set_xlabel("user turn (Taskmaster-3)")
        ax.legend(frameon=False, fontsize=6)
    right.axhline(0.5, color="0.6", lw=0.8, ls=":")
    return save_figure(fig, stem)


def plot_text_sycophancy(results: dict, stem: Path) -> list[Path]:
    """Per user model (and the logged people): shares of replies accepting the right order and an
    order with one drink swapped, and of opening turns naming the whole goal (Taskmaster-4);
    ``n/a`` where it cannot be measured (people were never shown a wrong order)."""
    syc = results["sycophancy"]
    metrics = ("accept_right", "accept_wrong", "goal_disclosure")
    labels = ("accepts right order", "accepts wrong order", "opening names whole goal")
    fig, axes = new_figure(width=5.0, height=2.6)
    ax = axes[0, 0]
    names = list(syc)
    values = [[np.nan if syc[n][k] is None else syc[n][k]["value"] for k in metrics] for n in names]
    grouped_bars(ax, names, metrics, values, labels=labels)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if np.isnan(v):
                ax.text(j + 0.8 / len(names) * i, 0.02, "n/a", ha="center", va="bottom", fontsize=5, rotation=90)
    ax.set_ylabel("share of replies")
    ax.set_ylim(0, 1.05)
    ax.legend(frameon=False, fontsize=6)
    return save_figure(fig, stem)


def plot_paradigm_success(results: dict, stem: Path) -> list[Path]:
    """Goal success of the SFT agent and every RL arm against each evaluation user: the mean over
    seeds (bars) and each seed (dots)."""
    users = results["evaluation_users"]
    arms = [row["arm"] for row in results["table"]]
    fig, axes = new_figure(width=5.0, height=2.6)
    ax = axes[0, 0]
    values = [[row[u] for u in users] for row in results["table"]]
    grouped_bars(ax, arms, users, values, labels=[textwrap.fill(u, 24) for u in users])
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        for j, u in enumerate(users):
            seeds = [r["success"] for r in results["runs"] if r["arm"] == arm and r["user"] == u]
            ax.plot([j + width * i] * len(seeds), seeds, "o", ms=2, mfc="white", mec="black", mew=0.4)  # apart from any hatch
    ax.set_ylabel("goal success (held-out goals)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside upper center", ncol=len(arms), frameon=False, fontsize=6)  # off the bars
    return save_figure(fig, stem)


def plot_paired_differences(results: dict, stem: Path) -> list[Path]:
    """Every paired comparison against each evaluation user (``results["paired"]``): the mean
    difference in goal success over seeds with its 95 % interval, one row per comparison and one
    marker per evaluation user; filled where an ordering survives Holm's correction over that
    user's comparisons, hollow where it does not."""
    users = results["evaluation_users"]
    rows = [p for p in results["paired"] if p["evaluation user"] in users]
    differences = list(dict.fromkeys(p["difference"] for p in rows))
    fig, axes = new_figure(width=5.0, height=0.9 + 0.32 * len(differences))
    ax = axes[0, 0]
    step = 0.7 / max(len(users), 1)
    for j, user in enumerate(users):
        style = series_style(j)
        ax.plot([], [], style["marker"], color=style["color"], ms=3, label=user)  # the legend's marker, filled
        for p in (p for p in rows if p["evaluation user"] == user):
            y = differences.index(p["difference"]) + step * (j - (len(users) - 1) / 2)
            kept = p["holm verdict"] != "not significant"
            ax.errorbar(p["mean"], y, xerr=[[p["mean"] - p["low"]], [p["high"] - p["mean"]]], fmt=style["marker"],
                        color=style["color"], mfc=style["color"] if kept else "white", ms=3, elinewidth=0.8, capsize=1.5)
    ax.axvline(0.0, color="0.5", linewidth=0.6, linestyle=":")
    ax.set_yticks(range(len(differences)), differences, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("paired difference in goal success, 95 % CI\n(filled: an ordering kept by Holm)", fontsize=7)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside upper center", ncol=2, frameon=False, fontsize=6)
    return save_figure(fig, stem)


def plot_training_curves(results: dict, stem: Path) -> list[Path]:
    """Goal success per GRPO step against each arm's own training signal (the simulator's dialogues,
    or the logged contexts of Static Context RL), one panel per arm: every seed (thin) and the mean
    over seeds (bold); where measured (``checkpoint_curves``), the greedy agent's success against its
    training simulator at the checkpoints, mean over seeds (red markers), and against each
    evaluation user the checkpoints also met (blue)."""
    curves, checkpoints = results["training_curves"], results.get("checkpoint_curves", {})
    arms = list(dict.fromkeys(k.rsplit(" seed ", 1)[0] for k in curves))
    entries = 1 + bool(checkpoints) + max((len(c) - 2 for c in checkpoints.values()), default=0)  # legend lines
    fig, axes = new_figure(ncols=max(len(arms), 1), width=max(2.4, 4.0 / max(len(arms), 1)), height=2.2 + 0.18 * entries)
    for ax, arm in zip(axes[0], arms):
        runs = [np.asarray(v, dtype=float) for k, v in curves.items() if k.rsplit(" seed ", 1)[0] == arm]
        n = min(len(r) for r in runs)
        for r in runs:
            ax.plot(np.arange(1, len(r) + 1), r, color="0.7", linewidth=0.5)
        ax.plot(np.arange(1, n + 1), np.mean([r[:n] for r in runs], axis=0), color="k", linewidth=1.2,
                label="rollouts, mean over seeds")
        marks = [c for k, c in checkpoints.items() if k.rsplit(" seed ", 1)[0] == arm]
        if marks and all(c["steps"] == marks[0]["steps"] for c in marks):
            ax.plot(marks[0]["steps"], np.mean([c["success"] for c in marks], axis=0), "o-", color="tab:red", markersize=3,
                    linewidth=0.8, label="greedy agent vs its training simulator")
            for user, style in zip([k for k in marks[0] if k not in ("steps", "success")], ("s--", "^:", "v-.", "D--")):
                ax.plot(marks[0]["steps"], np.mean([c[user] for c in marks], axis=0), style, color="tab:blue", markersize=3,
                        linewidth=0.8, label=f"greedy agent vs {user}")
        ax.set_title(arm, fontsize=8)
        ax.set_xlabel("GRPO step")
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("goal success in training")
    legend = {label: h for ax in axes[0] for h, label in zip(*ax.get_legend_handles_labels())}  # every arm's lines, once
    fig.legend(legend.values(), legend.keys(), loc="outside lower center", ncol=1, frameon=False, fontsize=6)
    return save_figure(fig, stem)


def plot_simulator_report(report: dict, stem: Path) -> list[Path]:
    """The ``shiftbounds measure`` report, titled with the simulator's folder and kind: NLL of the
    people's user turns by turn; the discriminator's AUC by turn (when measured; 0.5 dotted); and,
    with probes, the people's and the simulator's shares of replies accepting a right and a wrong
    confirmation and of openings that state the whole goal or agree with it, and how their replies
    to right and to wrong confirmations split into accept / reject / unclear (95 % intervals)."""
    syc = report.get("sycophancy")
    panels = ["nll"] + (["auc"] if "discriminator_auc" in report else []) + (["syc", "replies"] if syc else [])
    fig, axes = new_figure(ncols=len(panels), width=3.2, height=2.6)
    cfg = report.get("config", {})
    fig.suptitle(f"Simulator {cfg.get('simulator', '?')} ({report.get('simulator_kind', 'simulator')}) on {cfg.get('logs', '?')}",
                 fontsize=8)
    for ax, panel in zip(axes[0], panels):
        if panel in ("nll", "auc"):
            d = report["nll_by_turn"] if panel == "nll" else report["discriminator_auc"]
            _errorbar(ax, list(d["by_turn"]), list(d["by_turn"].values()), 0, "simulator")
            ax.set_xlabel("user turn")
            ax.set_ylabel("NLL per token, people's turns" if panel == "nll" else "discriminator AUC")
            if panel == "auc":
                ax.axhline(0.5, color="0.5", linestyle=":", linewidth=1)
            continue
        if panel == "syc":
            metrics = ("accept_right", "accept_wrong", "goal_disclosure", "goal_consistency")
            labels = ("accepts right", "accepts wrong", "names whole goal", "agrees with goal")
        else:
            metrics = tuple(f"{side}:{kind}" for side in ("right", "wrong") for kind in ("accept", "reject", "unclear"))
            labels = tuple(f"{side}: {kind}" for side in ("right", "wrong") for kind in ("accept", "reject", "unclear"))
        names = list(syc)
        est = [[_reply_share(syc[n], k) for k in metrics] for n in names]
        _bars_with_intervals(ax, names, metrics, est, labels)
        ax.set_ylabel("share" if panel == "syc" else "share of replies to confirmations")
        if panel == "replies":
            ax.tick_params(axis="x", labelrotation=45)
    return save_figure(fig, stem)


def _reply_share(side: dict, key: str) -> dict | None:
    """A sycophancy report's estimate ``key``, or for ``"right:accept"`` its reply split's share."""
    if ":" not in key:
        return side.get(key)
    which, kind = key.split(":")
    return (side.get(f"replies_{which}") or {}).get(kind)


def _bars_with_intervals(ax, names: list[str], metrics: tuple[str, ...], est: list[list[dict | None]], labels: tuple[str, ...]) -> None:
    grouped_bars(ax, names, metrics, [[np.nan if e is None else e["value"] for e in row] for row in est], labels=labels)
    w = 0.8 / len(names)
    for i, row in enumerate(est):
        for j, e in enumerate(row):
            if e is not None:
                ax.errorbar(j + w * i, e["value"], yerr=[[e["value"] - e["low"]], [e["high"] - e["value"]]], color="k",
                            capsize=1.5, linewidth=0.6)
    ax.set_ylim(0, 1.05)
    ax.legend(frameon=False, fontsize=6)


def plot_user_comparison(rows: list[dict], stem: Path) -> list[Path]:
    """``experiments.pretrained_users``: per user model (the people, each prompted persona, each
    calibration recipe), the shares of openings naming the whole goal and only goal drinks, and of
    replies accepting a right and a wrong confirmation (95 % Clopper-Pearson intervals; a missing
    share, e.g. people's replies to wrong confirmations the logs do not hold, is a gap)."""
    metrics = ("goal_disclosure", "goal_consistency", "accept_right", "accept_wrong")
    labels = ("names whole goal", "names only goal drinks", "accepts right", "accepts wrong")
    names = [r["user"] for r in rows]
    est = [[None if r.get(k) is None else {"value": r[k], "low": r[f"{k}_low"], "high": r[f"{k}_high"]} for k in metrics]
           for r in rows]
    fig, axes = new_figure(ncols=1, width=7.0, height=2.8)
    ax = axes[0][0]
    _bars_with_intervals(ax, names, metrics, est, labels)
    ax.legend(frameon=False, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, not over them
    ax.set_ylabel("share (greedy replies)")
    ax.set_title("Prompted vs calibrated users, development split", fontsize=8)
    return save_figure(fig, stem)


def plot_user_study(result: dict, stem: Path) -> list[Path]:
    """``experiments.simulator_study``: left, per user model (the people, the prompted user, each
    calibration and the pooled fits) the shares naming the whole goal and accepting a right and a
    wrong confirmation (Clopper-Pearson; pooled: crossed bootstrap over fits and goals); middle, NLL
    per token of the people's turns by user turn; right, the goal-aware discriminator's AUC by user
    turn (Hanley-McNeil; 0.5 dotted: indistinguishable to the probe)."""
    metrics = ("goal_disclosure", "accept_right", "accept_wrong")
    labels = ("names whole goal", "accepts right", "accepts wrong")
    rows = result["rows"]
    est = [[None if r.get(k) is None else {"value": r[k], "low": r[f"{k}_low"], "high": r[f"{k}_high"]} for k in metrics]
           for r in rows]
    fig, axes = new_figure(ncols=3, width=3.2, height=2.6)
    bars, nll, auc = axes[0]
    _bars_with_intervals(bars, [r["user"] for r in rows], metrics, est, labels)
    bars.set_ylabel("share (greedy replies)")
    bars.legend(frameon=False, fontsize=5, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.12))  # below, off the bars
    for ax, measure in ((nll, "nll"), (auc, "auc")):
        users = list(dict.fromkeys(r["user"] for r in result["by_turn"] if r["measure"] == measure))
        for i, user in enumerate(users):
            pts = [r for r in result["by_turn"] if r["measure"] == measure and r["user"] == user]
            _errorbar(ax, [p["turns"] for p in pts], pts, i, user)
        ax.set_xlabel("user turn (held-out goals)")
        ax.legend(frameon=False, fontsize=5)
    nll.set_ylabel("NLL per token, people's turns")
    auc.set_ylabel("goal-aware discriminator AUC")
    auc.axhline(0.5, color="0.6", lw=0.8, ls=":")
    return save_figure(fig, stem)
