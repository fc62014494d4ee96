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

from shiftbounds.dialogue.exact.study import prompted_paradigm, reference_results
from shiftbounds.dialogue.neural import compounding as C
from shiftbounds.dialogue.neural import measures as M
from shiftbounds.dialogue.neural.pipeline import PipelineConfig, arms, comparisons, run_task_seed
from shiftbounds.dialogue.prepare import make_task, prepare_task
from shiftbounds.figures import plot_compounding_sweep, plot_pipeline_curves, plot_pipeline_shifts, plot_pipeline_user_models
from shiftbounds.tabular import greedy_policy, static_context_return
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.progress import format_seconds
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import holm_verdicts, mean_ci, paired_difference, plateau_step, ratio_of_means_ci, seeds_for_power
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


def _exact_views(cfg: PipelineConfig, task_name: str, horizon: int) -> tuple:
    """The prepared task at ``horizon``, its reference results and the exact Interactive-RL result."""
    prep = prepare_task(make_task(task_name, horizon, cfg.reward_source), cfg.real_user)
    return prep, reference_results(prep), prompted_paradigm(prep, cfg.accept_wrong, cfg.leak)


def exact_references(cfg: PipelineConfig, task_name: str) -> dict:
    """Exact references from the tabular engine (the same for every seed): ``J_real`` of the
    real-user optimum, ``pi_data`` and the exact Interactive-RL policy (the optimum against the
    prompted simulator), and the exact optima of the training objectives the engine can compute:
    ``J_sim`` against the prompted simulator, the real user's own return (the oracle's objective)
    and Static Context RL's myopic ``J_static`` (greedy on the expected judged reward at every
    logged context)."""
    prep, refs, inter = _exact_views(cfg, task_name, cfg.horizon)
    static_opt = greedy_policy(prep.real_mdp.rewards)
    return {"optimal": refs["optimal"]["J_real"], "pi_data": refs["pi_data"]["J_real"],
            "interactive_exact": inter["J_real"],
            "objective_optimum": {"interactive": inter["J_train"], "oracle": refs["optimal"]["J_real"],
                                  "static_myopic": float(static_context_return(prep.real_mdp, static_opt, prep.data_policy))}}


OBJECTIVES = {"interactive": "J_sim", "oracle": "J_sim", "static_myopic": "J_static"}
"""The arms whose training objective has an exact optimum in the tabular engine, and the measured
value of that objective (``J_sim``: acceptance return against its training user; ``J_static``:
the judge's expected reward at logged contexts). The other arms' objectives (a neural simulator's
return, the one-step and AWR surrogates) have none."""


def optimisation_rows(cfg: PipelineConfig, runs: list[dict]) -> list[dict]:
    """Per task, every arm of :data:`OBJECTIVES` (and the SFT agent on ``J_static``): its own
    training objective at the end (mean and 95 % CI over seeds) against that objective's exact
    optimum; ``gap`` = optimum - final, the part of the objective the learner did not reach."""
    out = []
    for task in cfg.tasks:
        rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        opt = exact_references(cfg, task)["objective_optimum"]
        for arm, key in [("sft", "J_static"), *OBJECTIVES.items()]:
            vals = np.array([(r["sft"] if arm == "sft" else r["paradigms"][arm])[key] for r in rs])
            target = opt["static_myopic" if arm == "sft" else arm]
            e = mean_ci(vals)
            out.append({"task": task, "paradigm": arm, "objective": key, **_ci_cells("final", vals), "exact_optimum": target,
                        "gap": target - e.value, "gap_ci": f"[{target - e.high:.3f}, {target - e.low:.3f}]"})
    return out


