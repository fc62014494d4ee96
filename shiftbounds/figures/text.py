"""The text path on Taskmaster (``experiments.real_dialogue``): realism by turn and sycophancy probes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shiftbounds.figures.common import grouped_bars
from shiftbounds.llm.realism import TURN_BUCKETS, discriminator_auc_ci
from shiftbounds.utils.plotting import new_figure, save_figure, series_style


def plot_text_realism(results: dict, stem: Path) -> list[Path]:
    """Left: NLL per token of held-out human user turns by Taskmaster-3 turn index, per user model;
    right: each simulator's discriminator AUC by turn index with 95 % intervals (0.5 dotted:
    indistinguishable)."""
    disc = results["discriminator_auc_tm3"]
    fig, axes = new_figure(ncols=2, width=3.8, height=2.6)
    left, right = axes[0]
    for i, (name, by) in enumerate(results["realism_tm3_by_turn"].items()):
        xs = [b for b in TURN_BUCKETS if by.get(b) is not None]
        left.plot(xs, [by[b] for b in xs], label=name, **series_style(i))
    for i, (name, d) in enumerate(disc.items()):
        est = [(b, e) for b in TURN_BUCKETS if (e := discriminator_auc_ci(d, b))]
        right.errorbar([b for b, _ in est], [e.value for _, e in est], capsize=2, label=name,
                       yerr=[[e.value - e.low for _, e in est], [e.high - e.value for _, e in est]], **series_style(i))
    left.set_ylabel("NLL per token, human user turns")
    right.set_ylabel("discriminator AUC")
    right.set_title("real vs simulated user turns", fontsize=7)
    for ax in (left, right):
        ax.set_xlabel("turn index (Taskmaster-3)")
        ax.legend(frameon=False, fontsize=6)
    right.axhline(0.5, color="0.6", lw=0.8, ls=":")
    return save_figure(fig, stem)


def plot_text_sycophancy(results: dict, stem: Path) -> list[Path]:
    """Per user model (and the logged people): shares of replies accepting the right order and an
    order with one drink swapped, and of opening turns naming the whole goal (Taskmaster-4);
    ``n/a`` where it cannot be measured (people were never shown a wrong order)."""
    syc = results["sycophancy_tm4"]
    metrics = ("accept_right", "accept_wrong", "goal_disclosure")
    labels = ("accepts right order", "accepts wrong order", "opening names whole goal")
    fig, axes = new_figure(width=5.0, height=2.6)
    ax = axes[0, 0]
    names = list(syc)
    values = [[np.nan if syc[n][k] is None else syc[n][k] for k in metrics] for n in names]
    grouped_bars(ax, names, metrics, values, labels=labels)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if np.isnan(v):
                ax.text(j + 0.8 / len(names) * i, 0.02, "n/a", ha="center", va="bottom", fontsize=5, rotation=90)
    ax.set_ylabel("share of replies")
    ax.set_ylim(0, 1.05)
    ax.legend(frameon=False, fontsize=6)
    return save_figure(fig, stem)
