"""Recompute the shipped summary tables the ledger reads from the per-seed files beside them, and
list every disagreement (an empty list: they agree). Independent of the code that wrote the tables:
paired differences, exact sign-flip and McNemar p-values and Holm verdicts are re-derived here."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from shiftbounds.dialogue.neural.compounding import growth_rows
from shiftbounds.ledger import rules, sources
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import holm, sign_flip_p

REL = 1e-9
"""Relative tolerance of a recomputed number against the shipped one (the files hold full precision)."""


def _differs(shipped: str, value: float) -> bool:
    if shipped in ("", "None") or value is None:
        return shipped not in ("", "None") or value is not None
    return not math.isclose(float(shipped), float(value), rel_tol=REL, abs_tol=1e-12)


def _ordering(mean: float, kept: bool, a: str, b: str) -> str:
    return "not significant" if not kept or mean == 0 else f"{a} > {b}" if mean > 0 else f"{a} < {b}"


def _paired_checks(where: str, shipped: list[dict], diffs: list[np.ndarray], alpha: float, holm_key: str) -> list[str]:
    """Compare each shipped paired row with its recomputed differences, Holm over ``shipped`` as one family."""
    out, ps = [], [sign_flip_p(d)[0] for d in diffs]
    for r, d, p, kept in zip(shipped, diffs, ps, holm(ps, alpha)):
        a, b = r["difference"].split(" - ")
        what = f"{r['task']}: {r['difference']}" if "task" in r else r["difference"]
        n_key = "seeds" if "seeds" in r else "n"
        for key, value in (("mean", d.mean()), ("sd", d.std(ddof=1)), ("p", p)):
            if _differs(r[key], value):
                out.append(f"{where}: {what}: shipped {key} {r[key]}, recomputed {value!r}")
        if int(r[n_key]) != d.size:
            out.append(f"{where}: {what}: shipped {n_key} {r[n_key]}, recomputed {d.size}")
        verdict = _ordering(d.mean(), kept, a, b)
        if r[holm_key] != verdict:
            out.append(f"{where}: {what}: shipped {holm_key} {r[holm_key]!r}, recomputed {verdict!r}")
    return out


def pipeline_paired(root: Path, folder: str, alpha: float = 0.05) -> list[str]:
    """The main job's ``paired.csv`` against ``results.json``'s per-seed ``J_real`` (Holm over every row)."""
    runs = sources.pipeline_runs(root / folder)
    shipped = sources.read_csv(root / folder / "paired.csv")
    diffs = [sources.pipeline_difference(runs, r["task"], r["difference"]) for r in shipped]
    return _paired_checks(f"{folder}/paired.csv", shipped, diffs, alpha, "holm verdict")


def pipeline_headroom(root: Path, folder: str, arms: Iterable[str] = ("calibrated",)) -> list[str]:
    """``headroom.csv``'s share (the point estimate) from the per-seed ``J_real``."""
    runs = sources.pipeline_runs(root / folder)
    out = []
    for r in sources.read_csv(root / folder / "headroom.csv"):
        if r["paradigm"] not in arms:
            continue
        v = lambda arm: sources.pipeline_values(runs, r["task"], arm)  # noqa: E731
        share = (v(r["paradigm"]) - v("interactive")).mean() / (v("oracle") - v("interactive")).mean()
        if _differs(r["share"], share):
            out.append(f"{folder}/headroom.csv: {r['task']} {r['paradigm']}: shipped share {r['share']}, recomputed {share!r}")
    return out


def dialogue_paired(root: Path, folder: str, alpha: float = 0.05) -> list[str]:
    """A real-dialogue run's ``paired.csv`` against its ``runs.csv`` (Holm over each evaluation user's rows)."""
    rows = sources.read_csv(root / folder / "runs.csv")
    shipped = sources.read_csv(root / folder / "paired.csv")
    out = []
    for user in dict.fromkeys(r["evaluation user"] for r in shipped):
        family = [r for r in shipped if r["evaluation user"] == user]
        diffs = [sources.dialogue_difference(rows, user, r["difference"]) for r in family]
        out += _paired_checks(f"{folder}/paired.csv [{user}]", family, diffs, alpha, "holm verdict")
    return out


def dialogue_goals(root: Path, folder: str) -> list[str]:
    """A real-dialogue run's ``goals.csv`` (per-goal outcomes, runs from 2026-12-07 on) against its
    ``runs.csv``: every per-seed success is the mean of its goals' outcomes. Nothing to check where
    the run shipped no ``goals.csv``."""
    if not (root / folder / "goals.csv").is_file():
        return []
    success = {(r["arm"], r["seed"], r["user"]): float(r["success"]) for r in sources.read_csv(root / folder / "runs.csv")}
    out = []
    for r in sources.read_csv(root / folder / "goals.csv"):
        o = r["outcomes"]
        values = [float(x) for x in (o.split(",") if "," in o else o)]
        key = (r["arm"], r["seed"], r["user"])
        if len(values) != int(r["goals"]) or key not in success or _differs(str(success[key]), float(np.mean(values))):
            out.append(f"{folder}/goals.csv: {key}: {len(values)} outcomes with mean {np.mean(values)!r}, runs.csv {success.get(key)}")
    return out


