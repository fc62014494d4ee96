"""The main job: Static Context RL vs Interactive RL vs Calibrated Interactive RL, end to end.

``python -m experiments.full_pipeline [--preset smoke|default|gpu] [options]``

For every task and seed (docs/pipeline.md):

1. **logs** — ``pi_data`` talks to the real user; a train / held-out split (JSONL, documented in
   ``shiftbounds.dialogue.logs``);
2. **SFT agent** — the shared initialisation of every arm (reported as the ``sft`` row);
3. **calibrated simulator** — SFT of a transformer user model on the train logs' user turns (goal
   and history as input), a realism discriminator, and ``--realism-steps`` of
   discriminator-reward fine-tuning (a second calibrated simulator);
4. **RL** — one policy-gradient algorithm (group baseline, exact KL to the SFT agent), the same
   budget for each arm: Static Context RL on logged contexts with the judge's reward (myopic and
   one-step variants, and advantage-weighted regression on the judged return-to-go: the
   multi-turn logs-only baseline), Interactive RL against the prompted simulator, Calibrated
   Interactive RL against each calibrated simulator (paid by their simulator's acceptance), and
   the oracle against the real user (the learner's ceiling);
5. **measurements** — ``J_real`` (judge, real user) and ``J_sim`` over training, per-turn
   ``eps_t``, ``Delta_t``, ``delta_t``, ``D_t``, ``rho_t`` with CIs (estimators in
   ``shiftbounds.dialogue.neural.measures``), the simulators' sycophancy and realism, and per-seed paired
   differences of ``J_real`` between arms.

The stages are library functions (``shiftbounds.dialogue.neural.pipeline``); the (task, seed)
runs go to ``--workers`` spawned processes (default: every core), each on one torch thread, so the
outputs are the same bytes with any number of workers (``shiftbounds.utils.workers``).

Presets: ``smoke`` (about 15 s on 2 cores; the tests), ``default`` (the main results, 20 seeds),
``power`` (348 seeds: what a power calculation from the default run asks for to decide Calibrated
against Interactive RL; about 10 h on 2 cores), ``sweep`` (the job at H = 2..6: compounding in
learned agents),
``gpu`` (wider models, more logs and steps; ``--device auto`` picks the GPU).

Outputs under ``--out-dir`` (default ``results/full_pipeline/<preset>/``): ``results.json``,
``results.md`` (main table with 95 % CIs over seeds, the paired differences with exact sign-flip
p-values and Holm's correction over the whole run, and the seeds each comparison needs),
``main.csv``, ``paired.csv``, ``power.csv``, ``plateau.csv``, ``headroom.csv`` (the share of the oracle's
headroom over Interactive RL each arm recovers), ``optimisation.csv`` (each arm's objective against
its exact optimum), ``per_turn.csv``, ``curves.csv``, ``simulators.csv``, ``config.json`` (settings
and environment; ``--config`` reruns it), ``timings.json`` / ``timings.md`` and figures (PNG +
PDF). Every stage is saved under ``<task>/seed<k>/`` and skipped on a rerun; RL resumes from its
last evaluation; a rerun with settings that change results is refused.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, replace
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
from shiftbounds.dialogue.neural.pipeline import LEGACY, PipelineConfig, run_task_seed
from shiftbounds.dialogue.prepare import make_task
from shiftbounds.figures import plot_compounding_sweep, plot_pipeline_curves, plot_pipeline_shifts, plot_pipeline_user_models
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.progress import format_seconds
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.workers import default_workers, run_jobs

PRESETS = {
    "default": {},
    "smoke": {"n_logs": 80, "sft_steps": 30, "disc_steps": 10, "realism_steps": 5, "rl_steps": 10, "eval_every": 5,
              "n_eval": 200, "n_curve": 50, "seeds": 2, "horizon": 3, "d_model": 32, "n_layer": 1},
    # the seeds the default run's power calculation asks for (results/full_pipeline/default/power.csv):
    # Calibrated - Interactive, the paper's comparison, at its observed mean difference and paired SD,
    # two-sided t-test at 0.05 / 28 (Holm's first step over the run's 28 comparisons), power 0.8:
    # 193 seeds on guess_number (0.030, SD 0.103), 348 on booking (0.015, SD 0.070); the larger is taken.
    # About 348 / 20 x 36 min = 10.4 h on 2 cores.
    "power": {"seeds": 348},
    # compounding in learned agents: the same job at H = 2..6 against the memoryless real user (the
    # memory user's exact view needs 8.7 GB per process at H = 5 and over 17 GB at H = 6); one
    # task, 10 seeds per horizon, without the realism-tuned simulator
    "sweep": {"sweep": (2, 3, 4, 5, 6), "real_user": "memoryless", "tasks": ("guess_number",), "seeds": 10, "realism_steps": 0},
    "gpu": {"n_logs": 5000, "d_model": 256, "n_layer": 4, "sft_steps": 3000, "disc_steps": 1000, "realism_steps": 500,
            "rl_steps": 3000, "goals_per_step": 64, "group": 8, "n_eval": 20000, "n_curve": 2000, "seeds": 20,
            "device": "auto"},
}


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
    guard_resume(out, replace(cfg, workers=0), legacy=LEGACY)  # the worker count is recorded in timings only: it changes no result
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
    results = {"config": asdict(replace(cfg, workers=0)), "main": main, "paired": paired, "power": power, "plateau": plateau,
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
    guard_resume(out, replace(cfg, workers=0), legacy=LEGACY)
    by_h = {h: run(replace(cfg, horizon=h, sweep=(), out_dir=str(out / f"H{h}")))["runs"] for h in cfg.sweep}
    span = 1.0 + make_task(cfg.tasks[0], cfg.sweep[0], cfg.reward_source).wrong_penalty
    rows = C.sweep_rows(by_h, span)
    exact = [g for task in cfg.tasks for h in cfg.sweep for g in exact_gaps(*view(cfg, task, h))]
    for g in exact:
        g["gap_over_bound"] = g["gap"] / g["bound"] if g["bound"] > 0 else float("nan")
    growth = C.growth_rows(by_h, span, rng=numpy_rng(cfg.seed, "sweep growth"))
    results = {"config": asdict(replace(cfg, workers=0)), "reward_span": span, "sweep": rows, "exact": exact, "growth": growth}
    write_json(out / "results.json", results)
    write_csv(out / "sweep.csv", rows + exact)
    write_csv(out / "growth.csv", growth)
    atomic_write_text(out / "sweep.md", sweep_md(cfg, span, rows, exact, growth))
    plot_compounding_sweep(results, out / "compounding")
    return results


def main(argv: list[str] | None = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = parse_config(PipelineConfig, __doc__, PRESETS, argv, name="experiments.full_pipeline")
    if cfg.sweep:
        results = exit_on_stale(run_sweep, cfg)
        print((Path(cfg.out_dir) / "sweep.md").read_text())
        print(f"wrote {cfg.out_dir}: sweep.md, sweep.csv, growth.csv, results.json, compounding.png/pdf, and one full run per horizon under H<h>/")
        return results
    results = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "results.md").read_text())
    print(f"wrote {cfg.out_dir}: results.md, results.json, main.csv, paired.csv, power.csv, plateau.csv, headroom.csv, optimisation.csv, "
          "per_turn.csv, curves.csv, simulators.csv, "
          "timings.md, figures")
    return results


if __name__ == "__main__":
    main()
