"""The modular-addition study (``experiments.modadd``): its configuration, the teachers (one per
chain length, cached), one seed of one cell (every method from the cell's shared warm start,
evaluated; each student a stage), and the tables and report made from the per-seed runs: solve
rates with exact intervals, McNemar tests, students' means and paired differences against BC.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from shiftbounds.modadd import (
    LAWS,
    METHODS,
    TEACHER_SIGNALS,
    ModAddTask,
    StudentConfig,
    TeacherConfig,
    evaluate,
    sample_prompts,
    teacher_accuracy,
    train_student,
    train_teacher,
    warm_start,
)
from shiftbounds.nn.transformer import load_model, save_model
from shiftbounds.utils.device import resolve_device
from shiftbounds.utils.io import markdown_table
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import torch_generator, torch_init_seed
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.stats import exact_proportion_ci, holm, holm_verdicts, mcnemar_exact, mean_ci, paired_difference


@dataclass(frozen=True)
class ModAddConfig:
    """Options of ``experiments.modadd``."""

    p: int = field(default=7, metadata={"help": "modulus p"})
    m: tuple[int, ...] = field(default=(8,), metadata={"help": "residues per prompt (chain lengths; one teacher each)", "resume": False})
    etas: tuple[float, ...] = field(default=(0.0, 0.1, 0.2), metadata={"help": "teacher noise levels (each run cached by key: a folder may hold several sweeps)", "resume": False})
    methods: tuple[str, ...] = field(default=METHODS, metadata={"help": f"students, from {METHODS}", "resume": False})
    teacher_signals: tuple[str, ...] = field(default=("full",), metadata={"help": f"what the students get from the noisy teacher, from {TEACHER_SIGNALS}: one sampled token per position, the full distribution (both: every method alike, the equal-information controls), or paper 2's setting (BC on sampled chains, the online students the distribution at their prefixes)", "resume": False})
    warm_starts: tuple[int, ...] = field(default=(0,), metadata={"help": "steps of the shared BC warm start every method of a seed starts from (0 = random weights)", "resume": False})
    warm_corrupt: float = field(default=0.0, metadata={"help": "prefix corruption in the shared BC warm start (the teacher's recipe: the noisy teacher labels corrupted prefixes); 0 = plain BC"})
    law: str = field(default="mixture", metadata={"help": f"noisy-teacher law, from {LAWS}"})
    noised_student: bool = field(default=False, metadata={"help": "OPD/NAIL fit (1-eta) pi_hat + eta nu (known-noise form)"})
    seeds: int = field(default=3, metadata={"help": "seeds per (eta, method)", "resume": False})
    steps: int = field(default=300, metadata={"help": "student optimisation steps"})
    batch: int = field(default=64, metadata={"help": "prompts per step"})
    lr: float = field(default=3e-3, metadata={"help": "student learning rate"})
    d_model: int = field(default=64, metadata={"help": "model width (teacher and students)"})
    n_layer: int = field(default=2, metadata={"help": "transformer blocks"})
    lr_decay: bool = field(default=False, metadata={"help": "students' learning rate falls linearly to 0.1 lr over the steps (as the teacher's)"})
    teacher_steps: int = field(default=800, metadata={"help": "teacher optimisation steps"})
    n_eval: int = field(default=1000, metadata={"help": "held-out prompts"})
    device: str = field(default="cpu", metadata={"help": "cpu, cuda or auto"})
    curve_every: int = field(default=0, metadata={"earlier": 0, "help": "also evaluate each student on the held-out prompts every this many steps (and before the first): its exact-match curve, in results.json and curves.csv; 0 = only at the end. The training is the same either way", "resume": False})
    skip: tuple[str, ...] = field(default=(), metadata={"earlier": (), "help": "cells left out of the sweep, each SIGNAL@ETA (full@0.0: no full-signal cell at eta 0), so a control can run at one noise level only", "resume": False})
    solve_threshold: float = field(default=0.9, metadata={"help": "a seed solves when its greedy chain exact match on the held-out prompts is >= this (fixed before the run)", "resume": False})
    workers: int = field(default=0, metadata={"help": "(m, eta, signal, warm start, seed) jobs at once, one process each; 0 = every core. The results do not depend on it", "resume": False})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="results/modadd/default", metadata={"help": "folder for results, teacher and runs", "resume": False})
    retabulate: bool = field(default=False, metadata={"help": "recompute the tables of --out-dir from its results.json after a change to the statistics; trains nothing", "resume": False})

    def __post_init__(self) -> None:
        bad = [x for x in self.methods if x not in METHODS]
        if bad or not self.methods:
            raise ValueError(f"--methods must come from {METHODS}; got unknown {bad}")
        if self.law not in LAWS:
            raise ValueError(f"--law must be one of {LAWS}; got {self.law!r}")
        if any(not 0 <= e < 1 for e in self.etas) or not self.etas:
            raise ValueError(f"--etas must lie in [0, 1); got {self.etas}")
        if self.device not in ("cpu", "cuda", "auto"):
            raise ValueError(f"--device must be cpu, cuda or auto; got {self.device!r}")
        if self.seeds < 1 or self.steps < 1 or self.teacher_steps < 1 or self.n_eval < 1:
            raise ValueError("--seeds, --steps, --teacher-steps and --n-eval must be >= 1")
        if not 0 <= self.warm_corrupt < 1:
            raise ValueError(f"--warm-corrupt must lie in [0, 1); got {self.warm_corrupt}")
        for spec in self.skip:
            sig, _, eta = spec.partition("@")
            try:
                ok = sig in self.teacher_signals and float(eta) in self.etas
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"--skip takes SIGNAL@ETA with a signal of --teacher-signals {self.teacher_signals} and an eta of "
                                 f"--etas {self.etas}; got {spec!r}")
        if self.curve_every < 0:
            raise ValueError(f"--curve-every must be >= 0 (0 = no curve); got {self.curve_every}")
        if not 0 < self.solve_threshold <= 1 or self.workers < 0:
            raise ValueError(f"need 0 < --solve-threshold <= 1 and --workers >= 0; got {self.solve_threshold}, {self.workers}")
        bad = [x for x in self.teacher_signals if x not in TEACHER_SIGNALS]
        if bad or not self.teacher_signals:
            raise ValueError(f"--teacher-signals must come from {TEACHER_SIGNALS}; got unknown {bad}")
        if not self.warm_starts or any(w < 0 for w in self.warm_starts):
            raise ValueError(f"--warm-starts must be >= 0; got {self.warm_starts}")
        if not self.m:
            raise ValueError("--m needs at least one chain length")
        for m in self.m:
            ModAddTask(self.p, m)  # validates p and m
        for method in self.methods:
            for signal in self.teacher_signals:
                StudentConfig(method=method, teacher_signal=signal)  # R / Mixed need the full signal


SWEPT = ("out_dir", "m", "etas", "methods", "teacher_signals", "warm_starts", "seeds", "device", "solve_threshold", "workers",
         "retabulate", "curve_every", "skip")


def jobs(cfg: ModAddConfig) -> list[tuple]:
    """The ``(m, eta, signal, warm start, seed)`` jobs of the sweep, less the cells of ``--skip``."""
    skipped = {(sig, float(eta)) for sig, _, eta in (spec.partition("@") for spec in cfg.skip)}
    return [(m, eta, sig, w, k) for m in cfg.m for eta in cfg.etas for sig in cfg.teacher_signals
            for w in cfg.warm_starts for k in range(cfg.seeds) if (sig, eta) not in skipped]


def run_key(cfg: ModAddConfig, *extra) -> str:
    """A short hash of the settings shared by a sweep's runs and of ``extra`` (which names the run);
    a run with a curve (``curve_every > 0``) is another stage than the same run without one."""
    opts = {k: v for k, v in asdict(cfg).items() if k not in SWEPT}
    if cfg.curve_every:
        opts["curve_every"] = cfg.curve_every
    return hashlib.sha1(json.dumps([opts, *extra], sort_keys=True).encode()).hexdigest()[:10]


TEACHER_FIELDS = ("p", "d_model", "n_layer", "teacher_steps", "seed")


def teacher_path(cfg: ModAddConfig, m: int) -> Path:
    """Where the teacher of chain length ``m`` is saved: named by the settings it depends on only."""
    opts = {k: getattr(cfg, k) for k in TEACHER_FIELDS}
    key = hashlib.sha1(json.dumps([opts, "teacher", m], sort_keys=True).encode()).hexdigest()[:10]
    return Path(cfg.out_dir) / f"teacher_m{m}_{key}.pt"


def get_teacher(cfg: ModAddConfig, task: ModAddTask, stream) -> tuple[torch.nn.Module, float]:
    """Load the cached teacher of ``task`` or train it (and cache it); returns it with its accuracy."""
    path = teacher_path(cfg, task.m)
    device = resolve_device(cfg.device)  # the students train in float32 on any device
    if path.exists():
        teacher = load_model(path).to(device).eval()
    else:
        prog = Progress(cfg.teacher_steps, f"modadd teacher m={task.m}", stream=stream, min_interval=5.0)
        with torch_init_seed(cfg.seed, "teacher_init", task.m):
            teacher = train_teacher(task, TeacherConfig(cfg.teacher_steps, lr=3e-3, d_model=cfg.d_model, n_layer=cfg.n_layer),
                                    torch_generator(cfg.seed, "teacher", task.m),
                                    progress=lambda s, l: prog.update(note=f"loss {l:.3f}"), device=device)
        save_model(teacher.cpu(), path)
        teacher = teacher.to(device)
    acc = teacher_accuracy(task, teacher, 2000, torch_generator(cfg.seed, "teacher_accuracy", task.m))
    return teacher, acc


CELL = ("m", "eta", "teacher_signal", "warm_start")
WARM_ROW = "warm start"
"""The ``method`` of the rows that evaluate a cell's shared warm start alone (in ``runs.csv`` and ``solves.csv``)."""


