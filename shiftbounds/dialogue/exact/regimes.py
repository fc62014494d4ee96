"""The exact dialogue-regimes study (``experiments.dialogue_regimes``): its configuration, one
(task, H, real user) block of exact paradigms over log samples and simulator regimes, every shift
checked against its bound as it is computed, and the tables made from finished blocks: the main
table, the regime map's cells and winners, the pairwise counts, the per-turn shifts and the report.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from shiftbounds.dialogue.exact.study import ARMS, REFERENCES, logged_paradigms, prompted_paradigm, reference_results
from shiftbounds.dialogue.prepare import make_task, prepare_task, sample_logs
from shiftbounds.dialogue.tasks import REAL_USERS, REWARD_SOURCES, TASKS, prompted_simulator
from shiftbounds.utils.io import markdown_table
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import mean_ci

BOUND_TOL = 1e-9
FORMAT_VERSION = 4  # bump when a block's contents change, so stale saved blocks are recomputed (regime_cells is recomputed from blocks on every run)
MEMORY_MAX_H = 4  # the memory user's exact summary space (dense [H, S, A, S] kernels) is used up to this H


@dataclass(frozen=True)
class RegimeConfig:
    """Options of ``experiments.dialogue_regimes``."""

    tasks: tuple[str, ...] = field(default=("guess_number", "booking"), metadata={"help": f"tasks, from {sorted(TASKS)}"})
    real_user: str = field(default="memory", metadata={"help": f"real user of the main table, from {sorted(REAL_USERS)}"})
    real_users: tuple[str, ...] = field(default=("memoryless", "memory"), metadata={"help": f"real users of the regime map (memory: H <= {MEMORY_MAX_H} only)"})
    horizon: int = field(default=4, metadata={"help": "H of the main table and the regime-map figure"})
    horizons: tuple[int, ...] = field(default=(3, 4, 5), metadata={"help": "H values of the regime map"})
    n_main: int = field(default=100, metadata={"help": "logged dialogues for the main table"})
    n_logs: tuple[int, ...] = field(default=(20, 100, 500), metadata={"help": "log sizes n of the regime map"})
    accept_wrong: float = field(default=0.3, metadata={"help": "prompted simulator's accept-wrong rate, main table"})
    leak: float = field(default=0.2, metadata={"help": "prompted simulator's leak rate, main table"})
    accept_wrong_grid: tuple[float, ...] = field(default=(0.0, 0.2, 0.4, 0.6, 0.8), metadata={"help": "accept-wrong rates of the map"})
    leak_grid: tuple[float, ...] = field(default=(0.0, 0.2, 0.4), metadata={"help": "leak rates of the map"})
    reward_source: str = field(default="acceptance", metadata={"help": f"training reward of simulators, from {REWARD_SOURCES}"})
    wrong_penalty: float = field(default=0.3, metadata={"help": "judged cost of a wrong proposal"})
    count_alpha: float = field(default=1.0, metadata={"help": "smoothing of the count-model simulator"})
    seeds: int = field(default=5, metadata={"help": "log samples (seeds) per setting"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="results/dialogue_regimes/default", metadata={"help": "folder for the results", "resume": False})

    def __post_init__(self) -> None:
        bad = [t for t in self.tasks if t not in TASKS]
        if bad or not self.tasks:
            raise ValueError(f"--tasks must name tasks from {sorted(TASKS)}; got unknown {bad}")
        if self.horizon < 2 or any(h < 2 for h in self.horizons):
            raise ValueError(f"--horizon and --horizons need H >= 2; got {self.horizon}, {self.horizons}")
        if self.horizon not in self.horizons:
            raise ValueError(f"--horizon {self.horizon} must be one of --horizons {self.horizons}")
        bad = [u for u in (self.real_user, *self.real_users) if u not in REAL_USERS]
        if bad or self.real_user not in self.real_users:
            raise ValueError(f"--real-user must be one of --real-users, all from {sorted(REAL_USERS)}; got "
                             f"{self.real_user!r} and {self.real_users}")
        if self.real_user == "memory" and self.horizon > MEMORY_MAX_H:
            raise ValueError(f"--horizon must be <= {MEMORY_MAX_H} with --real-user memory; got {self.horizon}")
        if self.n_main < 1 or any(n < 1 for n in self.n_logs):
            raise ValueError(f"--n-main and --n-logs must be >= 1; got {self.n_main}, {self.n_logs}")
        for name, grid in (("accept-wrong-grid", self.accept_wrong_grid), ("leak-grid", self.leak_grid)):
            if not grid or any(not 0 <= v <= 1 for v in grid):
                raise ValueError(f"--{name} needs values in [0, 1]; got {grid}")
        if not (0 <= self.accept_wrong <= 1 and 0 <= self.leak <= 0.9):
            raise ValueError(f"--accept-wrong in [0, 1] and --leak in [0, 0.9] required; got {self.accept_wrong}, {self.leak}")
        if self.reward_source not in REWARD_SOURCES:
            raise ValueError(f"--reward-source must be one of {REWARD_SOURCES}; got {self.reward_source!r}")
        if self.seeds < 2:
            raise ValueError(f"--seeds must be >= 2 to give a confidence interval; got {self.seeds}")


def check_bounds(name: str, res: dict) -> None:
    """Assert Lemma 1 and Lemma 2 on a measured result (raises with the offending turn)."""
    for shift, bound in (("Delta", "B_eps"), ("D", "B_delta")):
        if shift in res:
            excess = np.asarray(res[shift]) - np.asarray(res[bound])
            if (excess > BOUND_TOL).any():
                t = int(np.argmax(excess))
                raise AssertionError(f"{name}: {shift}_{t} exceeds {bound}_{t} by {excess[t]:.3g}")


def blocks_todo(cfg: RegimeConfig) -> list[tuple[str, int, str]]:
    """The (task, H, real user) blocks of the map: the memory user only at ``H <= MEMORY_MAX_H``."""
    return [(t, H, u) for u in cfg.real_users for t in cfg.tasks for H in cfg.horizons
            if u != "memory" or H <= MEMORY_MAX_H]


def run_block(cfg: RegimeConfig, task_name: str, H: int, user: str, prog: Progress) -> dict:
    """All results for one (task, H, real user): references, logged paradigms per (n, seed), prompted cells."""
    task = make_task(task_name, H, cfg.reward_source, cfg.wrong_penalty)
    prep = prepare_task(task, user)
    block = {"task": task_name, "H": H, "real_user": user, "n_states": prep.space.n_states,
             "references": reference_results(prep), "logged": {}, "prompted": {}}
    ns = sorted(set(cfg.n_logs) | ({cfg.n_main} if H == cfg.horizon else set()))
    for n in ns:
        runs = []
        for k in range(cfg.seeds):
            logs = sample_logs(prep, n, rng=numpy_rng(cfg.seed, TASK_IDS[task_name], H, n, k, USER_IDS[user]))
            res = logged_paradigms(prep, logs, cfg.count_alpha)
            for name, r in res.items():
                check_bounds(f"{task_name} H={H} n={n} seed={k} {name}", r)
            runs.append(res)
            prog.update(note=f"{task_name} H={H} n={n} seed={k}")
        block["logged"][str(n)] = runs
    knobs = {(a, l) for a in cfg.accept_wrong_grid for l in cfg.leak_grid} | {(cfg.accept_wrong, cfg.leak)}
    for a, l in sorted(knobs):
        r = prompted_paradigm(prep, a, l)
        check_bounds(f"{task_name} H={H} interactive aw={a} leak={l}", r)
        block["prompted"][f"{a}:{l}"] = r
        prog.update(note=f"{task_name} H={H} accept_wrong={a} leak={l}")
    return block


TASK_IDS = {name: i for i, name in enumerate(sorted(TASKS))}
USER_IDS = {name: i for i, name in enumerate(sorted(REAL_USERS))}


def compare(x: np.ndarray, y: np.ndarray) -> dict:
    """Paired difference ``x - y`` over log samples: mean, 95 % CI and a verdict (``win`` / ``loss``
    only where the CI excludes 0, else ``tie``)."""
    d = mean_ci(np.asarray(x, dtype=float) - np.asarray(y, dtype=float))
    verdict = "win" if d.low > 0 else "loss" if d.high < 0 else "tie"
    return {"mean": d.value, "low": d.low, "high": d.high, "verdict": verdict}


def regime_cells(cfg: RegimeConfig, blocks: dict) -> list[dict]:
    """Winner and margin on ``J_real`` for each (real user, task, H, n, accept_wrong, leak), with the
    paired comparisons Calibrated (shared) - Interactive and Interactive - best Static variant."""
    cells = []
    for (task, H, user), block in blocks.items():
        optimal = block["references"]["optimal"]["J_real"]
        for n in cfg.n_logs:
            runs = block["logged"][str(n)]
            for a in cfg.accept_wrong_grid:
                for l in cfg.leak_grid:
                    inter = block["prompted"][f"{a}:{l}"]["J_real"]
                    J = {p: np.array([r[p]["J_real"] for r in runs]) for p in ARMS if p != "interactive"}
                    J["interactive"] = np.full(cfg.seeds, inter)
                    means = {p: float(v.mean()) for p, v in J.items()}
                    order = sorted(means, key=means.get, reverse=True)
                    lead = compare(J[order[0]], J[order[1]])
                    static = max(("static-myopic", "static-one-step", "static-fitted-q"), key=means.get)
                    cal = compare(J["calibrated-shared"], J["interactive"])
                    ist = compare(J["interactive"], J[static])
                    cells.append({"real_user": user, "task": task, "H": H, "n": n, "accept_wrong": a, "leak": l,
                                  "winner": order[0] if lead["verdict"] == "win" else "tie", "leader": order[0],
                                  "runner_up": order[1], "margin": lead["mean"], "margin_low": lead["low"],
                                  "margin_high": lead["high"],
                                  "interactive_loss_vs_optimal": optimal - inter,
                                  "calibrated_minus_interactive": cal["mean"], "calibrated_vs_interactive": cal["verdict"],
                                  "interactive_minus_best_static": ist["mean"], "interactive_vs_best_static": ist["verdict"],
                                  **{f"J_{p}": means[p] for p in ARMS}})
    return cells


def pairwise_counts(cfg: RegimeConfig, cells: list[dict]) -> list[dict]:
    """Per (real user, task): cells where each paired comparison is a significant win, a tie or a loss."""
    rows = []
    for user in cfg.real_users:
        for task in cfg.tasks:
            cs = [c for c in cells if c["task"] == task and c["real_user"] == user]
            if not cs:
                continue
            row = {"real_user": user, "task": task, "cells": len(cs)}
            for key, label in (("calibrated_vs_interactive", "calibrated-shared vs interactive"),
                               ("interactive_vs_best_static", "interactive vs best static")):
                for verdict in ("win", "tie", "loss"):
                    row[f"{label}: {verdict}"] = sum(c[key] == verdict for c in cs)
            row["max lead of calibrated-shared"] = max(c["calibrated_minus_interactive"] for c in cs)
            row["max lead of interactive"] = max(-c["calibrated_minus_interactive"] for c in cs)
            row["interactive loss vs optimal (max)"] = max(c["interactive_loss_vs_optimal"] for c in cs)
            rows.append(row)
    return rows


def main_table(cfg: RegimeConfig, blocks: dict) -> tuple[dict, list[dict]]:
    """Per task at the main setting: per-seed results, CI rows, user-model metrics."""
    main, rows = {}, []
    for task in cfg.tasks:
        block = blocks[(task, cfg.horizon, cfg.real_user)]
        runs = block["logged"][str(cfg.n_main)]
        inter = block["prompted"][f"{cfg.accept_wrong}:{cfg.leak}"]
        per_seed = [{**r, "interactive": inter} for r in runs]
        for name in REFERENCES + ARMS:
            vals = [block["references"][name] for _ in runs] if name in block["references"] else [r[name] for r in per_seed]
            row = {"task": task, "paradigm": name}
            for metric in ("J_real", "success", "J_train", "train_gap", "turns"):
                if metric in vals[0]:
                    e = mean_ci(np.array([v[metric] for v in vals]))
                    row[metric] = e.value
                    row[metric + "_ci"] = f"[{e.low:.3f}, {e.high:.3f}]"
            row["sum_Delta"] = float(np.mean([np.sum(v["Delta"]) for v in vals]))
            if "delta" in vals[0]:
                row["sum_delta"] = float(np.mean([np.sum(v["delta"]) for v in vals]))
                row["sum_delta_on_logs"] = float(np.mean([np.sum(v["delta_on_logs"]) for v in vals]))
                row["sum_rho"] = float(np.mean([np.sum(v["rho"]) for v in vals]))
            rows.append(row)
        prompted = prompted_simulator(cfg.accept_wrong, cfg.leak)
        fitted = [r["calibrated-shared"]["fitted_model"] for r in runs]
        task_def = make_task(task, cfg.horizon)
        real = REAL_USERS[cfg.real_user](task_def)
        main[task] = {
            "per_seed": per_seed,
            "user_models": {
                "real": {"accept_wrong": [real.accept_wrong], "leak": [real.leak],
                         "clarify": [float(np.mean([real.clarify_rate(q) for q in range(task_def.n_questions)]))]},
                "prompted": {"accept_wrong": [prompted.accept_wrong], "leak": [prompted.leak], "clarify": [prompted.clarify]},
                "calibrated-shared": {k: [f[k] for f in fitted] for k in ("accept_wrong", "leak", "clarify")},
            },
        }
    return main, rows


def block_name(cfg: RegimeConfig, task: str, H: int, user: str) -> str:
    opts = {k: v for k, v in asdict(cfg).items() if k != "out_dir"}
    key = hashlib.sha1(json.dumps([FORMAT_VERSION, opts], sort_keys=True).encode()).hexdigest()[:10]
    return f"{task}_H{H}_{user}_{key}"


def per_turn_rows(cfg: RegimeConfig, main: dict) -> list[dict]:
    """Each paradigm's per-turn shifts and bounds (the first log sample), one row per turn."""
    per_turn = []
    for task in cfg.tasks:
        for name, r in main[task]["per_seed"][0].items():
            for t in range(len(r["eps"])):
                per_turn.append({"task": task, "paradigm": name, "t": t, **{k: r[k][t] for k in
                                 ("eps", "Delta", "B_eps", "delta", "D", "rho", "B_delta", "delta_on_logs") if k in r}})
    return per_turn


