"""How many logs calibration needs, exactly: every logs-dependent arm of the tabular study solved
on log draws of growing size, against Interactive RL on the prompted simulator (which needs no logs).

:func:`log_draws` solves the arms on ``seeds`` independent log draws per size; :func:`log_size_rows`
turns them into paired differences per size (each calibrated simulator class against Interactive RL
and against the best logs-only arm at that size), with their 95 % intervals and minimum detectable
effects; :func:`smallest_paying_size` names the first size from which calibration pays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shiftbounds.dialogue.exact.study import logged_paradigms
from shiftbounds.dialogue.prepare import PreparedTask, sample_logs
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import mean_ci, minimum_detectable_effect, sign_flip_p

LOGS_ONLY = ("static-myopic", "static-one-step", "static-fitted-q")
"""The logs-only learners of the tabular study (no simulator)."""
CALIBRATED = ("calibrated-count", "calibrated-shared")
"""The two calibrated simulator classes, each fitted on the same logs (per-context counts; four shared rates)."""


def log_draws(prep: PreparedTask, n: int, seeds: int, *, seed: int, key: str, count_alpha: float = 1.0) -> list[dict]:
    """``J_real`` of every logs-dependent arm on ``seeds`` independent draws of ``n`` logged dialogues
    (draw ``k`` from the generator keyed by ``key``, ``n`` and ``k``)."""
    out = []
    for k in range(seeds):
        res = logged_paradigms(prep, sample_logs(prep, n, rng=numpy_rng(seed, "log size", key, n, k)), count_alpha)
        out.append({arm: float(res[arm]["J_real"]) for arm in (*LOGS_ONLY, *CALIBRATED, "sft")})
    return out


def _difference(x: np.ndarray, y: np.ndarray) -> dict:
    d = x - y
    e = mean_ci(d)
    sd = float(d.std(ddof=1))
    p, _ = sign_flip_p(d)
    constant = bool(np.all(d == d[0]))
    return {"mean": e.value, "ci": "constant" if constant else f"[{e.low:.3f}, {e.high:.3f}]", "low": e.low, "high": e.high,
            "sd": sd, "mde": minimum_detectable_effect(sd, d.size), "p": p, "pays": bool(e.value > 0 and p < 0.05)}


def size_rows(n: int, J: dict[str, np.ndarray], *, calibrated: Sequence[str], logs_only: Sequence[str],
              interactive: str = "interactive") -> list[dict]:
    """At one log size ``n``, per calibrated arm: its mean ``J_real`` and its paired difference with
    ``interactive`` and with the logs-only arm of highest mean at that size, each with a 95 %
    t-interval over the replicates (log draws, or seeds of learned agents; ``ci`` says ``constant``
    where the differences do not vary), its SD, the minimum detectable effect (two-sided 0.05, power
    0.8), the exact sign-flip ``p`` and ``pays`` (mean above 0 with ``p < 0.05``)."""
    best = max(logs_only, key=lambda a: J[a].mean())
    return [{"n_logs": n, "calibrated": cal, "J_calibrated": float(J[cal].mean()),
             "against": "interactive" if against == interactive else f"best logs-only ({best})",
             "J_against": float(J[against].mean()), "replicates": int(J[cal].size), **_difference(J[cal], J[against])}
            for cal in calibrated for against in (interactive, best)]


def log_size_rows(draws_by_size: dict[int, list[dict]], interactive: float) -> list[dict]:
    """:func:`size_rows` for the exact arms of every size, Interactive RL's ``J_real`` a constant (it uses no logs)."""
    rows = []
    for n, draws in sorted(draws_by_size.items()):
        J = {arm: np.array([d[arm] for d in draws]) for arm in draws[0]} | {"interactive": np.full(len(draws), interactive)}
        rows += size_rows(n, J, calibrated=CALIBRATED, logs_only=LOGS_ONLY)
    return rows


def smallest_paying_size(rows: Sequence[dict], calibrated: str, against: str) -> int | None:
    """The smallest size from which ``calibrated`` pays against ``against`` (``"interactive"`` or
    ``"best logs-only"``) at every larger size of the grid too; ``None``: not within the grid."""
    sel = sorted((r for r in rows if r["calibrated"] == calibrated and r["against"].startswith(against)), key=lambda r: r["n_logs"])
    first = None
    for r in sel:
        first = (first or r["n_logs"]) if r["pays"] else None
    return first