def student_config(cfg: ModAddConfig, method: str, eta: float, sig: str) -> StudentConfig:
    return StudentConfig(method=method, eta=eta, law=cfg.law, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr,
                         noised_student=cfg.noised_student, d_model=cfg.d_model, n_layer=cfg.n_layer,
                         teacher_signal=sig, lr_decay=cfg.lr_decay)


def run_seed(cfg: ModAddConfig, m: int, eta: float, sig: str, w: int, k: int) -> list[dict]:
    """Every method of one seed of one cell, evaluated: the shared warm start (``w`` steps of BC
    with the cell's teacher signal, when ``w > 0``) is trained once and copied into each method.
    Each student and warm start is saved under ``<out_dir>/runs`` when finished and loaded on a
    rerun. The teacher must be saved already (:func:`get_teacher`)."""
    task = ModAddTask(cfg.p, m)
    device = resolve_device(cfg.device)
    teacher = load_model(teacher_path(cfg, m)).to(device).eval()
    eval_prompts = sample_prompts(task, cfg.n_eval, torch_generator(cfg.seed, "eval_prompts", m))
    cache = StageCache(Path(cfg.out_dir) / "runs")
    tag = f"m{m}_eta{eta}_{sig}_warm{w}_seed{k}"
    warm: dict = {}

    def init():
        if w and "model" not in warm:
            key = ("warm", m, int(eta * 1000), sig, k)
            scfg = student_config(cfg, "bc", eta, sig)

            def make():
                with torch_init_seed(cfg.seed, *key, "init"):
                    return warm_start(task, scfg, teacher, w, torch_generator(cfg.seed, *key), corrupt=cfg.warm_corrupt)

            warm["model"] = cache.torch(f"warm_{tag}_{run_key(cfg, 'warm', w)}", make,
                                        load=lambda path: load_model(path).to(device), save=save_model)
        return warm.get("model")

    def train_one(method: str) -> dict:
        gen = torch_generator(cfg.seed, "student", m, method, int(eta * 1000), sig, w, k)
        curve: list[dict] = []

        def record(steps_done: int, student) -> None:
            if steps_done % cfg.curve_every == 0 or steps_done == cfg.steps:
                curve.append({"step": steps_done, "chain_exact": evaluate(task, student, eval_prompts).chain_exact})

        with torch_init_seed(cfg.seed, "student_init", m, method, int(eta * 1000), sig, w, k):  # global state untouched
            student = train_student(task, student_config(cfg, method, eta, sig), teacher, gen, init=init(),
                                    after_step=record if cfg.curve_every else None)
        return {"m": m, "eta": eta, "teacher_signal": sig, "warm_start": w, "method": method, "seed": k,
                **asdict(evaluate(task, student, eval_prompts)), **({"curve": curve} if cfg.curve_every else {})}

    runs = [cache.json(f"{method}_{tag}_{run_key(cfg, 'run')}", lambda: train_one(method)) for method in cfg.methods]
    if w:  # the shared warm start itself, before any method: what the methods start from
        runs.append(cache.json(f"warmeval_{tag}_{run_key(cfg, 'warm', w)}", lambda: {
            "m": m, "eta": eta, "teacher_signal": sig, "warm_start": w, "method": WARM_ROW, "seed": k,
            **asdict(evaluate(task, init(), eval_prompts))}))
    return runs