def headroom_rows(cfg: PipelineConfig, runs: list[dict]) -> list[dict]:
    """Per task and arm, the share of the oracle's headroom over Interactive RL the arm recovers:
    ``mean(J_arm - J_int) / mean(J_oracle - J_int)`` over seeds (1 = as good as training against
    the real user, 0 = no better than Interactive RL, < 0 worse), with a paired percentile
    bootstrap interval over seeds; ``headroom`` is the denominator with its t-interval."""
    out = []
    for task in cfg.tasks:
        rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        J = {a: np.array([r["paradigms"][a]["J_real"] for r in rs]) for a in arms(cfg)}
        J["sft"] = np.array([r["sft"]["J_real"] for r in rs])
        den = J["oracle"] - J["interactive"]
        for arm in ("sft", *(a for a in arms(cfg) if a not in ("interactive", "oracle"))):
            e = ratio_of_means_ci(J[arm] - J["interactive"], den, rng=numpy_rng(cfg.seed, "headroom", task, arm))
            out.append({"task": task, "paradigm": arm, "share": e.value, "share_ci": f"[{e.low:.3f}, {e.high:.3f}]",
                        **_ci_cells("headroom", den)})
    return out


def _ci_cells(prefix: str, x: np.ndarray) -> dict:
    e = mean_ci(x)
    return {prefix: e.value, prefix + "_ci": f"[{e.low:.3f}, {e.high:.3f}]"}


def paired_rows(cfg: PipelineConfig, runs: list[dict]) -> list[dict]:
    """Per-seed paired differences of ``J_real`` (the arms of a seed share logs, SFT agent,
    simulators and evaluation draws) for every comparison of every task: the mean with a 95 %
    t-interval over seeds, the exact sign-flip ``p`` (``p_t``: the t-test's, beside it), the
    verdict it supports alone and ``holm verdict`` after Holm's correction over the whole family
    (every comparison of every task of the run). ``sd`` is the paired standard deviation over
    seeds, ``eval_sd`` its evaluation part (the per-dialogue spread of the difference on the
    shared evaluation draws, root mean square over seeds) and ``train_sd`` the rest."""
    rows = []
    for task in cfg.tasks:
        rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        val = lambda r, arm: r["sft"]["J_real"] if arm == "sft" else r["paradigms"][arm]["J_real"]  # noqa: E731
        for a, b in comparisons(cfg):
            d = paired_difference(np.array([val(r, a) for r in rs]), np.array([val(r, b) for r in rs]), (a, b))
            eval_sd = float(np.sqrt(np.mean([r["eval_var"][f"{a} - {b}"] for r in rs])))
            rows.append({"task": task, "difference": d["difference"], "mean": d["mean"], "ci": f"[{d['low']:.3f}, {d['high']:.3f}]",
                         "low": d["low"], "high": d["high"], "seeds": d["n"], "sd": d["sd"], "eval_sd": eval_sd,
                         "train_sd": float(np.sqrt(max(0.0, d["sd"] ** 2 - eval_sd ** 2))), "p": d["p"], "p_method": d["p_method"],
                         "p_t": d["p_t"], "verdict": d["verdict"]})
    for row, holm in zip(rows, holm_verdicts(rows)):
        row["holm verdict"] = holm
    return rows


PLATEAU_TOL = 0.02
"""Learning-curve plateau criterion: within this much of the curve's final level (mean ``J_real``
over seeds of its last three points), about twice a curve point's standard error with 20 seeds."""


def plateau_rows(curves: list[dict]) -> list[dict]:
    """Per task and arm: the mean learning curve over seeds, its final level and the first step from
    which it stays within :data:`PLATEAU_TOL` of it (:func:`~shiftbounds.utils.stats.plateau_step`)."""
    out = []
    for task, arm in dict.fromkeys((c["task"], c["paradigm"]) for c in curves):
        by_step: dict = {}
        for c in curves:
            if c["task"] == task and c["paradigm"] == arm:
                by_step.setdefault(c["step"], []).append(c["J_real"])
        steps = sorted(by_step)
        means = [float(np.mean(by_step[s])) for s in steps]
        out.append({"task": task, "paradigm": arm, "start": means[0], "final_level": float(np.mean(means[-3:])),
                    "plateau_step": plateau_step(steps, means, tol=PLATEAU_TOL), "last_step": steps[-1]})
    return out


