"""The main job's analysis (``experiments.full_pipeline``): the tables made from the (task, seed) runs
and the exact references (:mod:`shiftbounds.dialogue.exact.references`) (main table, paired family, headroom, optimisation gaps,
the seeds a comparison needs, plateaus) and the reports of the run and of its horizon sweep.
"""

from __future__ import annotations

import numpy as np

from shiftbounds.dialogue.neural import measures as M
from shiftbounds.dialogue.neural.pipeline import PipelineConfig, arms, comparisons
from shiftbounds.utils.io import markdown_table
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import holm_verdicts, mean_ci, paired_difference, plateau_step, ratio_of_means_ci, seeds_for_power

OBJECTIVES = {"interactive": "J_sim", "oracle": "J_sim", "static_myopic": "J_static"}
"""The arms whose training objective has an exact optimum in the tabular engine, and the measured
value of that objective (``J_sim``: acceptance return against its training user; ``J_static``:
the judge's expected reward at logged contexts). The other arms' objectives (a neural simulator's
return, the one-step and AWR surrogates) have none."""


def optimisation_rows(cfg: PipelineConfig, runs: list[dict], refs: dict[str, dict]) -> list[dict]:
    """Per task, every arm of :data:`OBJECTIVES` (and the SFT agent on ``J_static``): its own
    training objective at the end (mean and 95 % CI over seeds) against that objective's exact
    optimum (``refs[task]``: :func:`~shiftbounds.dialogue.exact.references.exact_references`);
    ``gap`` = optimum - final, the part of the objective the learner did not reach."""
    out = []
    for task in cfg.tasks:
        rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        opt = refs[task]["objective_optimum"]
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


def summarise(cfg: PipelineConfig, runs: list[dict], refs: dict[str, dict]) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Main table (the exact references ``refs[task]``, the SFT agent, every arm), per-turn rows,
    learning-curve rows and simulator rows."""
    main, per_turn, curves, sims = [], [], [], []
    for task in cfg.tasks:
        rs = sorted((r for r in runs if r["task"] == task), key=lambda r: r["seed"])
        ref = refs[task]
        main += [{"task": task, "paradigm": "real-user optimum (exact)", "J_real": ref["optimal"]},
                 {"task": task, "paradigm": "pi_data (exact)", "J_real": ref["pi_data"]},
                 {"task": task, "paradigm": "Interactive RL optimum (exact)", "J_real": ref["interactive_exact"]},
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


def report_md(cfg: PipelineConfig, main: list[dict], paired: list[dict], headroom: list[dict], gaps: list[dict],
              power: list[dict], plateau: list[dict], sims: list[dict]) -> str:
    """The main job's ``results.md``: the main table, the paired family, headroom, optimisation gaps,
    the seeds each comparison needs, the plateaus and the user models."""
    md = (f"# Full pipeline: three paradigms, small transformers\n\nH = {cfg.horizon}; {cfg.n_logs} logged dialogues "
          f"({cfg.held_out:.0%} held out); real user: {cfg.real_user}; prompted simulator accept-wrong {cfg.accept_wrong}, leak {cfg.leak}; "
          f"{cfg.rl.steps} RL steps x {cfg.rl.goals_per_step * cfg.rl.group} dialogues (same agent-token budget for every "
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
    return md


def sweep_md(cfg: PipelineConfig, span: float, rows: list[dict], exact: list[dict], growth: list[dict]) -> str:
    """The sweep's ``sweep.md``: every arm's gap against its bound per horizon, and the growth in H."""
    cols = ["H", "task", "paradigm", "theorem", "gap", "gap_low", "gap_high", "bound", "gap_over_bound"]
    return (
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
                                  "bound_slope", "bound_slope_ci", "ratio_slope", "ratio_slope_ci"]))


def verdict_flips(default: list[dict], perturbed: list[list[dict]]) -> dict:
    """How the paired family's verdicts move under float32-level perturbations (``--perturb-init``):
    ``default`` and each of ``perturbed`` are a run's :func:`paired_rows` (the same comparisons).
    Returns ``rows`` (per task and difference: the default run's ``holm verdict``, each perturbed
    run's, whether any differs, and the ``robust`` verdict: the ordering where every run calls it,
    else ``not significant``) and ``flip_rate`` (the share of (perturbed run, comparison) pairs whose
    verdict differs from the default run's)."""
    key = lambda r: (r["task"], r["difference"])  # noqa: E731
    base = {key(r): r["holm verdict"] for r in default}
    others = [{key(r): r["holm verdict"] for r in rows} for rows in perturbed]
    for other in others:
        if set(other) != set(base):
            raise ValueError(f"a perturbed run compares other pairs: {sorted(set(other) ^ set(base))}")
    rows, flips = [], 0
    for k, v in base.items():
        vs = [o[k] for o in others]
        flips += sum(x != v for x in vs)
        rows.append({"task": k[0], "difference": k[1], "default": v, "perturbed": "; ".join(vs),
                     "flips": any(x != v for x in vs), "robust": v if all(x == v for x in vs) else "not significant"})
    return {"rows": rows, "flip_rate": flips / (len(base) * len(others)) if others and base else float("nan")}