MCNEMAR_PAIRS = (("nail-F", "bc"), ("nail-F", "opd-F"), ("opd-F", "bc"))


def solve_tables(cfg: ModAddConfig, runs: list[dict]) -> tuple[list[dict], list[dict]]:
    """Solve rates per (cell, method) with Clopper-Pearson intervals, and exact McNemar tests of
    :data:`MCNEMAR_PAIRS` per cell (seeds paired), Holm-corrected within each cell's family."""
    solves, tests = [], []
    cells = sorted(dict.fromkeys(tuple(r[c] for c in CELL) for r in runs))
    for cell in cells:
        here = [r for r in runs if tuple(r[c] for c in CELL) == cell]
        solved = {method: [r["chain_exact"] >= cfg.solve_threshold for r in sorted(here, key=lambda r: r["seed"]) if r["method"] == method]
                  for method in (WARM_ROW, *cfg.methods)}
        for method, x in solved.items():
            if x:
                ci = exact_proportion_ci(sum(x), len(x))
                solves.append({**dict(zip(CELL, cell)), "method": method, "solved": sum(x), "seeds": len(x),
                               "solve_rate": ci.value, "ci": f"[{ci.low:.3f}, {ci.high:.3f}]"})
        family = []
        for a, b in MCNEMAR_PAIRS:
            if solved.get(a) and solved.get(b) and len(solved[a]) == len(solved[b]):
                t = mcnemar_exact(solved[a], solved[b], (a, b))
                family.append({**dict(zip(CELL, cell)), "difference": t["difference"], "solve_rate_difference": t["mean"],
                               "only_first": t["only_x"], "only_second": t["only_y"], "seeds": t["n"], "p": t["p"], "verdict": t["verdict"]})
        for row, kept in zip(family, holm([r["p"] for r in family]) if family else []):
            row["holm verdict"] = row["verdict"] if kept else "not significant"
        tests += family
    return solves, tests


