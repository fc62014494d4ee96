"""How many logs calibration needs: Calibrated Interactive RL against Interactive RL and against the best
logs-only arm, as the number of logged dialogues grows.

``python -m experiments.log_size [--preset smoke|default] [--learned DIR,DIR,...] [options]``

**Exact prediction.** On the main job's tasks, horizon, real user and prompted simulator, the tabular
engine solves every logs-dependent arm on ``--draws`` independent log draws per size in ``--sizes``:
the two calibrated simulator classes fitted on the same logs (``calibrated-count``: per-context
counts; ``calibrated-shared``: four shared rates), each planned against exactly, and the logs-only
learners (Static Context RL myopic and one-step, fitted Q). Interactive RL on the prompted simulator
uses no logs (one exact value). Per size: each calibrated class minus Interactive RL and minus the
logs-only arm of highest mean there, with 95 % t-intervals over the draws, exact sign-flip p-values
and minimum detectable effects, and the smallest size from which calibration pays at every larger size of the grid
(uncorrected across sizes: a descriptive threshold).

**Learned agents.** ``--learned`` names main-job folders (comma-separated) (``python -m experiments.full_pipeline
--n-logs N --seeds K --seed S``); their per-seed ``J_real`` give the same differences for the learned
arms at their log sizes (``calibrated`` and ``calibrated_realism`` against ``interactive`` and the
best of ``static_myopic``, ``static_one_step``, ``static_awr``). A main-job size counts train and
held-out logs together.

Writes ``exact.csv``, ``learned.csv``, ``thresholds.csv``, ``results.md``, ``results.json`` and
``log_size.{png,pdf}`` under ``--out-dir``; each (task, size) cell's draws are kept under ``stages/``, so a
stopped run resumes by cells and a rerun with other ``--learned`` folders recomputes nothing exact.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from shiftbounds.dialogue.exact.log_size import CALIBRATED, log_draws, log_size_rows, size_rows, smallest_paying_size
from shiftbounds.dialogue.exact.study import prompted_paradigm
from shiftbounds.dialogue.prepare import make_task, prepare_task
from shiftbounds.dialogue.tasks import REAL_USERS, TASKS
from shiftbounds.figures import plot_log_size
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.workers import default_workers, run_jobs

LEARNED_CALIBRATED, LEARNED_LOGS_ONLY = ("calibrated", "calibrated_realism"), ("static_myopic", "static_one_step", "static_awr")


@dataclass(frozen=True)
class LogSizeConfig:
    """Options of ``experiments.log_size``."""

    tasks: tuple[str, ...] = field(default=("guess_number", "booking"), metadata={"help": f"tasks, from {sorted(TASKS)}"})
    horizon: int = field(default=4, metadata={"help": "agent turns H (the main job's)"})
    real_user: str = field(default="memory", metadata={"help": f"the real user, from {sorted(REAL_USERS)}"})
    accept_wrong: float = field(default=0.3, metadata={"help": "prompted simulator's accept-wrong rate (the main job's)"})
    leak: float = field(default=0.2, metadata={"help": "prompted simulator's leak rate (the main job's)"})
    sizes: tuple[int, ...] = field(default=(150, 300, 750, 1500, 3000, 7500, 15000), metadata={"help": "log sizes"})
    draws: int = field(default=20, metadata={"help": "independent log draws per size"})
    count_alpha: float = field(default=1.0, metadata={"help": "smoothing of the count-model simulator"})
    learned: tuple[str, ...] = field(default=(), metadata={"help": "main-job folders whose learned agents join the table", "resume": False})
    seed: int = field(default=0, metadata={"help": "seed of the log draws"})
    workers: int = field(default=0, metadata={"help": "(task, size) jobs at once; 0 = every core", "resume": False})
    out_dir: str = field(default="results/log_size/default", metadata={"help": "results folder", "resume": False})

    def __post_init__(self) -> None:
        if not self.tasks or any(t not in TASKS for t in self.tasks) or self.real_user not in REAL_USERS:
            raise ValueError(f"--tasks from {sorted(TASKS)} and --real-user from {sorted(REAL_USERS)}; got {self.tasks}, {self.real_user!r}")
        if self.horizon < 2 or self.draws < 2 or not self.sizes or min(self.sizes) < 1:
            raise ValueError(f"need --horizon >= 2, --draws >= 2 and sizes >= 1; got {self.horizon}, {self.draws}, {self.sizes}")
        missing = [f for f in self.learned if not (Path(f) / "results.json").is_file()]
        if missing:
            raise ValueError(f"--learned folders need a finished main job (results.json); missing in {missing}")


PRESETS = {"default": {}, "smoke": {"tasks": ("guess_number",), "horizon": 3, "sizes": (30, 120), "draws": 2}}


def exact_job(cfg: LogSizeConfig, task: str, n: int) -> list[dict]:
    """One (task, size) cell's draws, saved as a stage (``stages/draws_<task>_<n>.json``): a stopped run resumes by cells."""
    def make() -> list[dict]:
        prep = prepare_task(make_task(task, cfg.horizon), cfg.real_user)
        return log_draws(prep, n, cfg.draws, seed=cfg.seed, key=task, count_alpha=cfg.count_alpha)

    return StageCache(Path(cfg.out_dir) / "stages").json(f"draws_{task}_{n}", make)


