"""Where the main job's learner stops (issue 49, development runs): each tried RL configuration of
``experiments.learner_study`` as a full main-job run on development seeds, and per configuration,
task and arm the gap of the arm's own training objective to its exact optimum (for the arms of
:data:`~shiftbounds.dialogue.neural.analysis.OBJECTIVES`), ``J_real`` of every arm, and the RL
budget relative to today's learner.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from shiftbounds.dialogue.neural.analysis import OBJECTIVES
from shiftbounds.dialogue.neural.pipeline import ARMS, PipelineConfig, arms, seed_folder
from shiftbounds.dialogue.neural.rollout import ExplicitUser
from shiftbounds.dialogue.neural.soft_optimum import (
    history_tree,
    interaction,
    policy_log_probs,
    soft_optimum,
    soft_static_optimum,
    static_contexts,
)
from shiftbounds.dialogue.neural.tokens import Vocab
from shiftbounds.dialogue.prepare import make_task, prepare_task
from shiftbounds.dialogue.tasks import prompted_simulator
from shiftbounds.nn.transformer import load_model

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
    return (cfg.rl.steps * cfg.rl.goals_per_step * cfg.rl.group) / (today.rl.steps * today.rl.goals_per_step * today.rl.group)


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


@lru_cache(maxsize=4)
def _exact_views(task_name: str, horizon: int, reward_source: str, real_user: str, accept_wrong: float, leak: float) -> tuple:
    """The history tree of a main-job task and, per training user of :data:`ARMS` (``None``: the
    static arms' logged contexts), its exact view: the same for every seed and configuration."""
    task = make_task(task_name, horizon, reward_source)
    prep = prepare_task(task, real_user)
    real, prompted = ExplicitUser(task, prep.real), ExplicitUser(task, prompted_simulator(accept_wrong, leak))
    tree = history_tree(Vocab(task), prep.space, [real, prompted])
    return tree, {"real": interaction(tree, real), "prompted": interaction(tree, prompted),
                  None: static_contexts(tree, real, prep.data_policy)}


def exact_split(cfg: PipelineConfig, task_name: str, k: int) -> list[dict]:
    """Per arm of :data:`OBJECTIVES` of one finished (task, seed) of a main-job run (its saved SFT
    agent and arm agents under ``<out_dir>/<task>/seed<k>/``): the exact value of the arm's objective
    for the learned agent (``learned``, on the tree of every history, no sampling), the unregularised
    optimum (``optimum``), the soft-optimal policy's objective ``J(pi_beta)`` at the run's KL weight
    (``beta``) with its KL, and the exact split of the gap ``optimum - learned`` into the
    ``regularisation_cost`` ``optimum - J(pi_beta)`` and the ``optimisation_error``
    ``J(pi_beta) - learned`` (:mod:`~shiftbounds.dialogue.neural.soft_optimum`). An entropy bonus
    or per-turn advantages change what the learner climbs, not this objective."""
    tree, views = _exact_views(task_name, cfg.horizon, cfg.reward_source, cfg.real_user, cfg.accept_wrong, cfg.leak)
    folder = seed_folder(cfg, task_name, k)
    ref = policy_log_probs(tree, load_model(folder / "sft_agent.pt").eval())
    rows = []
    for arm, key in OBJECTIVES.items():
        learned = policy_log_probs(tree, load_model(folder / f"agent_{arm}.pt").eval())
        view = views[ARMS[arm][2]]
        solve = soft_static_optimum if ARMS[arm][2] is None else soft_optimum
        best, soft = (solve(view, ref, b) for b in (0.0, cfg.rl.kl_coef))
        value = view.value(learned)
        rows.append({"task": task_name, "seed": k, "arm": arm, "objective": key, "beta": cfg.rl.kl_coef, "optimum": best.objective,
                     "soft_optimum": soft.objective, "soft_kl": soft.kl, "learned": value, "gap": best.objective - value,
                     "regularisation_cost": best.objective - soft.objective, "optimisation_error": soft.objective - value})
    return rows


SPLIT_PARTS = ("gap", "regularisation_cost", "optimisation_error")


def split_summary(name: str, rows: list[dict]) -> list[dict]:
    """Per task and arm of one configuration's :func:`exact_split` rows: the median and the mean over
    seeds of the gap and of its two parts (the means add up), and the median ``J(pi_beta)``."""
    out = []
    for task in dict.fromkeys(r["task"] for r in rows):
        for arm in OBJECTIVES:
            rs = [r for r in rows if r["task"] == task and r["arm"] == arm]
            if rs:
                out.append({"variant": name, "task": task, "arm": arm, "beta": rs[0]["beta"], "seeds": len(rs),
                            "optimum": rs[0]["optimum"], "soft_optimum": float(np.median([r["soft_optimum"] for r in rs])),
                            **{f"{part}_median": float(np.median([r[part] for r in rs])) for part in SPLIT_PARTS},
                            **{f"{part}_mean": float(np.mean([r[part] for r in rs])) for part in SPLIT_PARTS}})
    return out