def summarise(cfg: ModAddConfig, runs: list[dict]) -> tuple[list[dict], list[dict]]:
    """Rows per (cell, method) with 95 % t-intervals over seeds, and per-seed paired differences
    of chain and answer exact match of every online method against BC in the same cell."""
    rows, paired = [], []
    cells = list(dict.fromkeys(tuple(r[c] for c in CELL) for r in runs))
    for cell in sorted(cells):
        here = [r for r in runs if tuple(r[c] for c in CELL) == cell]
        by = {method: sorted((r for r in here if r["method"] == method), key=lambda r: r["seed"]) for method in cfg.methods}
        for method, rs in by.items():
            if not rs:
                continue
            ce, ae = mean_ci(np.array([r["chain_exact"] for r in rs])), mean_ci(np.array([r["answer_exact"] for r in rs]))
            rows.append({**dict(zip(CELL, cell)), "method": method, "chain_exact": ce.value, "chain_ci": f"[{ce.low:.3f}, {ce.high:.3f}]",
                         "answer_exact": ae.value, "answer_ci": f"[{ae.low:.3f}, {ae.high:.3f}]", "seeds": len(rs)})
            if method == "bc" or not by.get("bc") or len(by["bc"]) != len(rs) or len(rs) < 2:
                continue
            for key in ("chain_exact", "answer_exact"):
                d = paired_difference(np.array([r[key] for r in rs]), np.array([b[key] for b in by["bc"]]), (method, "bc"))
                paired.append({**dict(zip(CELL, cell)), "difference": d["difference"], "measure": key, "mean": d["mean"],
                               "ci": f"[{d['low']:.3f}, {d['high']:.3f}]", "p": d["p"], "verdict": d["verdict"]})
    for row, verdict in zip(paired, holm_verdicts(paired)):
        row["holm verdict"] = verdict
    return rows, paired


def steps_to_solve(run: dict, threshold: float) -> float:
    """The first evaluated step at which a run's curve reaches ``threshold`` (``inf``: never)."""
    return next((float(p["step"]) for p in run["curve"] if p["chain_exact"] >= threshold), float("inf"))