def modadd_mcnemar(root: Path, folder: str, threshold: float, alpha: float = 0.05) -> list[str]:
    """``mcnemar.csv`` against ``runs.csv``: discordant counts, exact p, Holm inside each cell."""
    rows, out = sources.read_csv(root / folder / "runs.csv"), []
    shipped = sources.read_csv(root / folder / "mcnemar.csv")
    cells = dict.fromkeys((r["m"], r["eta"], r["teacher_signal"], r["warm_start"]) for r in shipped)
    for cell in cells:
        family = [r for r in shipped if (r["m"], r["eta"], r["teacher_signal"], r["warm_start"]) == cell]
        cell_rows = [r for r in rows if (r["m"], r["eta"], r["teacher_signal"], r["warm_start"]) == cell]
        counts = []
        for r in family:
            x, y = (sources.solved(cell_rows, m=int(cell[0]), eta=float(cell[1]), method=k, threshold=threshold)
                    for k in r["difference"].split(" - "))
            counts.append((sum(x[s] and not y[s] for s in x), sum(y[s] and not x[s] for s in x)))
        ps = [rules.mcnemar_p(a, b) for a, b in counts]
        for r, (a, b), p, kept in zip(family, counts, ps, holm(ps, alpha)):
            got = (a, b, p, _ordering(a - b, kept, *r["difference"].split(" - ")))
            want = (int(r["only_first"]), int(r["only_second"]), float(r["p"]), r["holm verdict"])
            if got[:2] != want[:2] or _differs(r["p"], p) or got[3] != want[3]:
                out.append(f"{folder}/mcnemar.csv: {cell} {r['difference']}: shipped {want}, recomputed {got}")
    return out


def simulator_paired(root: Path, folder: str) -> list[str]:
    """``experiments.simulator_study``'s ``paired.csv`` means against its per-unit file ``units.json``
    (each user model's outcome per goal, turn and held-out history): calibrated (pooled over fits)
    minus prompted, unit by unit. Nothing to check where the study is not shipped."""
    if not (root / folder / "paired.csv").is_file():
        return []
    found = json.loads((root / folder / "units.json").read_text(encoding="utf-8"))
    units = {"goal_disclosure": ("outcomes", "disclosed"), "accept_right": ("outcomes", "right"), "accept_wrong": ("outcomes", "wrong"),
             "nll": ("nll", None), "discriminator_wins": ("disc", "per_history")}

    def values(user: str, measure: str) -> np.ndarray:
        part, key = units[measure]
        v = found[user][part]
        return np.asarray(v if key is None else v[key], float)

    out = []
    for r in sources.read_csv(root / folder / "paired.csv"):
        fits = [values(f"calibrated_{k}", r["measure"]) for k in range(int(r["fits"]))]
        d = np.mean(fits, axis=0) - values("prompted", r["measure"])
        if _differs(r["mean"], float(d.mean())) or int(r["units"]) != d.size:
            out.append(f"{folder}/paired.csv: {r['measure']}: shipped mean {r['mean']} over {r['units']}, recomputed {d.mean()!r} over {d.size}")
    return out


def same_table(where: str, shipped: list[dict], recomputed: list[dict]) -> list[str]:
    """Every cell of a shipped CSV table against a recomputed one (numbers to :data:`REL`, text exactly)."""
    if len(shipped) != len(recomputed):
        return [f"{where}: shipped {len(shipped)} rows, recomputed {len(recomputed)}"]
    out = []
    for i, (s, r) in enumerate(zip(shipped, recomputed)):
        for key, text in s.items():
            value = r.get(key)
            try:
                bad = _differs(text, value) if isinstance(value, (int, float)) and not isinstance(value, bool) else text != _text(value)
            except ValueError:
                bad = True
            if bad:
                out.append(f"{where}: row {i} {key}: shipped {text!r}, recomputed {value!r}")
    return out


def _text(value) -> str:
    return "" if value is None else str(value)


def sweep_growth(root: Path, folder: str) -> list[str]:
    """The horizon sweep's ``growth.csv`` recomputed from each horizon's per-seed runs (``H<h>/results.json``)
    with the sweep's own seeded bootstrap."""
    results = json.loads((root / folder / "results.json").read_text(encoding="utf-8"))
    cfg = results["config"]
    by_h = {h: sources.pipeline_runs(root / folder / f"H{h}") for h in cfg["sweep"]}
    growth = growth_rows(by_h, results["reward_span"], rng=numpy_rng(cfg["seed"], "sweep growth"))
    return same_table(f"{folder}/growth.csv", sources.read_csv(root / folder / "growth.csv"), growth)