MAX_SEEDS = 10_000


def power_rows(paired: list[dict], alpha: float = 0.05, power: float = 0.8) -> list[dict]:
    """Seeds each comparison would need: a two-sided t-test at ``alpha / m`` (Holm's first step
    over the run's ``m`` comparisons) detecting the observed mean difference with the observed
    paired SD with probability ``power`` (:func:`~shiftbounds.utils.stats.seeds_for_power`);
    ``"> 10000"`` where more than :data:`MAX_SEEDS` would be needed."""
    out = []
    for r in paired:
        n = None  # the mean or the SD is 0: no power calculation
        if r["sd"] > 0 and r["mean"] != 0:
            try:
                n = seeds_for_power(r["sd"], r["mean"], alpha=alpha, power=power, family=len(paired), max_n=MAX_SEEDS)
            except ValueError:  # a difference at the level of rounding (e.g. arms that barely trained)
                n = f"> {MAX_SEEDS}"
        out.append({"task": r["task"], "difference": r["difference"], "mean": r["mean"], "sd": r["sd"],
                    "seeds_needed": n, "seeds_run": r["seeds"]})
    return out


def summarise(cfg: PipelineConfig, runs: list[dict]) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Main table (exact references, the SFT agent, every arm), per-turn rows, learning-curve rows
    and simulator rows."""
    main, per_turn, curves, sims = [], [], [], []
    for task in cfg.tasks:
        rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        refs = exact_references(cfg, task)
        main += [{"task": task, "paradigm": "real-user optimum (exact)", "J_real": refs["optimal"]},
                 {"task": task, "paradigm": "pi_data (exact)", "J_real": refs["pi_data"]},
                 {"task": task, "paradigm": "Interactive RL optimum (exact)", "J_real": refs["interactive_exact"]},
                 {"task": task, "paradigm": "sft", **_ci_cells("J_real", np.array([r["sft"]["J_real"] for r in rs])),
                  "success": float(np.mean([r["sft"]["success"] for r in rs])),
                  "J_static": float(np.mean([r["sft"]["J_static"] for r in rs]))}]
        for arm in arms(cfg):
            ps = [r["paradigms"][arm] for r in rs]
            row = {"task": task, "paradigm": arm}
            for key in ("J_real", "success", "J_sim", "J_static", "sim_gap"):
                if key in ps[0]:
                    row.update(_ci_cells(key, np.array([p[key] for p in ps])) if key in ("J_real", "sim_gap")
                               else {key: float(np.mean([p[key] for p in ps]))})
            row["sum_eps"] = float(np.mean([np.sum(p["eps"]["mean"]) for p in ps]))
            row["sum_Delta"] = float(np.mean([np.sum(p["Delta"]["mean"]) for p in ps]))
            if "delta" in ps[0]:
                row["sum_delta"] = float(np.mean([np.sum(p["delta"]["mean"]) for p in ps]))
                row["sum_rho"] = float(np.mean([np.sum(p["rho"]["mean"]) for p in ps]))
            main.append(row)
            for t in range(cfg.horizon):
                pr = {"task": task, "paradigm": arm, "t": t}
                for key in ("eps", "Delta", "delta", "D", "rho"):
                    if key in ps[0]:
                        pr[key] = float(np.mean([p[key]["mean"][t] for p in ps]))
                for key in ("B_eps", "B_delta"):
                    if key in ps[0]:
                        pr[key] = float(np.mean([p[key][t] for p in ps]))
                per_turn.append(pr)
            for p, r in zip(ps, rs):
                for c in p["curve"]:
                    curves.append({"task": task, "paradigm": arm, "seed": r["seed"], "step": c["step"],
                                   "agent_tokens": c["agent_tokens"], "J_real": c["J_real"], "J_sim": c.get("J_sim"),
                                   "pg": c.get("pg"), "kl": c.get("kl")})
        for name in rs[0]["simulators"]:
            ss = [r["simulators"][name] for r in rs]
            row = {"task": task, "user_model": name}
            for key in M.USER_RATES + ("discriminator_accuracy",):
                if key in ss[0]:
                    vals = np.array([float(s[key]) for s in ss])  # "nan" (no such turn) as JSON writes it
                    row[key] = float(vals[np.isfinite(vals)].mean()) if np.isfinite(vals).any() else float("nan")
            row["nll_per_turn"] = float(np.mean([np.mean(s["nll_per_turn"]) for s in ss]))
            sims.append(row)
    return main, per_turn, curves, sims


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
    main, per_turn, curves, sims = summarise(cfg, runs)
    paired = paired_rows(cfg, runs)
    power = power_rows(paired)
    plateau = plateau_rows(curves)
    gaps = optimisation_rows(cfg, runs)
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
    md = (f"# Full pipeline: three paradigms, small transformers\n\nH = {cfg.horizon}; {cfg.n_logs} logged dialogues "
          f"({cfg.held_out:.0%} held out); real user: {cfg.real_user}; prompted simulator accept-wrong {cfg.accept_wrong}, leak {cfg.leak}; "
          f"{cfg.rl_steps} RL steps x {cfg.goals_per_step * cfg.group} dialogues (same agent-token budget for every "
          f"arm); {cfg.seeds} seeds, 95 % CIs over seeds. J_real: judged return against the real user "
          f"(explicit ground-truth model); J_sim: the training simulator's own acceptance return. Exact rows come from "
          f"the tabular engine; `sft` is the shared starting point of every arm.\n\n"
          + markdown_table(main, ["task", "paradigm", "J_real", "J_real_ci", "success", "J_sim", "J_static", "sim_gap", "sim_gap_ci",
                                  "sum_eps", "sum_Delta", "sum_delta", "sum_rho"])
          + f"\n## Paired differences of J_real over seeds\n\nMean with 95 % t-interval over seeds; `p`: exact sign-flip "
            f"(permutation) p-value, on which `verdict` rests; `p_t`: the t-test's, for comparison. Family for Holm's "
            f"correction: all {len(paired)} comparisons below (every task together). `sd`: paired SD over seeds; "
            f"`eval_sd`: its evaluation part (every arm of a seed is evaluated on the same goals and user draws); "
            f"`train_sd`: the rest.\n\n"
          + markdown_table(paired, ["task", "difference", "mean", "ci", "sd", "eval_sd", "train_sd", "p", "p_t", "verdict",
                                    "holm verdict"])
          + "\n## The learner's ceiling: headroom recovered\n\n`oracle`: the same RL, budget and start trained against "
            "the real user itself. `share` = mean(J_arm - J_interactive) / mean(J_oracle - J_interactive) over seeds "
            "(1: as good as training on the real user; 0: no better than Interactive RL), 95 % paired bootstrap "
            "interval over seeds; `headroom`: the denominator with its t-interval.\n\n"
          + markdown_table(headroom, ["task", "paradigm", "share", "share_ci", "headroom", "headroom_ci"])
          + "\n## Optimisation gaps\n\nEach arm's own training objective at the end (mean over seeds, 95 % CI) "
            "against its exact optimum from the tabular engine, where one exists: `J_sim` of Interactive RL (the "
            "prompted simulator) and of the oracle (the real user), `J_static` of myopic Static Context RL and of the "
            "SFT agent it starts from. `gap` = optimum - final.\n\n"
          + markdown_table(gaps, ["task", "paradigm", "objective", "final", "final_ci", "exact_optimum", "gap", "gap_ci"])
          + "\n## Seeds a comparison needs\n\nTwo-sided t-test at 0.05 / (family size), power 0.8, to detect the "
            "observed mean difference with the observed paired SD (`seeds_needed`; empty where the mean or SD is 0, `> 10000` past that).\n\n"
          + markdown_table(power, ["task", "difference", "mean", "sd", "seeds_needed", "seeds_run"])
          + f"\n## Learning-curve plateaus\n\nMean `J_real` over seeds at each curve point; `plateau_step`: the first "
            f"step from which the mean curve stays within {PLATEAU_TOL} of its final level (mean of its last three points); "
            f"a plateau step equal to the last step means the curve is still moving.\n\n"
          + markdown_table(plateau, ["task", "paradigm", "start", "final_level", "plateau_step", "last_step"])
          + "\n## User models at held-out logged histories\n\n"
          + markdown_table(sims, ["task", "user_model", *M.USER_RATES, "nll_per_turn", "discriminator_accuracy"])
          + "\nDiscriminator accuracy: a classifier of real vs simulated user turns trained on the train logs, "
            "scored on held-out logs (0.5 = indistinguishable). Wall times: timings.md.\n")
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


def exact_gaps(cfg: PipelineConfig, task_name: str, horizon: int) -> list[dict]:
    """The exact end points' gaps and bounds at one horizon: the Interactive-RL optimum (``J_sim -
    J_real``, Theorem 2) and the infinite-log static learner (``J_static - J_real``, Theorem 1)."""
    _, refs, inter = _exact_views(cfg, task_name, horizon)
    static = refs["static-infinite-data"]
    return [{"H": horizon, "task": task_name, "paradigm": "interactive (exact)", "theorem": "theorem 2", "gap": inter["train_gap"],
             "bound": inter["theorem2_rhs"]},
            {"H": horizon, "task": task_name, "paradigm": "static, infinite logs (exact)", "theorem": "theorem 1",
             "gap": static["train_gap"], "bound": static["theorem1_rhs"]}]


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
    exact = [g for task in cfg.tasks for h in cfg.sweep for g in exact_gaps(cfg, task, h)]
    for g in exact:
        g["gap_over_bound"] = g["gap"] / g["bound"] if g["bound"] > 0 else float("nan")
    growth = C.growth_rows(by_h, span, rng=numpy_rng(cfg.seed, "sweep growth"))
    results = {"config": asdict(replace(cfg, workers=0)), "reward_span": span, "sweep": rows, "exact": exact, "growth": growth}
    write_json(out / "results.json", results)
    write_csv(out / "sweep.csv", rows + exact)
    write_csv(out / "growth.csv", growth)
    cols = ["H", "task", "paradigm", "theorem", "gap", "gap_low", "gap_high", "bound", "gap_over_bound"]
    atomic_write_text(out / "sweep.md", (
        f"# Compounding in learned agents: the main job at H = {', '.join(map(str, cfg.sweep))}\n\nReal user: {cfg.real_user}; "
        f"{cfg.seeds} seeds per horizon; the rest as in the main job (`config.json`). `gap`: J_static - J_real for Static "
        f"Context RL arms (bounded by Theorem 1, R sum_t B(eps)_t), J_sim - J_real for simulator-trained arms (Theorem 2, "
        f"R sum_t B(delta)_t + sum_t rho_t), R = {span:g}; mean over seeds with 95 % t-interval, and the bound's mean over "
        f"seeds; the oracle has no simulator gap. Exact rows: the end points of exact training (tabular engine).\n\n"
        + markdown_table(rows + exact, cols)
        + "\n## Growth in H\n\nLog-log slopes over every (horizon, seed) with stratified bootstrap 95 % CIs: `gap` (|gap|), "
          "`bound`, and `ratio` (|gap| / bound: 0 = the gap grows as fast as its bound, below 0 = the bound loosens). "
          "Quadratic compounding is a slope of 2.\n\n"
        + markdown_table(growth, ["task", "paradigm", "horizons", "points", "zero_gaps", "gap_slope", "gap_slope_ci",
                                  "bound_slope", "bound_slope_ci", "ratio_slope", "ratio_slope_ci"])))
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