def speed_tables(cfg: ModAddConfig, runs: list[dict]) -> list[dict]:
    """Which method solves first, per cell with curves: for each pair of :data:`MCNEMAR_PAIRS`, the
    seeds where each solves strictly earlier than the other (a tie, both never solving included,
    counts for neither), the exact two-sided sign test on those counts, and Holm's correction over
    the cell's pairs; with each method's median steps to solve."""
    out = []
    curved = [r for r in runs if r.get("curve") and r["method"] != WARM_ROW]
    for cell in sorted(dict.fromkeys(tuple(r[c] for c in CELL) for r in curved)):
        here = {method: {r["seed"]: steps_to_solve(r, cfg.solve_threshold) for r in curved
                         if tuple(r[c] for c in CELL) == cell and r["method"] == method} for method in cfg.methods}
        family = []
        for a, b in MCNEMAR_PAIRS:
            if not here.get(a) or not here.get(b) or set(here[a]) != set(here[b]):
                continue
            seeds = sorted(here[a])
            t = mcnemar_exact([here[a][k] < here[b][k] for k in seeds], [here[b][k] < here[a][k] for k in seeds], (a, b))
            family.append({**dict(zip(CELL, cell)), "difference": t["difference"],
                           "median_steps_first": float(np.median([here[a][k] for k in seeds])),
                           "median_steps_second": float(np.median([here[b][k] for k in seeds])),
                           "first_sooner": t["only_x"], "second_sooner": t["only_y"], "seeds": t["n"], "p": t["p"],
                           "verdict": t["verdict"].replace(">", "solves sooner than").replace("<", "solves later than")})
        for row, kept in zip(family, holm([r["p"] for r in family]) if family else []):
            row["holm verdict"] = row["verdict"] if kept else "not significant"
        out += family
    return out


def curve_rows(runs: list[dict]) -> list[dict]:
    """``curves.csv``: one row per (cell, method, seed, step) of the runs that kept a curve."""
    return [{**{c: r[c] for c in CELL}, "method": r["method"], "seed": r["seed"], **point}
            for r in runs for point in r.get("curve", ())]


def report_md(cfg: ModAddConfig, teachers: list[dict], rows: list[dict], solves: list[dict], mcnemar: list[dict],
              paired: list[dict], speed: list[dict] | None = None) -> str:
    """The run's ``results.md``: teachers, solve rates, McNemar tests, which method solves first
    (with curves), students and paired differences."""
    control = [r for r in solves if r["eta"] == 0.0]
    control_ok = bool(control) and all(r["solve_rate"] >= 0.9 for r in control)
    md = (f"# Modular addition with a noisy teacher\n\np = {cfg.p}, law = {cfg.law}, noised student = {cfg.noised_student}; "
          f"{cfg.steps} steps x {cfg.batch} prompts per student (after the warm start, if any), learning rate {cfg.lr}"
          f"{' decaying linearly to 0.1x' if cfg.lr_decay else ''}, width {cfg.d_model}, {cfg.n_layer} layers; greedy decoding on "
          f"{cfg.n_eval} held-out prompts; {cfg.seeds} seeds.\n\n"
          "## Teachers\n\n" + markdown_table(teachers)
          + f"\n## Solve rates\n\nA seed solves when its greedy chain exact match is >= {cfg.solve_threshold} (fixed before the run); "
            "rate with its exact (Clopper-Pearson) 95 % interval; `warm start`: the cell's shared warm start alone, before any "
            "method trains (what every method starts from). "
          + ("The eta = 0 control solves in >= 90 % of seeds for every method.\n\n" if control_ok else
             "**The eta = 0 control does not solve in >= 90 % of seeds for every method (or was not run): the noise "
             "comparisons below cannot be read as effects of the noise or the method.**\n\n" if control or 0.0 in cfg.etas else
             "No eta = 0 control in this run.\n\n")
          + markdown_table(solves)
          + "\n## Paired solve differences (exact McNemar)\n\nSame cell and seed (a seed's warm start is shared by its methods); "
            "`holm verdict`: Holm's correction over the family of the three differences of each cell.\n\n" + markdown_table(mcnemar)
          + (f"\n## Which method solves first (curves every {cfg.curve_every} steps)\n\nPer seed, the first evaluated step at "
             f"which each method's greedy chain exact match reaches {cfg.solve_threshold} (`inf`: never within the budget); "
             "the exact sign test on the seeds where one solves strictly sooner (ties count for neither), Holm over each "
             "cell's pairs.\n\n" + markdown_table(speed) if speed else "")
          + "\n## Students (chain exact match)\n\n" + markdown_table(rows)
          + f"\n## Paired differences against BC\n\nSame m, eta, signal, warm start and seed; mean with 95 % t-interval; "
            f"`p`: exact sign-flip p-value, on which `verdict` rests (with {cfg.seeds} seeds the smallest possible p is "
            f"{2 / 2 ** cfg.seeds:.4g}); `holm verdict`: after Holm's correction over all {len(paired)} rows (the family).\n\n"
          + markdown_table(paired))
    return md
