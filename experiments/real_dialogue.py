"""Calibrated interactive RL on real human dialogues (Taskmaster-4; Taskmaster-3 for per-turn realism),
wired from :mod:`shiftbounds.conversations` on TRL.

``python -m experiments.real_dialogue [--preset smoke|cpu|paper_requests|train_split|paper|gpu] [options]``

``cpu``: confirmatory run S, Calibrated Interactive RL whose simulator opens with the logged human
request, trained on the calibration split's requests (``--rl-split calibration``: requests no agent or
simulator learned from), against the SFT agent and the ``sft_plus_calibration`` baseline on every
held-out goal, ten seeds (96 min on 2 cores; confirmatory run T: ``--seeds 26,...,37``);
``paper_requests``: confirmatory run U, the paper's comparison on that configuration (Static Context
RL, Interactive RL against the prompted simulator and that arm) on T's seeds (an ``--out-dir``
holding T's stages resumes from them); ``train_split``: the earlier confirmatory configuration (the
cpu preset until 2026-12-06), Calibrated Interactive RL trained on the train split's goals, six
seeds, 128 held-out goals; ``paper``: that configuration with Static Context RL, Interactive RL
(prompted simulator) and Calibrated Interactive RL on eight seeds (an ``--out-dir`` of a train_split
run resumes from its stages).

Stages (each saved under ``--out-dir``/stages and skipped on a rerun; each computed in one of
``--workers`` processes on one torch thread as soon as the stages it needs are saved, so the
outputs are the same bytes on any number of cores):

1. **data** — Taskmaster-4 and Taskmaster-3 as conversations, the agent's API calls folded into its
   turns, split by dialogue into train / calibration / held-out;
2. **base** — a byte-level BPE tokenizer trained on the two corpora's train splits and a small
   GPT-2 pretrained on their dialogues (both roles, API calls included; with ``--goal-annotated``
   each Taskmaster-4 dialogue also once led by its user's goal), saved as a Hugging Face folder from
   which every simulator and agent starts (or ``--base-model``: any local chat model);
3. **user models** — the calibrated simulator (SFT on the train split's user turns), the held-out
   user model (the same SFT on the *held-out* split: a model of people the agents never met), the
   Taskmaster-3 calibrated simulator; the prompted simulator is the base model with a persona
   prompt, and the rule-based sycophantic customer has explicit knobs;
4. **realism** — NLL of held-out human user turns by turn; on Taskmaster-3 a real-vs-simulated
   discriminator's held-out AUC by turn; **sycophancy** — accept-right, accept-wrong and goal
   disclosure of every user model and of the logged people on Taskmaster-4 probes, and how many of
   the logged confirmations show an order other than the goal's (what a model of the logs could
   learn to reject from);
5. **agents** — the SFT agent (the paradigms' shared starting point), then, per seed, Static Context
   RL (logged contexts), Interactive RL against the rule-based and the prompted simulator, and
   Calibrated Interactive RL (and, with ``--arms calibrated_opening``, Calibrated Interactive RL
   whose simulator opens with the training dialogue's logged human request; ``calibrated_half_opening``:
   in half the dialogues, drawn per dialogue; with ``--rl-split calibration``, RL trains on the
   calibration split's dialogues, requests no agent or simulator learned from, and the baseline
   ``sft_plus_calibration``, the SFT recipe on those dialogues too, is trained and compared), all with one ``GRPOConfig``, paid by goal success (the order placed
   is exactly the goal's); every agent is evaluated against two evaluation users — the held-out user
   model, and the same model with a rule that rejects a wrong order it would accept — and against
   its training simulator (the sim-to-real gap), where the SFT agent is evaluated too (what RL
   gained where it trained); a third evaluation user opens with the held-out
   dialogue's logged human request and continues as the rule-corrected model, which measures what
   the agents do with a real request even where the user models cannot state one.

Outputs: ``results.json``, ``results.md``, ``runs.csv`` (every agent, seed and evaluation user),
``goals.csv`` (the same, per evaluation goal: one outcome digit per goal, in the order of
``results.json``'s ``goal_ids``),
``paired.csv`` (per-seed paired differences with 95 % intervals, the exact sign-flip p the verdict
rests on, the t-test's p, and the verdict after Holm's correction over each evaluation user's
comparisons, :func:`comparisons`), ``training.csv`` (each GRPO run's training reward, first and last
quarter, and with ``--curve-every`` the checkpoint curves' fitted rises), ``per_turn.csv``, figures
``realism_by_turn``, ``sycophancy``, ``paradigms``, ``paired`` (each comparison's interval per evaluation user),
``training_curves`` (PNG and PDF),
``config.json``, ``timings.json``.
``--estimate-only`` prints the device memory each stage needs, from the model's config, before any
weights are loaded (:mod:`shiftbounds.utils.memory`).
Multi-GPU or multi-machine: ``accelerate launch [--multi_gpu] --num_processes N -m
experiments.real_dialogue ...`` (TRL trains data-parallel; measurements run on every process and
only the main one writes).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import TextIO

from accelerate import PartialState

from shiftbounds.conversations.models import METADATA
from shiftbounds.conversations.pretrained import SMOLLM2, cache_home
from shiftbounds.conversations.taskmaster import CUSTOMER_PERSONA
from shiftbounds.conversations.taskmaster_report import goal_outcomes, per_turn_rows, results_md, summarise
from shiftbounds.conversations.taskmaster_run import (
    LEGACY,
    MEASURES,
    RealDialogueConfig,
    Stages,
    baselines,
    compute_stage,
    memory_estimate,
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
from shiftbounds.utils.cli import exit_on_stale, load_config_file, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, read_json, write_csv, write_json
from shiftbounds.utils.memory import format_estimate
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.workers import default_workers, one_torch_thread, run_graph

# frozen before the first confirmatory run (docs/results.md): greedy user models, which state their goal in >= 0.7
# of openings; GRPO as development configuration H (chosen on seeds 100-101 and calibration goals); Calibrated
# Interactive RL against the SFT agent on six fresh seeds, the fewest at which the exact sign-flip test can fall
# below 0.05 (79 min on 2 cores; the other arms: --arms, or the paper preset); the cpu preset until 2026-12-06
TRAIN_SPLIT = {"user_temperature": 0.0, "arms": ("calibrated",), "seeds": tuple(range(6)), "rl_steps": 100, "rl_batch": 32,
               "rl_lr": 3e-5, "credit_weight": 0.5, "rl_temperature": 0.7, "curve_every": 10}
# confirmatory run S (docs/results.md): that configuration with the arm that opens with a logged request, trained on
# the calibration split's requests, every held-out goal, ten fresh seeds, with the sft_plus_calibration baseline
# (96 min on 2 cores); confirmatory run T is this preset with --seeds 26,...,37
CPU = {**TRAIN_SPLIT, "arms": ("calibrated_opening",), "rl_split": "calibration", "n_eval": 552, "seeds": tuple(range(16, 26))}

PRESETS = {
    "smoke": {"n_dialogues": 40, "n_tm3": 40, "vocab_size": 400, "d_model": 32, "n_layer": 1, "max_len": 256,
              "pretrain_steps": 3, "sft_steps": 3, "user_steps": 2, "batch": 4, "rl_steps": 1, "rl_batch": 4,
              "num_generations": 2, "turns": 2, "max_new": 12, "user_new": 8, "n_eval": 4, "seeds": (0, 1), "n_probe": 6,
              "n_disc": 8, "classifier_steps": 2, "independent_vocab_size": 400, "independent_d_model": 32,
              "independent_n_layer": 1, "independent_pretrain_steps": 2, "curve_every": 1,
              "curve_users": ("held-out user model",)},
    "cpu": CPU,
    # confirmatory run U (docs/results.md): the comparison the paper makes on the cpu configuration, Static Context
    # RL and Interactive RL (prompted simulator) beside the arm of run T, on T's twelve seeds (an --out-dir holding
    # T's stages trains only the two new arms)
    "paper_requests": {**CPU, "arms": ("static", "interactive_prompted", "calibrated_opening"), "seeds": tuple(range(26, 38))},
    "train_split": TRAIN_SPLIT,
    # the comparison the paper makes, on the train_split configuration (the --out-dir of a train_split run resumes):
    # Static Context RL, Interactive RL against the prompted simulator and Calibrated Interactive RL, each against the
    # SFT agent and Calibrated against the other two, one Holm family of five per evaluation user; eight seeds, the
    # fewest at which the exact sign-flip test can pass Holm's first step (2 / 2^8 < 0.05 / 5)
    "paper": {**TRAIN_SPLIT, "arms": ("static", "interactive_prompted", "calibrated"), "seeds": tuple(range(8))},
    # paper 1's comparison at pretrained scale (issue 50): SmolLM2-135M-Instruct (`shiftbounds base-model`) as the base of
    # the agent and the user models, the prompted SmolLM2 user (the persona chosen on the development split) as
    # Interactive RL's simulator, Calibrated Interactive RL against SmolLM2 calibrated on the train split's people, Static
    # Context RL on the logged contexts; GRPO with LoRA adapters (rank 16); twelve seeds; a development configuration
    # until its RL settings are chosen on seeds 100-101 and calibration goals (docs/llm.md)
    "gpu": {"base_model": str(cache_home() / SMOLLM2.name), "arms": ("static", "interactive_prompted", "calibrated"),
            "persona": CUSTOMER_PERSONA, "user_temperature": 0.0, "lora_rank": 16, "max_len": 1024, "sft_steps": 600,
            "user_steps": 300, "sft_lr": 3e-5, "batch": 8, "rl_steps": 100, "rl_batch": 32, "rl_lr": 2e-5, "credit_weight": 0.5,
            "rl_temperature": 0.7, "turns": 2, "max_new": 192, "user_new": 48, "n_eval": 552, "seeds": tuple(range(12)),
            "curve_every": 10},
}


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
        guard_resume(out, cfg, environment=() if cfg.one_thread else ("torch_threads",), legacy=LEGACY)
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
    saved = {**LEGACY, **saved}
    cfg = RealDialogueConfig(**{**saved, "out_dir": str(out)})
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


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(RealDialogueConfig, __doc__, {"default": PRESETS["cpu"], **PRESETS}, argv, name="experiments.real_dialogue")
    if cfg.retabulate:
        results = retabulate(Path(cfg.out_dir))
        print((Path(cfg.out_dir) / "results.md").read_text())
        return results
    if cfg.estimate_only:

        est = memory_estimate(cfg)
        print(format_estimate(est))
        return est
    results = exit_on_stale(run, cfg)
    path = Path(cfg.out_dir, "results.md")
    print(path.read_text() if path.exists() else results)
    return results


if __name__ == "__main__":
    main()