def exact_rows(cfg: LogSizeConfig, workers: int) -> list[dict]:
    jobs = [(cfg, t, n) for t in cfg.tasks for n in cfg.sizes]
    done = dict(zip([(t, n) for _, t, n in jobs], run_jobs(exact_job, jobs, workers, label="log_size draws")))
    rows = []
    for task in cfg.tasks:
        interactive = prompted_paradigm(prepare_task(make_task(task, cfg.horizon), cfg.real_user), cfg.accept_wrong, cfg.leak)["J_real"]
        rows += [{"task": task, **r} for r in log_size_rows({n: done[(task, n)] for n in cfg.sizes}, float(interactive))]
    return rows


def learned_rows(folder: Path) -> list[dict]:
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    n, rows = results["config"]["n_logs"], []
    for task in results["config"]["tasks"]:
        rs = sorted((r for r in results["runs"] if r["task"] == task), key=lambda r: r["seed"])
        J = {arm: np.array([r["paradigms"][arm]["J_real"] for r in rs]) for arm in (*LEARNED_CALIBRATED, *LEARNED_LOGS_ONLY, "interactive")}
        rows += [{"task": task, "folder": str(folder), **r} for r in size_rows(n, J, calibrated=LEARNED_CALIBRATED, logs_only=LEARNED_LOGS_ONLY)]
    return rows


def thresholds(exact: list[dict], learned: list[dict]) -> list[dict]:
    return [{"task": task, "kind": kind, "calibrated": cal, "against": against,
             "smallest paying size": smallest_paying_size([r for r in rows if r["task"] == task], cal, against) or "not within the grid"}
            for kind, rows, cals in (("exact", exact, CALIBRATED), ("learned", learned, LEARNED_CALIBRATED)) if rows
            for task in dict.fromkeys(r["task"] for r in rows) for cal in cals for against in ("interactive", "best logs-only")]


def run(cfg: LogSizeConfig) -> dict:
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    exact = exact_rows(cfg, cfg.workers or default_workers())
    learned = [r for f in cfg.learned for r in learned_rows(Path(f))]
    limits = thresholds(exact, learned)
    write_json(out / "results.json", {"config": asdict(cfg), "exact": exact, "learned": learned, "thresholds": limits})
    for name, rows in (("exact", exact), ("learned", learned), ("thresholds", limits)):
        write_csv(out / f"{name}.csv", rows)
    cols = ["task", "n_logs", "calibrated", "against", "J_calibrated", "J_against", "mean", "ci", "sd", "mde", "p", "replicates", "pays"]
    atomic_write_text(out / "results.md", (
        "# How many logs calibration needs\n\nPaired J_real differences, 95 % t-interval over log draws (exact) or seeds "
        "(learned; `constant`: the differences do not vary); `mde`: minimum detectable effect (two-sided 0.05, power 0.8); "
        "`p`: exact sign-flip (Monte Carlo beyond 20 replicates); `pays`: mean above 0 with p < 0.05 (per size, uncorrected).\n\n"
        "## Smallest size from which calibration pays (at every larger size of the grid)\n\n" + markdown_table(limits)
        + "\n## Exact prediction\n\n" + markdown_table(exact, cols)
        + ("\n## Learned agents\n\n" + markdown_table(learned, cols) if learned else "")))
    plot_log_size(exact, learned, out / "log_size")
    return {"exact": exact, "learned": learned, "thresholds": limits}


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(LogSizeConfig, __doc__, PRESETS, argv, name="experiments.log_size")
    results = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "results.md").read_text())
    return results


if __name__ == "__main__":
    main()
