"""The per-seed files the ledger decides from, read into arrays keyed as the claims name them.

* the main job (``full_pipeline``): ``results.json``'s ``runs``, one record per task and seed;
* a real-dialogue run: ``runs.csv``, one row per arm, seed and evaluation user;
* modular addition: ``runs.csv``, one row per cell, method and seed;
* a real-dialogue run's training curves: ``training.csv``, one fitted rise per arm, seed and curve.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

TRAINING_SIMULATOR = "its training simulator"
"""The prefix a real-dialogue ``paired.csv`` gives the evaluation user that is each arm's own training simulator."""


def read_csv(path: Path) -> list[dict]:
    if not path.is_file():
        raise FileNotFoundError(f"the ledger needs {path}, which is missing")
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def pipeline_runs(folder: Path) -> list[dict]:
    """The main job's per-seed records (``results.json``'s ``runs``), sorted by task and seed."""
    path = folder / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"the ledger needs {path}, which is missing")
    runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
    return sorted(runs, key=lambda r: (r["task"], r["seed"]))


def pipeline_values(runs: list[dict], task: str, arm: str, key: str = "J_real") -> np.ndarray:
    """``key`` (``J_real``, ``J_sim``, ...) of ``arm`` (``sft`` or a paradigm) on ``task``, one value per seed."""
    rs = [r for r in runs if r["task"] == task]
    if not rs:
        raise ValueError(f"no run of task {task!r}; tasks: {sorted({r['task'] for r in runs})}")
    return np.array([r["sft"][key] if arm == "sft" else r["paradigms"][arm][key] for r in rs], dtype=float)


def pipeline_difference(runs: list[dict], task: str, difference: str) -> np.ndarray:
    """Per-seed ``J_real`` differences ``a - b`` (the arms of a seed share logs, SFT agent and evaluation draws)."""
    a, b = difference.split(" - ")
    return pipeline_values(runs, task, a) - pipeline_values(runs, task, b)


def dialogue_values(rows: list[dict], arm: str, user: str) -> dict[int, float]:
    """A real-dialogue run's per-seed goal success of ``arm`` as ``user`` scores it (``runs.csv``)."""
    out = {int(r["seed"]): float(r["success"]) for r in rows if r["arm"] == arm and r["user"] == user}
    if not out:
        raise ValueError(f"runs.csv holds no row for arm {arm!r} and user {user!r}")
    return out


def evaluation_user(user: str, arm: str) -> str:
    """The ``runs.csv`` user behind a ``paired.csv`` evaluation user: ``its training simulator (X)`` is ``X``."""
    if user.startswith(TRAINING_SIMULATOR):
        return user[len(TRAINING_SIMULATOR):].strip().strip("()")
    return user


def dialogue_difference(rows: list[dict], user: str, difference: str) -> np.ndarray:
    """Per-seed success differences ``a - b`` as ``user`` scores both arms, on the seeds both have."""
    a, b = difference.split(" - ")
    x, y = dialogue_values(rows, a, evaluation_user(user, a)), dialogue_values(rows, b, evaluation_user(user, b))
    if set(x) != set(y):
        raise ValueError(f"runs.csv: arms {a!r} and {b!r} have different seeds for {user!r}: {sorted(x)} vs {sorted(y)}")
    return np.array([x[s] - y[s] for s in sorted(x)], dtype=float)


def solved(rows: list[dict], *, m: int, eta: float, method: str, threshold: float, signal: str | None = None) -> dict[int, bool]:
    """Modular addition: whether each seed's ``method`` solves (greedy chain exact match >= ``threshold``),
    in the cells of teacher ``signal`` only when one is given."""
    out = {int(r["seed"]): float(r["chain_exact"]) >= threshold for r in rows
           if int(r["m"]) == m and float(r["eta"]) == eta and r["method"] == method and signal in (None, r["teacher_signal"])}
    if not out:
        raise ValueError(f"modadd runs.csv holds no row for m={m}, eta={eta}, method={method!r}, signal={signal!r}")
    return out


def fitted_rises(rows: list[dict], arm: str, curve: str) -> np.ndarray:
    """A run's per-seed fitted rise of ``arm``'s ``curve`` (``training.csv``), sorted by seed."""
    rs = sorted((r for r in rows if r["arm"] == arm and r["curve"] == curve), key=lambda r: int(r["seed"]))
    return np.array([float(r["fitted_rise"]) for r in rs], dtype=float)
