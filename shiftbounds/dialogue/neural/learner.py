"""Where the main job's learner stops (issue 49, development runs): each tried RL configuration of
``experiments.learner_study`` as a full main-job run on development seeds, and per configuration,
task and arm the gap of the arm's own training objective to its exact optimum (for the arms of
:data:`~shiftbounds.dialogue.neural.analysis.OBJECTIVES`), ``J_real`` of every arm, and the RL
budget relative to today's learner.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from shiftbounds.dialogue.neural.analysis import OBJECTIVES
from shiftbounds.dialogue.neural.pipeline import PipelineConfig, arms

VARIANTS: dict[str, dict] = {
    "today": {},  # the shipped learner: every RL setting at its default
    "kl0": {"kl_coef": 0.0},
    "kl0_lr3e-3": {"kl_coef": 0.0, "rl_lr": 3e-3},
    "kl0.01": {"kl_coef": 0.01},
    "lr3e-4": {"rl_lr": 3e-4},
    "togo": {"advantage": "togo"},
    "togo_norm": {"advantage": "togo", "normalise_advantages": True},
    "ent0.01": {"entropy_coef": 0.01},
    "group8": {"group": 8, "goals_per_step": 8},
    "lr3e-4_steps600": {"rl_lr": 3e-4, "rl_steps": 600},
}
"""The RL configurations tried, in the order they were run: overrides of :class:`PipelineConfig`."""

GAP_TARGET = 0.03
"""The issue's target: the median gap to the unregularised exact optimum of an arm's objective."""


def budget(cfg: PipelineConfig) -> float:
    """RL agent turns per seed and arm relative to today's learner (steps x goals x group)."""
    today = PipelineConfig()
    return (cfg.rl_steps * cfg.goals_per_step * cfg.group) / (today.rl_steps * today.goals_per_step * today.group)


def variant_rows(name: str, cfg: PipelineConfig, results: Mapping, optimum: Mapping[str, Mapping[str, float]]) -> list[dict]:
    """One configuration's rows: per task and arm, ``J_real`` (mean over seeds) and, for the arms of
    :data:`OBJECTIVES`, the per-seed gap ``optimum - objective`` (mean, median, largest) and whether
    the median is within :data:`GAP_TARGET`. ``optimum[task][arm]``: the exact optimum of the arm's
    objective (:func:`~shiftbounds.dialogue.exact.references.exact_references`)."""
    rows = []
    for task in cfg.tasks:
        runs = sorted((r for r in results["runs"] if r["task"] == task), key=lambda r: r["seed"])
        for arm in ("sft", *arms(cfg)):
            per = [r["sft"] if arm == "sft" else r["paradigms"][arm] for r in runs]
            row = {"variant": name, "task": task, "arm": arm, "budget": budget(cfg), "seeds": len(runs),
                   "J_real": float(np.mean([p["J_real"] for p in per]))}
            if arm in OBJECTIVES:
                gaps = np.array([optimum[task][arm] - p[OBJECTIVES[arm]] for p in per])
                row |= {"objective": OBJECTIVES[arm], "gap_mean": float(gaps.mean()), "gap_median": float(np.median(gaps)),
                        "gap_max": float(gaps.max()), "within_target": bool(np.median(gaps) <= GAP_TARGET)}
            rows.append(row)
    return rows


def best_rows(rows: list[dict]) -> list[dict]:
    """Per task and arm of :data:`OBJECTIVES`: the configuration with the smallest median gap."""
    out = []
    for task in dict.fromkeys(r["task"] for r in rows):
        for arm in OBJECTIVES:
            cand = [r for r in rows if r["task"] == task and r["arm"] == arm]
            if cand:
                out.append(min(cand, key=lambda r: r["gap_median"]))
    return out
