"""Compounding in learned agents: each arm's training-to-real gap against its own bound, over the
horizon (docs/pipeline.md "Horizon sweep").

For every (horizon, task, seed, arm) of a sweep of the main job:

* Static Context RL arms: ``gap = J_static - J_real`` (their objective at logged contexts against
  the judged return of their own dialogues), bounded by Theorem 1, ``R sum_t B(eps)_t``;
* simulator-trained arms (Interactive, Calibrated): ``gap = J_sim - J_real``, bounded by
  Theorem 2, ``R sum_t B(delta)_t + sum_t rho_t``;

with ``eps_t``, ``delta_t``, ``rho_t`` the neural estimates of the main job and ``R`` the judge's
reward span. The oracle (trained on the real user) has no simulator gap and is left out. Pure
functions of the main job's per-seed measurements.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from shiftbounds.theory.bounds import theorem1_rhs, theorem2_rhs
from shiftbounds.utils.stats import loglog_slope, mean_ci

THEOREM = {"static": "theorem 1", "simulator": "theorem 2"}


def gap_and_bound(arm: Mapping, reward_span: float) -> tuple[str, float, float] | None:
    """``(theorem, gap, bound)`` of one arm's measurements (a ``paradigms[arm]`` entry of the main
    job): Theorem 2 where the arm was trained on a simulator (``J_sim`` present), Theorem 1 where it
    was trained on logs; ``None`` for an arm trained on the real user (``delta`` identically 0)."""
    if "J_sim" in arm:
        delta, rho = np.asarray(arm["delta"]["mean"]), np.asarray(arm["rho"]["mean"])
        if not delta.any() and not rho.any():
            return None
        return THEOREM["simulator"], float(arm["J_sim"] - arm["J_real"]), float(theorem2_rhs(delta, rho, reward_span))
    eps = np.asarray(arm["eps"]["mean"])
    return THEOREM["static"], float(arm["J_static"] - arm["J_real"]), float(theorem1_rhs(eps, reward_span))


def sweep_rows(runs_by_h: Mapping[int, list[dict]], reward_span: float) -> list[dict]:
    """Per horizon, task and arm: the mean gap and bound over seeds (95 % t-intervals) and their
    ratio ``gap / bound`` (how much of its bound an arm's gap uses)."""
    out = []
    for H, runs in sorted(runs_by_h.items()):
        for task in dict.fromkeys(r["task"] for r in runs):
            rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
            for arm in rs[0]["paradigms"]:
                got = [gap_and_bound(r["paradigms"][arm], reward_span) for r in rs]
                if got[0] is None:
                    continue
                gap, bound = (np.array([g[i] for g in got]) for i in (1, 2))
                eg, eb = mean_ci(gap), mean_ci(bound)
                out.append({"H": H, "task": task, "paradigm": arm, "theorem": got[0][0], "gap": eg.value,
                            "gap_low": eg.low, "gap_high": eg.high, "bound": eb.value, "bound_low": eb.low, "bound_high": eb.high,
                            "gap_over_bound": eg.value / eb.value if eb.value > 0 else float("nan"), "seeds": len(rs)})
    return out


def growth_rows(runs_by_h: Mapping[int, list[dict]], reward_span: float, *, rng: np.random.Generator,
                n_boot: int = 2000) -> list[dict]:
    """Per task and arm, the growth in ``H`` of ``|gap|`` and of its bound: log-log slopes over
    every (horizon, seed) with stratified bootstrap CIs (:func:`~shiftbounds.utils.stats.loglog_slope`;
    quadratic compounding is slope 2), and ``ratio``: the log-log slope of ``|gap| / bound`` in
    ``H`` (0 = the gap grows as fast as its bound; below 0 = the bound loosens with ``H``). Seeds
    with a gap or bound of exactly 0 are left out of the fits that take its log (``zero_gaps``)."""
    out = []
    hs = sorted(runs_by_h)
    tasks = dict.fromkeys(r["task"] for H in hs for r in runs_by_h[H])
    for task in tasks:
        arms = dict.fromkeys(a for H in hs for r in runs_by_h[H] if r["task"] == task for a in r["paradigms"])
        for arm in arms:
            pts = [(H, *g[1:]) for H in hs for r in runs_by_h[H] if r["task"] == task and arm in r["paradigms"]
                   for g in [gap_and_bound(r["paradigms"][arm], reward_span)] if g is not None]
            if len({p[0] for p in pts}) < 2:
                continue
            h, gap, bound = (np.array([p[i] for p in pts], float) for i in range(3))
            nz = (gap != 0) & (bound > 0)
            row = {"task": task, "paradigm": arm, "horizons": " ".join(str(x) for x in sorted(set(h.astype(int)))),
                   "points": len(pts), "zero_gaps": int((~nz).sum())}
            for name, x, y in (("gap", h[nz], np.abs(gap[nz])), ("bound", h[nz], bound[nz]), ("ratio", h[nz], np.abs(gap[nz]) / bound[nz])):
                e = loglog_slope(x, y, rng=rng, n_boot=n_boot)
                row.update({f"{name}_slope": e.value, f"{name}_slope_ci": f"[{e.low:.2f}, {e.high:.2f}]"})
            out.append(row)
    return out
