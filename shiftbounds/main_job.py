"""The main job's run (``experiments.full_pipeline``), above the figures it draws: every (task, seed)
on worker processes, the exact references, every table, report and figure written under the
output folder, and the horizon sweep (one run per horizon and the compounding analysis). The stages
are :mod:`shiftbounds.dialogue.neural.pipeline`'s, the tables :mod:`shiftbounds.dialogue.neural.analysis`'s;
the learner and variance studies run the main job through :func:`run` too.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from shiftbounds.dialogue.exact.references import exact_gaps, exact_references
from shiftbounds.dialogue.neural import compounding as C
from shiftbounds.dialogue.neural.analysis import (
    headroom_rows,
    optimisation_rows,
    paired_rows,
    plateau_rows,
    power_rows,
    report_md,
    summarise,
    sweep_md,
)
from shiftbounds.dialogue.neural.pipeline import PipelineConfig, run_task_seed
from shiftbounds.dialogue.prepare import make_task
from shiftbounds.figures import plot_compounding_sweep, plot_pipeline_curves, plot_pipeline_shifts, plot_pipeline_user_models
from shiftbounds.utils.configs import flat_dict
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.progress import format_seconds
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.workers import default_workers, run_jobs


def view(cfg: PipelineConfig, task: str, horizon: int) -> tuple:
    """The exact engine's view of ``task`` at ``horizon`` under the run's real user and prompted simulator."""
    return task, horizon, cfg.reward_source, cfg.real_user, cfg.accept_wrong, cfg.leak


def run(cfg: PipelineConfig) -> dict:
    """Run (or resume) every stage, write every output, return the results dict.

    The (task, seed) runs go to ``--workers`` processes, each on one torch thread, so every output
    file except ``timings.json`` / ``timings.md`` (wall seconds) is the same, byte for byte, with
    any number of workers, and whether the run went through at once or was killed and resumed any
    number of times. Refuses an ``--out-dir`` made under settings that change results (naming them)."""
    out = Path(cfg.out_dir)
    guard_resume(out, replace(cfg, workers=0))  # the worker count is recorded in timings only: it changes no result
    jobs = [(cfg, task, k) for task in cfg.tasks for k in range(cfg.seeds)]
    workers = cfg.workers or default_workers()
    t0 = time.perf_counter()
    runs = run_jobs(run_task_seed, jobs, workers, label=f"full_pipeline (task, seed) runs on {workers} workers")
    times = {"wall_seconds": time.perf_counter() - t0, "workers": workers}
    refs = {task: exact_references(*view(cfg, task, cfg.horizon)) for task in cfg.tasks}
    main, per_turn, curves, sims = summarise(cfg, runs, refs)
    paired = paired_rows(cfg, runs)
    power = power_rows(paired)
    plateau = plateau_rows(curves)
    gaps = optimisation_rows(cfg, runs, refs)
    headroom = headroom_rows(cfg, runs)
    results = {"config": flat_dict(replace(cfg, workers=0)), "main": main, "paired": paired, "power": power, "plateau": plateau,
               "optimisation": gaps, "headroom": headroom,
               "per_turn": per_turn, "simulators": sims, "curves": curves, "runs": runs}
    write_json(out / "results.json", results)
    write_csv(out / "main.csv", main)
    write_csv(out / "paired.csv", paired)
    write_csv(out / "power.csv", power)
    write_csv(out / "plateau.csv", plateau)
    write_csv(out / "optimisation.csv", gaps)
    write_csv(out / "headroom.csv", headroom)
    write_csv(out / "per_turn.csv", per_turn)
    write_csv(out / "curves.csv", curves)
    write_csv(out / "simulators.csv", sims)
    md = report_md(cfg, main, paired, headroom, gaps, power, plateau, sims)
    atomic_write_text(out / "results.md", md)
    stage_s = [read_json(p) for p in sorted(out.glob("*/seed*/timings.json"))]
    names = list(dict.fromkeys(n for t in stage_s for n in t))
    stage_rows = [{"stage": n, "mean_seconds": float(np.mean([t[n] for t in stage_s if n in t])),
                   "runs": sum(n in t for t in stage_s)} for n in names]
    write_json(out / "timings.json", {"this_call": times, "stages": stage_rows})
    atomic_write_text(out / "timings.md", f"# Wall time\n\nThis call: {format_seconds(times['wall_seconds'])} on "
                      f"{workers} workers (one torch thread each).\n\nPer stage, over the (task, seed) runs whose stages were "
                      "computed (one thread each):\n\n" + (markdown_table(stage_rows) if stage_rows else "(none)\n"))
    plot_pipeline_curves(results, out / "learning_curves")
    plot_pipeline_shifts(results, out / "per_turn_shifts")
    plot_pipeline_user_models(results, out / "user_models")
    return results


def run_sweep(cfg: PipelineConfig) -> dict:
    """``--sweep``: the job once per horizon (``<out_dir>/H<h>/``, each a complete run that resumes
    on its own), then every arm's training-to-real gap against its bound over ``H``
    (:mod:`shiftbounds.dialogue.neural.compounding`): ``sweep.csv`` (per horizon), ``growth.csv``
    (slopes in ``H``), ``sweep.md``, ``results.json`` and the figure ``compounding``."""
    out = Path(cfg.out_dir)
    guard_resume(out, replace(cfg, workers=0))
    by_h = {h: run(replace(cfg, horizon=h, sweep=(), out_dir=str(out / f"H{h}")))["runs"] for h in cfg.sweep}
    span = 1.0 + make_task(cfg.tasks[0], cfg.sweep[0], cfg.reward_source).wrong_penalty
    rows = C.sweep_rows(by_h, span)
    exact = [g for task in cfg.tasks for h in cfg.sweep for g in exact_gaps(*view(cfg, task, h))]
    for g in exact:
        g["gap_over_bound"] = g["gap"] / g["bound"] if g["bound"] > 0 else float("nan")
    growth = C.growth_rows(by_h, span, rng=numpy_rng(cfg.seed, "sweep growth"))
    results = {"config": flat_dict(replace(cfg, workers=0)), "reward_span": span, "sweep": rows, "exact": exact, "growth": growth}
    write_json(out / "results.json", results)
    write_csv(out / "sweep.csv", rows + exact)
    write_csv(out / "growth.csv", growth)
    atomic_write_text(out / "sweep.md", sweep_md(cfg, span, rows, exact, growth))
    plot_compounding_sweep(results, out / "compounding")
    return results