def report_md(cfg: RegimeConfig, rows: list[dict], cells: list[dict]) -> str:
    """The run's ``results.md``: the main table, the regime map's wins and the pairwise counts."""
    cols = ["task", "paradigm", "J_real", "J_real_ci", "success", "J_train", "train_gap", "sum_Delta", "sum_delta",
            "sum_delta_on_logs", "sum_rho"]
    md = (f"# Tabular dialogue study (exact)\n\nReal user: {cfg.real_user}; H = {cfg.horizon}, n = {cfg.n_main} logged dialogues, "
          f"prompted simulator accept-wrong {cfg.accept_wrong}, leak {cfg.leak}; reward source for simulator "
          f"training: {cfg.reward_source}; {cfg.seeds} log samples, 95 % CIs.\n\n" + markdown_table(rows, cols))
    wins = {}
    for c in cells:
        w = wins.setdefault((c["real_user"], c["task"]), {p: 0 for p in ARMS + ("tie",)})
        w[c["winner"]] += 1
    md += "\n## Regime map: cells won by each paradigm\n\n" + markdown_table(
        [{"real_user": u, "task": t, **w} for (u, t), w in wins.items()], ["real_user", "task", *ARMS, "tie"])
    md += ("\nA cell is won when the 95 % CI of the paired difference in J_real between the leader and "
           "the runner-up (over log samples) excludes 0; otherwise it is a tie.\n")
    md += "\n## Pairwise comparisons over the regime map (cells; significant win / tie / loss of the first named)\n\n"
    md += markdown_table(pairwise_counts(cfg, cells))
    return md
