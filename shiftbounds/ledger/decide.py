"""Each kind of claim decided from the files under a repository root, by the rules of
:mod:`shiftbounds.ledger.rules`. A claim is a mapping read from the ledger's data file; its ``kind``
picks the function here (:data:`KINDS`), which returns a :class:`~shiftbounds.ledger.rules.Verdict`.

Orderings are recomputed from the per-seed files (:mod:`shiftbounds.ledger.sources`); rows that
rest on bootstrap intervals read the interval from the shipped table, whose point estimates the
ledger's check recomputes."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shiftbounds.ledger import rules, sources
from shiftbounds.ledger.rules import Verdict

MAIN, REPEAT = "results/full_pipeline/default", "results/full_pipeline/default_seed1"
PERTURBED = tuple(f"{MAIN}_perturb{i}" for i in (1, 2, 3))
"""The main job rerun with ``--perturb-init 1, 2, 3`` (float32-level changes standing in for other
CPUs); where shipped, an ordering is called only where the run, its repeat and every one of them call it."""
TASKS = ("guess_number", "booking")
SWEEP = "results/full_pipeline/sweep"
BOUND_CHECK = "results/bound_check/default"
NOISY = "results/noisy_expert/default"
PROPERTIES = "results/property_tests/default"


@dataclass(frozen=True)
class Context:
    """What every claim is decided against: the repository ``root``, the family level ``alpha``, the
    level of each real-dialogue decision (``alpha`` over the decisions made on the held-out goals),
    and the margins by name."""

    root: Path
    alpha: float
    dialogue_alpha: float
    margins: dict[str, float]


def _files(ctx: Context, *paths: str) -> list[str]:
    return [p for p in paths if (ctx.root / p).exists()]


# ----------------------------------------------------------------------------- the exact engine
def bound_holds(claim: dict, ctx: Context) -> Verdict:
    """A theorem's bound holds: on every (family, H) cell of the bound check, and in every case its
    property tests drew (``results/property_tests/default/statistics.csv``)."""
    rows = [r for r in sources.read_csv(ctx.root / BOUND_CHECK / "table.csv") if r["family"] in claim["families"]]
    ratios = np.array([float(r["ratio"]) for r in rows])
    stats = {r["test"].rsplit("::", 1)[-1]: r for r in sources.read_csv(ctx.root / PROPERTIES / "statistics.csv")}
    missing = [t for t in claim["properties"] if t not in stats]
    if missing:
        raise ValueError(f"{PROPERTIES}/statistics.csv holds no row for {missing}: run python -m experiments.property_tests")
    tests = [stats[t] for t in claim["properties"]]
    failed = any(int(t["failed"]) > 0 for t in tests) or (ratios > 1 + 1e-9).any()
    verdict = "contradicted" if failed else "supported" if all(int(t["passed"]) > 0 for t in tests) else "untested"
    cited = "; ".join(f"{t['test'].rsplit('::', 1)[-1]}: {t['passed']} of {t['cases']} cases passed ({t['explicit']} pinned corners), "
                      f"drawn {float(t['nontrivial']):.0%} with every size >= 2, {float(t['material']):.0%} material" for t in tests)
    return Verdict(verdict, f"bound check: largest mean gap/bound {ratios.max():.4f} over {len(rows)} (family, H) cells of "
                            f"{', '.join(claim['families'])}; property tests: {cited}",
                   "every case must satisfy the bound (the bound check asserts it per instance; a property test fails on "
                   "any case); no test statistic")


def slope(claim: dict, ctx: Context) -> Verdict:
    names = claim["family_row"] if isinstance(claim["family_row"], list) else [claim["family_row"]]
    rows = {r["family"]: r for r in sources.read_csv(ctx.root / BOUND_CHECK / "slopes.csv")}
    margin, verdicts, parts = ctx.margins[claim["margin"]], [], []
    for name in names:
        r = rows[name]
        lo, hi = float(r["gap_slope_low"]), float(r["gap_slope_high"])
        verdicts.append(rules.equivalence(lo, hi, 2.0, margin))
        parts.append(f"{name} {float(r['gap_slope']):.3f} [{lo:.3f}, {hi:.3f}] (bound's {float(r['bound_slope']):.3f})")
    return Verdict(rules.combine(verdicts), "; ".join(parts), f"equivalence to 2 within +-{margin} (TOST on the 95 % bootstrap interval, "
                   "0.025 per side; one interval per family, all must agree)")


# ----------------------------------------------------------------------------- the main job
@functools.lru_cache(maxsize=64)
def _decided_family(root: Path, folder: str, members: tuple[tuple[str, str], ...], alpha: float, stamp: tuple) -> dict:
    """One family of the main job decided (cached: ``stamp`` is the per-seed file's modification time and size)."""
    runs = sources.pipeline_runs(root / folder)
    return rules.family_ordering({f"{t}: {d}": sources.pipeline_difference(runs, t, d) for t, d in members}, alpha)


def _pipeline_family(ctx: Context, folder: str, claim: dict) -> tuple[dict, int]:
    """The members of ``claim``'s family in ``folder``, decided: the run's stated family (every row of
    its ``paired.csv``, both tasks) or a secondary family of the claim's own comparison on both tasks."""
    if claim["family"] == "run":
        members = tuple((r["task"], r["difference"]) for r in sources.read_csv(ctx.root / folder / "paired.csv"))
    else:
        members = tuple((t, f"{claim['a']} - {claim['b']}") for t in TASKS)
    stat = (ctx.root / folder / "results.json").stat()
    return dict(_decided_family(ctx.root, folder, members, ctx.alpha, (stat.st_mtime_ns, stat.st_size))), len(members)


def pipeline_ordering(claim: dict, ctx: Context) -> Verdict:
    a, b = claim["a"], claim["b"]
    folders = _files(ctx, f"{MAIN}/results.json", f"{REPEAT}/results.json")
    if len(folders) < 2:
        return Verdict("untested", "", "the run and its repeat (--seed 1) are both needed")
    verdicts, parts, sizes = [], [], []
    perturbed = [f for f in PERTURBED if (ctx.root / f / "results.json").is_file()]
    for label, folder in (("run", MAIN), ("repeat", REPEAT), *((f"perturbed {f[-1]}", f) for f in perturbed)):
        decided, size = _pipeline_family(ctx, folder, claim)
        sizes.append(size)
        rows = [decided[f"{t}: {a} - {b}"] for t in TASKS]
        verdicts += [r["verdict"] for r in rows]
        parts.append(f"{label}: " + "; ".join(f"{t} {rules.show_mean(r)} p {r['p']:.2g}" for t, r in zip(TASKS, rows)))
    what = (f"Holm over the run's stated family ({sizes[0]} comparisons, both tasks) at {ctx.alpha}" if claim["family"] == "run" else
            f"secondary family of its own (this comparison on both tasks, not in the run's stated family), Holm at {ctx.alpha}")
    where = (f"in the run, its repeat (--seed 1) and {len(perturbed)} runs with perturbed initial weights, an ordering where "
             f"all {2 * (2 + len(perturbed))} call it" if perturbed else "in the run and its repeat (--seed 1), an ordering where all four call it")
    verdict = rules.direction(verdicts, a, b)
    if verdict == "not significant" and claim["family"] == "run":  # the run's power.csv sizes its stated family
        parts.append(_seeds_to_decide(ctx, a, b))
    return Verdict(verdict, " | ".join(parts), f"exact sign-flip over seeds; {what}; {where}; intervals at the Holm bar each met")


REACH_HOURS = 3.0
"""The longest run this project ships on 2 cores (in sittings, resumed from its stages)."""


def _seeds_to_decide(ctx: Context, a: str, b: str) -> str:
    """What the run's power calculation asks for to decide ``a - b`` on both tasks, and whether it is in reach: the
    larger task's seeds at the run's measured wall time per seed (two workers), against :data:`REACH_HOURS`."""
    rows = {r["task"]: r for r in sources.read_csv(ctx.root / MAIN / "power.csv") if r["difference"] == f"{a} - {b}"}
    needed = {t: rows[t]["seeds_needed"] for t in TASKS}  # a count, "> 10000", or empty (a zero mean or SD)
    wall = json.loads((ctx.root / MAIN / "timings.json").read_text())["this_call"]["wall_seconds"]
    per_seed = wall / int(rows[TASKS[0]]["seeds_run"])
    shown = ", ".join(f"{t} {n if n.isdigit() else 'more than 10000' if n else 'no finite number of'}" for t, n in needed.items())
    if not all(n.isdigit() for n in needed.values()):
        return f"to decide: the run's power.csv asks for {shown} seeds: out of reach"
    hours = max(int(n) for n in needed.values()) * per_seed / 3600
    reach = "in reach" if hours <= REACH_HOURS else f"out of reach (over {REACH_HOURS:g} h)"
    return f"to decide: the run's power.csv asks for {shown} seeds; at its {per_seed / 60:.1f} min a seed on 2 cores, {hours:.1f} h: {reach}"


def pipeline_sim_gap(claim: dict, ctx: Context) -> Verdict:
    arm, verdicts, parts = claim["arm"], [], []
    for label, folder in (("run", MAIN), ("repeat", REPEAT)):
        runs = sources.pipeline_runs(ctx.root / folder)
        gaps = {f"{t}: J_sim - J_real": sources.pipeline_values(runs, t, arm, "J_sim") - sources.pipeline_values(runs, t, arm)
                for t in TASKS}
        decided = rules.family_ordering(gaps, ctx.alpha)
        verdicts += [r["verdict"] for r in decided.values()]
        parts.append(f"{label}: " + "; ".join(f"{k.split(':')[0]} {rules.show_mean(r)}" for k, r in decided.items()))
    return Verdict(rules.direction(verdicts, "J_sim", "J_real"), " | ".join(parts),
                   f"exact sign-flip over seeds; secondary family of its own (both tasks), Holm at {ctx.alpha}; run and repeat")


def headroom(claim: dict, ctx: Context) -> Verdict:
    bounds, parts = [], []
    for label, folder in (("run", MAIN), ("repeat", REPEAT)):
        rows = {(r["task"], r["paradigm"]): r for r in sources.read_csv(ctx.root / folder / "headroom.csv")}
        for t in TASKS:
            r = rows[(t, claim["arm"])]
            bounds.append(tuple(float(x) for x in r["share_ci"].strip("[]").split(",")))
            parts.append(f"{label} {t} {float(r['share']):.2f} {r['share_ci']}")
    verdict = "supported" if all(lo > 0 for lo, _ in bounds) else "contradicted" if all(hi < 0 for _, hi in bounds) else "not significant"
    return Verdict(verdict, "; ".join(parts), "one 95 % paired bootstrap interval per task and run (uncorrected: strict for "
                   "supported, all four must clear 0)")


def sweep_growth(claim: dict, ctx: Context) -> Verdict:
    row = next(r for r in sources.read_csv(ctx.root / SWEEP / "growth.csv") if r["paradigm"] == claim["arm"])
    lo, hi = (float(x) for x in row["gap_slope_ci"].strip("[]").split(","))
    threshold = 2.0 - ctx.margins[claim["margin"]]
    return Verdict(rules.at_least(lo, hi, threshold),
                   f"{row['task']}, H = {row['horizons'].replace(' ', ', ')}: gap slope {float(row['gap_slope']):.2f} [{lo:.2f}, {hi:.2f}], "
                   f"its bound's {float(row['bound_slope']):.2f} {row['bound_slope_ci']}",
                   f"one-sided: the 95 % stratified bootstrap interval over (horizon, seed) above {threshold} (2 less the margin)")


# ----------------------------------------------------------------------------- real dialogues
def _dialogue_family(ctx: Context, folder: str, claim: dict) -> tuple[dict, str]:
    rows = sources.read_csv(ctx.root / folder / "runs.csv")
    user, fam = claim["user"], claim["family"]
    if fam == "run_user":
        members = [r["difference"] for r in sources.read_csv(ctx.root / folder / "paired.csv") if r["evaluation user"] == user]
        what = f"Holm over the run's {len(members)} comparisons for this evaluator"
    elif isinstance(fam, list):
        members, what = list(fam), f"Holm over the stated family of {len(fam)} ({', '.join(fam)})"
    else:
        members = list(claim["differences"])
        what = ("the run's primary test (a family of one)" if fam == "primary" else
                "secondary family of its own (not in the run's stated family)")
    decided = rules.family_ordering({d: sources.dialogue_difference(rows, user, d) for d in members}, ctx.dialogue_alpha)
    return decided, what


def dialogue_ordering(claim: dict, ctx: Context) -> Verdict:
    verdicts, parts, what = [], [], ""
    for folder in claim["folders"]:
        decided, what = _dialogue_family(ctx, folder, claim)
        for d in claim["differences"]:
            r = decided[d]
            verdicts.append(rules.direction([r["verdict"]], *d.split(" - ")))
            n = r["n"]
            parts.append(f"{folder.rsplit('/', 1)[-1]}: {d} {rules.show_mean(r)}, p {r['p']:.4f} ({round(r['p'] * 2 ** n)} of "
                         f"{2 ** n} sign patterns; smallest attainable {rules.smallest_sign_flip_p(np.ones(n)):.4f})")
    same = _same_as(claim, ctx)
    return Verdict(rules.combine(verdicts),
                   "; ".join(parts) + same,
                   f"exact sign-flip over seeds; {what} at {ctx.dialogue_alpha:.4f} ({ctx.alpha} over the decisions made on the "
                   "held-out goals)" + ("; an ordering where every run calls it" if len(claim["folders"]) > 1 else ""))


def _same_as(claim: dict, ctx: Context) -> str:
    """Where the evaluator's per-seed success equals the arm's training simulator's in every seed, say so."""
    if "same_as" not in claim:
        return ""
    rows = sources.read_csv(ctx.root / claim["folders"][0] / "runs.csv")
    arm = claim["differences"][0].split(" - ")[0]
    x, y = sources.dialogue_values(rows, arm, claim["user"]), sources.dialogue_values(rows, arm, claim["same_as"])
    same = x == y
    return (f"; the evaluator's per-seed success equals the training simulator's ({claim['same_as']}) in "
            f"{'every' if same else 'not every'} seed")


def dialogue_sim_gap(claim: dict, ctx: Context) -> Verdict:
    rows = sources.read_csv(ctx.root / claim["folder"] / "runs.csv")
    x, y = sources.dialogue_values(rows, claim["arm"], claim["simulator"]), sources.dialogue_values(rows, claim["arm"], claim["real"])
    decided = rules.family_ordering({"J_sim - J_real": np.array([x[s] - y[s] for s in sorted(x)])}, ctx.dialogue_alpha)["J_sim - J_real"]
    return Verdict(rules.direction([decided["verdict"]], "J_sim", "J_real"),
                   f"{claim['arm']}: J_sim - J_real {rules.show_mean(decided)}, p {decided['p']:.4f}",
                   f"exact sign-flip over seeds; secondary family of its own at {ctx.dialogue_alpha:.4f}")


def dialogue_curve(claim: dict, ctx: Context) -> Verdict:
    rows = sources.read_csv(ctx.root / claim["folder"] / "training.csv")
    curve = "goal success at checkpoints (greedy, evaluation goals)"
    rises = sources.fitted_rises(rows, claim["arm"], curve)
    if rises.size < 2:
        return Verdict("untested", "", f"{claim['folder']}/training.csv holds no checkpoint curve (--curve-every)")
    r = rules.family_ordering({"rise - 0": rises}, ctx.dialogue_alpha)["rise - 0"]
    return Verdict(rules.direction([r["verdict"]], "rise", "0"),
                   f"mean fitted rise {rules.show_mean(r)} over {r['n']} seeds, p {r['p']:.4f} ({sum(rises > 0)} of {r['n']} positive)",
                   f"exact sign-flip over the seeds' fitted rises; secondary family of its own at {ctx.dialogue_alpha:.4f}")


# ----------------------------------------------------------------------------- paper 2
def _bounds(text: str) -> tuple[float, float]:
    """``[low, high]`` as the noisy-expert tables write it (``> H`` / ``never``: censored above)."""
    def value(x: str) -> float:
        x = x.strip()
        return float("inf") if x == "never" or x.startswith(">") else float(x)

    low, high = (value(x) for x in text.strip("[]").split(","))
    return low, high


def bc_rate(claim: dict, ctx: Context) -> Verdict:
    rows = [r for r in sources.read_csv(ctx.root / NOISY / "growth.csv")
            if r["family"] == "lock" and r["method"] == "bc" and float(r["eta"]) > 0 and r["range"] == "all finite"]
    margin, verdicts, parts = ctx.margins[claim["margin"]], [], []
    for r in rows:
        lo, hi = _bounds(r["slope_ci"])
        q = float(r["theory_-log_q"])
        verdicts.append(rules.equivalence(lo, hi, q, margin * q))
        parts.append(f"eta {r['eta']}: {float(r['slope_logn_vs_H']):.3f} {r['slope_ci']} vs {q:.3f} (+-{margin * q:.3f})")
    return Verdict(rules.combine(verdicts), "; ".join(parts), f"equivalence within +-{margin:.0%} of -log q per eta (TOST on the 95 % "
                   "bootstrap interval, 0.025 per side); all must agree")


def nail_polynomial(claim: dict, ctx: Context) -> Verdict:
    rows = {(r["eta"], r["range"].split(" ")[0]): r for r in sources.read_csv(ctx.root / NOISY / "growth.csv")
            if r["family"] == "lock" and r["method"] == "nail"}
    factor, verdicts, parts = ctx.margins[claim["margin"]], [], []
    for eta in sorted({e for e, _ in rows}, key=float):
        short, whole = rows[(eta, "fit")], rows[(eta, "all")]
        s_hi, (w_lo, w_hi) = _bounds(short["loglog_ci"])[1], _bounds(whole["loglog_ci"])
        rate_falls = _bounds(whole["slope_ci"])[1] < _bounds(short["slope_ci"])[0]
        kept = rules.within_factor(w_lo, w_hi, float(short["slope_logn_vs_logH"]), factor)
        verdicts.append("contradicted" if w_lo > s_hi else "supported" if rate_falls and kept == "supported" else "not significant")
        parts.append(f"eta {eta}: log-log slope {float(short['slope_logn_vs_logH']):.2f} {short['loglog_ci']} (H <= 16), "
                     f"{float(whole['slope_logn_vs_logH']):.2f} {whole['loglog_ci']} (to 64); rate {float(short['slope_logn_vs_H']):.3f} -> "
                     f"{float(whole['slope_logn_vs_H']):.3f}")
    return Verdict(rules.combine(verdicts), "; ".join(parts), f"per eta: the exponential rate falls (disjoint 95 % bootstrap intervals) and "
                   f"the grid's log-log slope interval lies within a factor {factor} of the short range's slope; contradicted by a "
                   "significantly steeper slope on the grid; all must agree")


def _crossover_rows(ctx: Context) -> list[dict]:
    return sorted((r for r in sources.read_csv(ctx.root / NOISY / "crossover.csv") if r["family"] == "lock" and r["online"] == "nail"),
                  key=lambda r: float(r["eta"]))


def _show(h: float, inf_text: str) -> str:
    return inf_text if h == float("inf") else f"{h:.1f}"


def crossover_exists(claim: dict, ctx: Context) -> Verdict:
    rows = _crossover_rows(ctx)
    H = [float(r["measured_H*"]) for r in rows]
    ci = [_bounds(r["measured_ci"]) for r in rows]
    rising = any(ci[i][1] < ci[j][0] for i in range(len(rows)) for j in range(i + 1, len(rows)))
    if rising or all(h == float("inf") for h in H):
        verdict = "contradicted"
    else:
        falls = any(ci[j][1] < ci[i][0] for i in range(len(rows)) for j in range(i + 1, len(rows)))
        verdict = "supported" if falls and all(c[1] < float("inf") for c in ci[-2:]) else "not significant"
    return Verdict(verdict, "; ".join(f"eta {r['eta']}: {_show(float(r['measured_H*']), '> grid')} {r['measured_ci']}" for r in rows),
                   "95 % bootstrap intervals per eta: supported where the two noisiest levels cross on the grid and some higher "
                   "level's interval lies wholly below a lower level's; contradicted by the reverse")


def crossover_predicted(claim: dict, ctx: Context) -> Verdict:
    factor, verdicts, parts = ctx.margins[claim["margin"]], [], []
    grid_end = 64.0
    for r in _crossover_rows(ctx):
        if r["predicted_ci"] == "n/a":
            parts.append(f"eta {r['eta']}: not estimable")
            continue
        (p_lo, p_hi), (m_lo, m_hi) = _bounds(r["predicted_ci"]), _bounds(r["measured_ci"])
        if m_hi == float("inf"):  # measured censored: a one-sided rule
            v = "contradicted" if p_hi * factor < m_lo else "undecided (censored)"
        else:
            v = rules.within_factor(p_lo / m_hi, p_hi / m_lo, 1.0, factor)
        verdicts.append(v)
        parts.append(f"eta {r['eta']}: predicted {_show(float(r['predicted_H*']), 'never')} {r['predicted_ci']}, measured "
                     f"{_show(float(r['measured_H*']), f'> {grid_end:g}')} {r['measured_ci']}: {v}")
    decided = [v for v in verdicts if not v.startswith("undecided")]
    verdict = "contradicted" if "contradicted" in decided else rules.combine(decided) if decided else "untested"
    return Verdict(verdict, "; ".join(parts), f"per eta: the ratio predicted / measured, bounded by the two 95 % intervals, within a "
                   f"factor {factor} (supported) or wholly outside it (contradicted); a censored measurement contradicts only a "
                   "prediction whose interval ends a factor below the grid's end, else it is undecided; all decided etas must agree")


def sample_size(claim: dict, ctx: Context) -> Verdict:
    rows = {r["method"]: r for r in sources.read_csv(ctx.root / NOISY / "sample_complexity.csv")
            if r["family"] == "lock" and float(r["eta"]) == claim["eta"] and int(r["H"]) == claim["H"]}
    a, b = rows[claim["a"]], rows[claim["b"]]
    (a_lo, a_hi), (b_lo, b_hi) = ((float(r["ci_low"]), float(r["ci_high"])) for r in (a, b))
    verdict = "supported" if a_hi < b_lo else "contradicted" if a_lo > b_hi else "not significant"
    show = lambda r: f"{r['method']} {float(r['median_n']):.1f} [{float(r['ci_low']):.1f}, {float(r['ci_high']):.1f}]"  # noqa: E731
    return Verdict(verdict, f"median episodes {show(a)} vs {show(b)}",
                   "disjoint 95 % bootstrap intervals of the medians over seeds (a conservative test; one cell, no family)")


def _solve_pairs(claim: dict, ctx: Context) -> tuple[list[tuple], float] | None:
    """Per difference ``a - b`` of the claim: its discordant counts and seeds in the claim's cell
    (``m``, ``eta`` and, when named, the teacher ``signal``), with the run's solve threshold."""
    folder = ctx.root / claim["folder"]
    if not (folder / "runs.csv").is_file():
        return None
    rows = sources.read_csv(folder / "runs.csv")
    threshold = float(json.loads((folder / "config.json").read_text(encoding="utf-8"))["config"]["solve_threshold"])
    pairs = []
    for d in claim["differences"]:
        x, y = (sources.solved(rows, m=claim["m"], eta=claim["eta"], method=k, threshold=threshold, signal=claim.get("signal"))
                for k in d.split(" - "))
        pairs.append((d, sum(x[s] and not y[s] for s in x), sum(y[s] and not x[s] for s in x), len(x)))
    return pairs, threshold


def mcnemar(claim: dict, ctx: Context) -> Verdict:
    """Solve-rate orderings by exact McNemar tests, Holm over the claim's differences: ``supported``
    where every difference of ``claimed`` (default: NAIL-F and OPD-F each above BC) is significant
    in its direction, ``contradicted`` where any difference is significant the other way."""
    found = _solve_pairs(claim, ctx)
    if found is None:
        return Verdict("untested", "no solve-rate test shipped", "none")
    pairs, threshold = found
    ps = [rules.mcnemar_p(a_, b_) for _, a_, b_, _ in pairs]
    bars = rules.holm_bars(ps, ctx.alpha)
    verdicts = {d: rules.mcnemar_verdict(a_, b_, bar, ctx.alpha) for (d, a_, b_, _), bar in zip(pairs, bars)}
    if any(v == "<" for v in verdicts.values()):
        verdict = "contradicted"
    elif all(verdicts[d] == ">" for d in claim.get("claimed", ("nail-F - bc", "opd-F - bc"))):
        verdict = "supported"
    else:
        verdict = "uninformative" if all(v == "uninformative" for v in verdicts.values()) else "not significant"
    parts = [f"{d}: {a_} only first, {b_} only second of {n} seeds, p {p:.3g} ({verdicts[d]})" for (d, a_, b_, n), p in zip(pairs, ps)]
    return Verdict(verdict, "; ".join(parts), f"exact McNemar; Holm over the {len(pairs)} differences at {ctx.alpha}; uninformative: "
                   f"with that few discordant pairs no split reaches {ctx.alpha}; solve = chain exact match >= {threshold:g}")


def noninferior(claim: dict, ctx: Context) -> Verdict:
    """Solve-rate non-inferiority of the first method of each difference ``a - b``: ``a``'s rate is at
    least ``b``'s less the claim's margin where the exact (Clopper-Pearson) upper bound of the
    share of seeds only ``b`` solves, at ``alpha / (number of differences)`` one-sided, lies below the
    margin (the rate difference is at least minus that share); ``contradicted`` where an exact
    McNemar test (Holm over the differences) finds ``a`` below ``b``; all differences must agree."""
    found = _solve_pairs(claim, ctx)
    if found is None:
        return Verdict("untested", "no solve-rate test shipped", "none")
    pairs, threshold = found
    margin, level = ctx.margins[claim["margin"]], ctx.alpha / len(pairs)
    bars = rules.holm_bars([rules.mcnemar_p(a_, b_) for _, a_, b_, _ in pairs], ctx.alpha)
    verdicts, parts = [], []
    for (d, a_, b_, n), bar in zip(pairs, bars):
        upper = rules.upper_rate_bound(b_, n, level)
        worse = rules.mcnemar_verdict(a_, b_, bar, ctx.alpha) == "<"
        verdicts.append("contradicted" if worse else "supported" if upper < margin else "not significant")
        parts.append(f"{d}: only second solves {b_} of {n} seeds (upper bound {upper:.3f}), only first {a_}: {verdicts[-1]}")
    return Verdict(rules.combine(verdicts), "; ".join(parts),
                   f"non-inferiority margin {margin:g} in solve rate: exact one-sided Clopper-Pearson bound at {level:.3g} per "
                   f"difference (Bonferroni over {len(pairs)}); solve = chain exact match >= {threshold:g}")


# ----------------------------------------------------------------------------- user simulators
def simulator_paired(claim: dict, ctx: Context) -> Verdict:
    """Calibrated minus prompted user models on the same held-out units (``experiments.simulator_study``):
    decided by the study's stated rule, its crossed bootstrap interval over fits and units (at the
    study's level, Bonferroni over its measures) excluding 0 on the claimed side (``direction``)."""
    path = ctx.root / claim["folder"] / "paired.csv"
    if not path.is_file():
        return Verdict("untested", "", f"{claim['folder']} is not shipped")
    r = next(r for r in sources.read_csv(path) if r["measure"] == claim["measure"])
    mean, low, high, fits = float(r["mean"]), float(r["low"]), float(r["high"]), int(r["fits"])
    side = ">" if low > 0 else "<" if high < 0 else None
    verdict = "not significant" if side is None else "supported" if side == claim["direction"] else "contradicted"
    return Verdict(verdict, f"calibrated - prompted {claim['measure']} {mean:+.3f} [{low:+.3f}, {high:+.3f}] over {fits} fits and "
                            f"{r['units']} units",
                   f"crossed bootstrap over fits and units at {float(r['level']):.2f} (0.05 over the study's measures, Bonferroni); "
                   f"an exact sign-flip over the {fits} fits alone could reach p {2 / 2 ** fits:.2f} at best")


KINDS: dict[str, Callable[[dict, Context], Verdict]] = {
    f.__name__: f for f in (bound_holds, slope, pipeline_ordering, pipeline_sim_gap, headroom, sweep_growth, dialogue_ordering,
                            dialogue_sim_gap, dialogue_curve, bc_rate, nail_polynomial, crossover_exists, crossover_predicted,
                            sample_size, mcnemar, noninferior, simulator_paired)}
"""Every kind of claim the data file may name, by name."""
