"""The main job's exact references from the tabular engine (the same for every seed): the real-user
optimum, ``pi_data``, the exact Interactive-RL policy, the exact optima of the training objectives
the engine can compute, and the exact end points' gaps against Theorems 1-2 at a horizon."""

from __future__ import annotations

from shiftbounds.dialogue.exact.study import prompted_paradigm, reference_results
from shiftbounds.dialogue.prepare import make_task, prepare_task
from shiftbounds.tabular import greedy_policy, static_context_return


def exact_views(task_name: str, horizon: int, reward_source: str, real_user: str, accept_wrong: float, leak: float) -> tuple:
    """The prepared task at ``horizon``, its reference results and the exact Interactive-RL result
    against the prompted simulator (``accept_wrong``, ``leak``)."""
    prep = prepare_task(make_task(task_name, horizon, reward_source), real_user)
    return prep, reference_results(prep), prompted_paradigm(prep, accept_wrong, leak)


def exact_references(*view: object) -> dict:
    """From :func:`exact_views`'s arguments: ``J_real`` of the real-user optimum, ``pi_data`` and the
    exact Interactive-RL policy (the optimum against the prompted simulator), and the exact optima
    of the training objectives the engine can compute: ``J_sim`` against the prompted simulator,
    the real user's own return (the oracle's objective) and Static Context RL's myopic ``J_static``
    (greedy on the expected judged reward at every logged context)."""
    prep, refs, inter = exact_views(*view)
    static_opt = greedy_policy(prep.real_mdp.rewards)
    return {"optimal": refs["optimal"]["J_real"], "pi_data": refs["pi_data"]["J_real"],
            "interactive_exact": inter["J_real"],
            "objective_optimum": {"interactive": inter["J_train"], "oracle": refs["optimal"]["J_real"],
                                  "static_myopic": float(static_context_return(prep.real_mdp, static_opt, prep.data_policy))}}


def exact_gaps(*view: object) -> list[dict]:
    """From :func:`exact_views`'s arguments: the exact end points' gaps and bounds at that horizon:
    the Interactive-RL optimum (``J_sim - J_real``, Theorem 2) and the infinite-log static learner
    (``J_static - J_real``, Theorem 1)."""
    task_name, horizon = view[0], view[1]
    _, refs, inter = exact_views(*view)
    static = refs["static-infinite-data"]
    return [{"H": horizon, "task": task_name, "paradigm": "interactive (exact)", "theorem": "theorem 2", "gap": inter["train_gap"],
             "bound": inter["theorem2_rhs"]},
            {"H": horizon, "task": task_name, "paradigm": "static, infinite logs (exact)", "theorem": "theorem 1",
             "gap": static["train_gap"], "bound": static["theorem1_rhs"]}]
