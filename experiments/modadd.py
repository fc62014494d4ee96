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
``modadd.{png,pdf}`` (exact match against ``m`` per method, 95 % CIs over seeds).

Presets: ``smoke`` (seconds; tests), ``default`` (``m = 8``, eta in {0, 0.1, 0.2}, six methods
with the full teacher signal, 3 seeds), ``cpu`` (the paper's ``m = 31``, eta in {0, 0.2}, BC / OPD-F /
NAIL-F with the full teacher signal from a shared 1,500-step BC warm start on corrupted prefixes,
200 steps each with a decaying learning rate, 10 seeds; about 45 min on 2 CPU cores), ``dev`` (the
``cpu`` configuration at eta = 0 on 3 development seeds, ``--seed 1000``: how it was chosen),
``sweep`` (the earlier sweep over ``m = 8, 16, 31``, both teacher signals, from scratch and
warm-started, 3 seeds), ``paper`` (``m = 31``, larger model and budget; for a GPU).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
import torch

from shiftbounds.figures import plot_modadd
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
from shiftbounds.utils.cli import exit_on_stale, load_config_file, parse_config
from shiftbounds.utils.device import resolve_device
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import torch_generator, torch_init_seed
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.stats import exact_proportion_ci, holm, holm_verdicts, mcnemar_exact, mean_ci, paired_difference
from shiftbounds.utils.workers import default_workers, one_torch_thread, run_jobs


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
    "paper": {"m": (31,), "etas": (0.0, 0.1, 0.2, 0.3), "seeds": 3, "steps": 3000, "batch": 256, "d_model": 256,
              "n_layer": 4, "teacher_steps": 6000, "n_eval": 2000, "device": "auto"},
}


SWEPT = ("out_dir", "m", "etas", "methods", "teacher_signals", "warm_starts", "seeds", "device", "solve_threshold", "workers", "retabulate")


def _key(cfg: ModAddConfig, *extra) -> str:
    """A short hash of the settings shared by a sweep's runs and of ``extra`` (which names the run)."""
    opts = {k: v for k, v in asdict(cfg).items() if k not in SWEPT}
    return hashlib.sha1(json.dumps([opts, *extra], sort_keys=True).encode()).hexdigest()[:10]


TEACHER_FIELDS = ("p", "d_model", "n_layer", "teacher_steps", "seed")


def _teacher_path(cfg: ModAddConfig, m: int) -> Path:
    """Where the teacher of chain length ``m`` is saved: named by the settings it depends on only."""
    opts = {k: getattr(cfg, k) for k in TEACHER_FIELDS}
    key = hashlib.sha1(json.dumps([opts, "teacher", m], sort_keys=True).encode()).hexdigest()[:10]
    return Path(cfg.out_dir) / f"teacher_m{m}_{key}.pt"


def get_teacher(cfg: ModAddConfig, task: ModAddTask, stream) -> tuple[torch.nn.Module, float]:
    """Load the cached teacher of ``task`` or train it (and cache it); returns it with its accuracy."""
    path = _teacher_path(cfg, task.m)
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


def _student_config(cfg: ModAddConfig, method: str, eta: float, sig: str) -> StudentConfig:
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
    teacher = load_model(_teacher_path(cfg, m)).to(device).eval()
    eval_prompts = sample_prompts(task, cfg.n_eval, torch_generator(cfg.seed, "eval_prompts", m))
    cache = StageCache(Path(cfg.out_dir) / "runs")
    tag = f"m{m}_eta{eta}_{sig}_warm{w}_seed{k}"
    warm: dict = {}

    def init():
        if w and "model" not in warm:
            key = ("warm", m, int(eta * 1000), sig, k)
            scfg = _student_config(cfg, "bc", eta, sig)

            def make():
                with torch_init_seed(cfg.seed, *key, "init"):
                    return warm_start(task, scfg, teacher, w, torch_generator(cfg.seed, *key), corrupt=cfg.warm_corrupt)

            warm["model"] = cache.torch(f"warm_{tag}_{_key(cfg, 'warm', w)}", make,
                                        load=lambda path: load_model(path).to(device), save=save_model)
        return warm.get("model")

    def train_one(method: str) -> dict:
        gen = torch_generator(cfg.seed, "student", m, method, int(eta * 1000), sig, w, k)
        with torch_init_seed(cfg.seed, "student_init", m, method, int(eta * 1000), sig, w, k):  # global state untouched
            student = train_student(task, _student_config(cfg, method, eta, sig), teacher, gen, init=init())
        return {"m": m, "eta": eta, "teacher_signal": sig, "warm_start": w, "method": method, "seed": k,
                **asdict(evaluate(task, student, eval_prompts))}

    runs = [cache.json(f"{method}_{tag}_{_key(cfg, 'run')}", lambda: train_one(method)) for method in cfg.methods]
    if w:  # the shared warm start itself, before any method: what the methods start from
        runs.append(cache.json(f"warmeval_{tag}_{_key(cfg, 'warm', w)}", lambda: {
            "m": m, "eta": eta, "teacher_signal": sig, "warm_start": w, "method": WARM_ROW, "seed": k,
            **asdict(evaluate(task, init(), eval_prompts))}))
    return runs


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
    jobs = [(cfg, m, eta, sig, w, k) for m in cfg.m for eta in cfg.etas for sig in cfg.teacher_signals
            for w in cfg.warm_starts for k in range(cfg.seeds)]
    workers = cfg.workers or default_workers()
    runs = [r for rs in run_jobs(run_seed, jobs, workers, label=f"modadd seeds on {workers} workers") for r in rs]
    return write_outputs(cfg, out, teachers, runs)


MCNEMAR_PAIRS = (("nail-F", "bc"), ("nail-F", "opd-F"), ("opd-F", "bc"))


def write_outputs(cfg: ModAddConfig, out: Path, teachers: list[dict], runs: list[dict]) -> dict:
    """``results.json``, ``runs.csv``, ``solves.csv``, ``mcnemar.csv``, ``paired.csv``,
    ``results.md`` and the figure from the runs."""
    rows, paired = summarise(cfg, runs)
    solves, mcnemar = solve_tables(cfg, runs)
    results = {"config": asdict(cfg), "teachers": teachers, "rows": rows, "solves": solves, "mcnemar": mcnemar,
               "paired": paired, "runs": runs}
    write_json(out / "results.json", results)
    write_csv(out / "runs.csv", [{k: v for k, v in r.items() if k != "per_position"} for r in runs])
    write_csv(out / "solves.csv", solves)
    write_csv(out / "mcnemar.csv", mcnemar)
    write_csv(out / "paired.csv", paired)
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
          + "\n## Students (chain exact match)\n\n" + markdown_table(rows)
          + f"\n## Paired differences against BC\n\nSame m, eta, signal, warm start and seed; mean with 95 % t-interval; "
            f"`p`: exact sign-flip p-value, on which `verdict` rests (with {cfg.seeds} seeds the smallest possible p is "
            f"{2 / 2 ** cfg.seeds:.4g}); `holm verdict`: after Holm's correction over all {len(paired)} rows (the family).\n\n"
          + markdown_table(paired))
    atomic_write_text(out / "results.md", md)
    plot_modadd(results, out / "modadd")
    return results


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
