"""Modular addition with a noisy teacher: BC vs OPD vs NAIL students (docs/theory.md §5).

``python -m experiments.modadd [--preset smoke|default|cpu|paper] [options]``

For every chain length ``m`` (``--m 4,8,16,31``), trains (or loads from ``<out-dir>/``) a clean
teacher; then for every noise level ``eta``, teacher signal (``--teacher-signals sampled,full``:
one noisy-teacher token per position, or its whole distribution; the same for every method),
warm start (``--warm-starts 0,200``: steps of a shared BC phase that every method of a seed
starts from; 0 = random weights), method and seed trains a student with the same architecture and
budget, and evaluates greedy decoding on held-out prompts: full chain-of-thought exact match,
final-answer exact match and per-position accuracy, with per-seed paired differences against BC.
Each finished run (and each warm start) is saved under ``runs/`` and skipped when the same command
is run again; adding chain lengths, noise levels, signals, warm starts, methods or seeds reuses the
others. Outputs: ``results.json``, ``results.md``, ``runs.csv``, ``paired.csv`` and
``modadd.{png,pdf}`` (exact match against ``m`` per method, 95 % CIs over seeds); with
``--curve-every N`` also ``curves.csv`` and ``curves.{png,pdf}`` (held-out exact match every N
steps, bands over seeds) and ``speed.csv`` (which method reaches the solve threshold first, exact
sign test); ``--skip SIGNAL@ETA`` leaves cells out of the sweep.

Presets: ``smoke`` (seconds; tests), ``default`` (``m = 8``, eta in {0, 0.1, 0.2}, six methods
with the full teacher signal, 3 seeds), ``cpu`` (the paper's ``m = 31``, eta in {0, 0.2}, BC / OPD-F /
NAIL-F with the full teacher signal from a shared 1,500-step BC warm start on corrupted prefixes,
200 steps each with a decaying learning rate, 10 seeds; about 45 min on 2 CPU cores), ``dev`` (the
``cpu`` configuration at eta = 0 on 3 development seeds, ``--seed 1000``: how it was chosen),
``sweep`` (the earlier sweep over ``m = 8, 16, 31``, both teacher signals, from scratch and
warm-started, 3 seeds), ``confirm`` (the confirmatory run of docs/results.md: paper 2's information
structure at ``m = 31`` from random weights, 800 steps, 29 fresh seeds, the equal-information
control at eta = 0.2, curves every 50 steps; about 3.5 h on 2 cores, resumable), ``paper`` (``m = 31``, larger model and budget; for a GPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from shiftbounds.figures import plot_modadd, plot_modadd_curves
from shiftbounds.modadd import ModAddTask, evaluate, sample_prompts
from shiftbounds.modadd_study import (
    ModAddConfig,
    curve_rows,
    get_teacher,
    jobs,
    report_md,
    run_seed,
    solve_tables,
    speed_tables,
    summarise,
)
from shiftbounds.utils.cli import exit_on_stale, load_config_file, parse_config
from shiftbounds.utils.configs import recorded
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.seeding import torch_generator
from shiftbounds.utils.workers import default_workers, one_torch_thread, run_jobs

PRESETS = {
    "default": {},
    "smoke": {"m": (3, 4), "etas": (0.0, 0.2), "methods": ("bc", "nail-F"), "teacher_signals": ("sampled", "full"),
              "warm_starts": (0, 5), "seeds": 2, "steps": 10, "batch": 16, "teacher_steps": 40, "n_eval": 100, "d_model": 32,
              "workers": 1},
    "cpu": {"m": (31,), "etas": (0.0, 0.2), "methods": ("bc", "opd-F", "nail-F"), "teacher_signals": ("full",),
            "warm_starts": (1500,), "warm_corrupt": 0.3, "seeds": 10, "steps": 200, "batch": 64, "lr_decay": True,
            "d_model": 48, "teacher_steps": 800, "n_eval": 500},
    "dev": {"m": (31,), "etas": (0.0,), "methods": ("bc", "opd-F", "nail-F"), "teacher_signals": ("full",),
            "warm_starts": (1500,), "warm_corrupt": 0.3, "seeds": 3, "steps": 200, "batch": 64, "lr_decay": True,
            "d_model": 48, "teacher_steps": 800, "n_eval": 500, "seed": 1000, "out_dir": "results/modadd/dev/d"},
    "sweep": {"m": (8, 16, 31), "etas": (0.0, 0.2), "methods": ("bc", "opd-F", "nail-F"),
              "teacher_signals": ("sampled", "full"), "warm_starts": (0, 100), "seeds": 3, "steps": 600, "batch": 32,
              "d_model": 48, "teacher_steps": 800, "n_eval": 500},
    # issue 51's confirmatory run, stated in docs/results.md before it ran: paper 2's information
    # structure at m = 31 from random weights, 800 steps (pilot c), 29 fresh seeds (80 % power for a
    # solve-rate difference of 0.3 at Holm's first bar 0.025), the equal-information control at eta 0.2
    "confirm": {"m": (31,), "etas": (0.0, 0.2), "methods": ("bc", "opd-F", "nail-F"), "teacher_signals": ("paper", "full"),
                "skip": ("full@0.0",), "warm_starts": (0,), "seeds": 29, "steps": 800, "batch": 64, "lr_decay": True,
                "d_model": 48, "teacher_steps": 800, "n_eval": 500, "curve_every": 50, "seed": 3000,
                "out_dir": "results/modadd/confirm"},
    "paper": {"m": (31,), "etas": (0.0, 0.1, 0.2, 0.3), "seeds": 3, "steps": 3000, "batch": 256, "d_model": 256,
              "n_layer": 4, "teacher_steps": 6000, "n_eval": 2000, "device": "auto"},
}


def run(cfg: ModAddConfig, stream: TextIO | None = None) -> dict:
    """Train everything that is not saved yet (the teachers here, the (cell, seed) jobs on
    ``--workers`` processes, each on one torch thread), then write results and the figure."""
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    teachers = []
    with one_torch_thread():  # the teachers are trained and measured here as the students are in the workers: same bytes on any machine
        for m in cfg.m:
            task = ModAddTask(cfg.p, m)
            teacher, acc = get_teacher(cfg, task, stream)
            eval_prompts = sample_prompts(task, cfg.n_eval, torch_generator(cfg.seed, "eval_prompts", m))
            teachers.append({"m": m, "consistent_accuracy": acc, "chain_exact": evaluate(task, teacher, eval_prompts).chain_exact})
    workers = cfg.workers or default_workers()
    runs = [r for rs in run_jobs(run_seed, [(cfg, *job) for job in jobs(cfg)], workers, label=f"modadd seeds on {workers} workers") for r in rs]
    return write_outputs(cfg, out, teachers, runs)


def write_outputs(cfg: ModAddConfig, out: Path, teachers: list[dict], runs: list[dict]) -> dict:
    """``results.json``, ``runs.csv``, ``solves.csv``, ``mcnemar.csv``, ``paired.csv``,
    ``results.md`` and the figure from the runs; with curves (``--curve-every``) also ``speed.csv``,
    ``curves.csv`` and the curves figure."""
    rows, paired = summarise(cfg, runs)
    solves, mcnemar = solve_tables(cfg, runs)
    results = {"config": recorded(cfg), "teachers": teachers, "rows": rows, "solves": solves, "mcnemar": mcnemar,
               "paired": paired, "runs": runs}
    if cfg.curve_every:
        results["speed"] = speed_tables(cfg, runs)
        write_csv(out / "speed.csv", results["speed"])
        write_csv(out / "curves.csv", curve_rows(runs))
        plot_modadd_curves(results, out / "curves")
    write_json(out / "results.json", results)
    write_csv(out / "runs.csv", [{k: v for k, v in r.items() if k not in ("per_position", "curve")} for r in runs])
    write_csv(out / "solves.csv", solves)
    write_csv(out / "mcnemar.csv", mcnemar)
    write_csv(out / "paired.csv", paired)
    atomic_write_text(out / "results.md", report_md(cfg, teachers, rows, solves, mcnemar, paired, results.get("speed")))
    plot_modadd(results, out / "modadd")
    return results


def retabulate(out: Path) -> dict:
    """The tables of a finished run recomputed from its ``results.json`` (teachers and per-seed runs)
    with today's statistics; no student is trained. The saved config is the run's."""
    old = read_json(out / "results.json")
    saved = load_config_file(out / "config.json", ModAddConfig)  # the run's own settings, lists as tuples
    return write_outputs(ModAddConfig(**{**saved, "out_dir": str(out)}), out, old["teachers"], old["runs"])


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(ModAddConfig, __doc__, PRESETS, argv, name="experiments.modadd")
    results = retabulate(Path(cfg.out_dir)) if cfg.retabulate else exit_on_stale(run, cfg)
    print(markdown_table(results["rows"]))
    print(f"wrote {cfg.out_dir}/results.md, runs.csv, results.json, modadd.png/pdf")
    return results


if __name__ == "__main__":
    main()
