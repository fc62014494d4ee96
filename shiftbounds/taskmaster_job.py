"""The Taskmaster-4 study's run (``experiments.real_dialogue``), above the figures it draws: every
stage computed (or loaded) in dependency order on worker processes, every table, report and figure
written under the output folder, and the retabulation of a finished run from its ``results.json``.
The stages are :mod:`shiftbounds.conversations.taskmaster_run`'s, the tables
:mod:`shiftbounds.conversations.taskmaster_report`'s.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import TextIO

from accelerate import PartialState

from shiftbounds.conversations.models import METADATA
from shiftbounds.conversations.taskmaster_report import goal_outcomes, per_turn_rows, results_md, summarise
from shiftbounds.conversations.taskmaster_run import (
    MEASURES,
    RealDialogueConfig,
    Stages,
    baselines,
    compute_stage,
    stage_name,
    stage_needs,
)
from shiftbounds.conversations.taskmaster_study import ARMS
from shiftbounds.figures.text import (
    plot_paired_differences,
    plot_paradigm_success,
    plot_text_realism,
    plot_text_sycophancy,
    plot_training_curves,
)
from shiftbounds.utils.cli import load_config_file
from shiftbounds.utils.configs import build, earlier_values
from shiftbounds.utils.io import atomic_write_text, guard_resume, read_json, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.workers import default_workers, one_torch_thread, run_graph


def run(cfg: RealDialogueConfig, stream: TextIO | None = None) -> dict:
    """Run (resuming finished stages), write every output, return the results dict. With
    ``--one-thread`` (the default) in one process, each unsaved stage is computed by one of
    ``--workers`` processes on one torch thread as soon as the stages it needs are saved
    (:func:`stage_needs`), so every output is the same bytes with any
    number of workers and whatever ``--threads``; under ``accelerate launch`` the processes train
    data-parallel."""
    t0 = time.perf_counter()
    state = PartialState()
    out = Path(cfg.out_dir)
    if state.is_main_process:  # one process on --threads: its rounding depends on them
        guard_resume(out, cfg, environment=() if cfg.one_thread else ("torch_threads",))
    state.wait_for_everyone()
    st = StageCache(out / "stages", save=state.is_main_process, barrier=state.wait_for_everyone)
    seconds: dict[str, float] = {}
    needs = stage_needs(cfg)
    workers = (cfg.workers or default_workers()) if cfg.one_thread and state.num_processes == 1 else 1
    if cfg.one_thread and state.num_processes == 1:  # each unsaved stage in a worker once the stages it needs are saved
        todo = {key: (cfg, key) for key in needs if not st.saved(stage_name(key))}
        for done in run_graph(compute_stage, todo, needs, workers, label="real_dialogue stages").values():
            seconds.update(done)
    keys = list(needs)
    prog = Progress(len(keys), "real_dialogue", stream=stream, enabled=state.is_main_process)
    with one_torch_thread() if cfg.one_thread else contextlib.nullcontext():
        stages = Stages(cfg, st)
        done = {}
        for key in keys:  # every stage saved by the workers is loaded; in one process on --threads, computed here
            done[key] = stages.stage(key)
            prog.update(note=stage_name(key))
    measures = {m: done[m,] for m in MEASURES}
    sims = sorted({ARMS[a][1] for a in cfg.arms} - {None})  # the starting point against each arm's training simulator
    runs = [{"arm": "sft", "seed": seed, **done["eval", "sft", seed], **{k: v for sim in sims for k, v in done["eval_vs", sim, seed].items()}}
            for seed in cfg.seeds]
    runs += [{"arm": b, "seed": seed, **done["eval", b, seed]} for b in baselines(cfg) for seed in cfg.seeds]
    for seed in cfg.seeds:
        for arm in cfg.arms:
            meta = json.loads((done["agent", arm, seed] / METADATA).read_text())
            runs.append({"arm": arm, "seed": seed, "training_reward": meta["reward"], "training_success": meta["success"],
                         "zero_variance_steps": meta["training_signal"]["zero_variance_steps"],
                         **({"checkpoint_curve": meta["curve"]} if "curve" in meta else {}), **done["eval", arm, seed]})
    ids = [g.id for g in stages.goals]
    results = summarise(cfg, runs, measures) | {"goals": goal_outcomes(runs, ids), "goal_ids": ids}
    if state.is_main_process:
        write_outputs(out, results, {**seconds, **st.seconds}, {"wall_seconds": time.perf_counter() - t0, "workers": workers,
                                                                "processes": state.num_processes})
    return results


def write_outputs(out: Path, results: dict, seconds: dict, call: dict | None = None) -> None:
    """``results.json``, ``results.md``, ``runs.csv``, ``paired.csv``, ``training.csv``, ``per_turn.csv``, the figures
    and ``timings.json``: each stage's wall seconds, kept beside the stage by whichever call computed
    it (one that was stopped before it ended included), and each finished call's wall seconds and
    workers (a resumed run adds its own to those of the calls before)."""
    write_json(out / "results.json", results)
    before = read_json(out / "timings.json") if (out / "timings.json").is_file() else {}
    kept = StageCache(out / "stages").saved_seconds()  # this call's stages too: each is kept once saved
    write_json(out / "timings.json", {"seconds_per_stage_computed": {**before.get("seconds_per_stage_computed", {}), **kept},
                                      "calls": before.get("calls", []) + ([{**call, "stages_computed": len(seconds)}] if call else [])})
    write_csv(out / "runs.csv", results["runs"])
    write_csv(out / "paired.csv", results["paired"])
    write_csv(out / "training.csv", results["training"])
    if results.get("goals"):  # runs before 2026-12-07 kept per-seed successes only
        write_csv(out / "goals.csv", results["goals"])
    write_csv(out / "per_turn.csv", per_turn_rows(results))
    md = results_md(results)
    atomic_write_text(out / "results.md", md)
    plot_text_realism(results, out / "realism_by_turn")
    plot_text_sycophancy(results, out / "sycophancy")
    plot_paradigm_success(results, out / "paradigms")
    plot_paired_differences(results, out / "paired")
    if results.get("training_curves"):
        plot_training_curves(results, out / "training_curves")


def retabulate(out: Path) -> dict:
    """The tables of a finished run recomputed from its ``results.json`` alone (per-seed successes,
    training trends and measurements), with today's statistics; every output but the figures'
    inputs that do not change is rewritten. The saved config is the run's, whatever the command line."""
    old = read_json(out / "results.json")
    saved = load_config_file(out / "config.json", RealDialogueConfig)  # the run's own settings, lists as tuples
    saved = {**earlier_values(RealDialogueConfig), **saved}
    cfg = build(RealDialogueConfig, {**saved, "out_dir": str(out)})
    runs: dict = {}
    for r in old["runs"]:
        runs.setdefault((r["arm"], r["seed"]), {"arm": r["arm"], "seed": r["seed"]})[r["user"]] = {"mean": r["success"], "n": r["n"]}
    measures = {k: old[k] for k in ("realism", "discriminator", "sycophancy", "logged_confirmations")}
    results = summarise(cfg, list(runs.values()), measures, old["training"], old.get("training_curves", {}),
                        old.get("checkpoint_curves", {}))
    if old.get("goals"):
        results |= {"goals": old["goals"], "goal_ids": old["goal_ids"]}
    write_outputs(out, results, {})
    return results
