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
with the full teacher signal, 3 seeds), ``cpu`` (the paper's ``m = 31`` and the sweep
``m = 8, 16, 31`` at eta in {0, 0.2}, BC / OPD-F / NAIL-F, both teacher signals, from scratch and
warm-started, 3 seeds; sized for 2 CPU cores), ``paper`` (``m = 31``, larger model and budget; for
a GPU).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from shiftbounds.figures import plot_modadd
from shiftbounds.llm.models import resolve_device
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
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import torch_generator, torch_init_seed
from shiftbounds.utils.stages import StageCache
from shiftbounds.utils.stats import holm_verdicts, mean_ci, paired_difference


@dataclass(frozen=True)
class ModAddConfig:
    """Options of ``experiments.modadd``."""

    p: int = field(default=7, metadata={"help": "modulus p"})
    m: tuple[int, ...] = field(default=(8,), metadata={"help": "residues per prompt (chain lengths; one teacher each)", "resume": False})
    etas: tuple[float, ...] = field(default=(0.0, 0.1, 0.2), metadata={"help": "teacher noise levels (each run cached by key: a folder may hold several sweeps)", "resume": False})
    methods: tuple[str, ...] = field(default=METHODS, metadata={"help": f"students, from {METHODS}", "resume": False})
    teacher_signals: tuple[str, ...] = field(default=("full",), metadata={"help": f"what every student gets from the noisy teacher, from {TEACHER_SIGNALS}: one sampled token per position or the full distribution", "resume": False})
    warm_starts: tuple[int, ...] = field(default=(0,), metadata={"help": "steps of the shared BC warm start every method of a seed starts from (0 = random weights)", "resume": False})
    law: str = field(default="mixture", metadata={"help": f"noisy-teacher law, from {LAWS}"})
    noised_student: bool = field(default=False, metadata={"help": "OPD/NAIL fit (1-eta) pi_hat + eta nu (known-noise form)"})
    seeds: int = field(default=3, metadata={"help": "seeds per (eta, method)", "resume": False})
    steps: int = field(default=300, metadata={"help": "student optimisation steps"})
    batch: int = field(default=64, metadata={"help": "prompts per step"})
    lr: float = field(default=3e-3, metadata={"help": "student learning rate"})
    d_model: int = field(default=64, metadata={"help": "model width (teacher and students)"})
    n_layer: int = field(default=2, metadata={"help": "transformer blocks"})
    teacher_steps: int = field(default=800, metadata={"help": "teacher optimisation steps"})
    n_eval: int = field(default=1000, metadata={"help": "held-out prompts"})
    device: str = field(default="cpu", metadata={"help": "cpu, cuda or auto"})
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
              "warm_starts": (0, 5), "seeds": 2, "steps": 10, "batch": 16, "teacher_steps": 40, "n_eval": 100, "d_model": 32},
    "cpu": {"m": (8, 16, 31), "etas": (0.0, 0.2), "methods": ("bc", "opd-F", "nail-F"),
            "teacher_signals": ("sampled", "full"), "warm_starts": (0, 100), "seeds": 3, "steps": 600, "batch": 32,
            "d_model": 48, "teacher_steps": 800, "n_eval": 500},
    "paper": {"m": (31,), "etas": (0.0, 0.1, 0.2, 0.3), "seeds": 3, "steps": 3000, "batch": 256, "d_model": 256,
              "n_layer": 4, "teacher_steps": 6000, "n_eval": 2000, "device": "auto"},
}


SWEPT = ("out_dir", "m", "etas", "methods", "teacher_signals", "warm_starts", "seeds", "device")


def _key(cfg: ModAddConfig, *extra) -> str:
    """A short hash of the settings shared by a sweep's runs and of ``extra`` (which names the run)."""
    opts = {k: v for k, v in asdict(cfg).items() if k not in SWEPT}
    return hashlib.sha1(json.dumps([opts, *extra], sort_keys=True).encode()).hexdigest()[:10]


def get_teacher(cfg: ModAddConfig, task: ModAddTask, stream) -> tuple[torch.nn.Module, float]:
    """Load the cached teacher of ``task`` or train it (and cache it); returns it with its accuracy."""
    path = Path(cfg.out_dir) / f"teacher_m{task.m}_{_key(cfg, 'teacher', task.m)}.pt"
    device = resolve_device(cfg.device)[0]  # the students train in float32 on any device
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


def _warm_start(cfg: ModAddConfig, task: ModAddTask, scfg: StudentConfig, teacher, steps: int, key: tuple, prog, tag: str):
    """The shared warm start (``steps`` of BC with the cell's teacher signal), seeded by ``key``."""
    with torch_init_seed(cfg.seed, *key, "init"):
        return warm_start(task, scfg, teacher, steps, torch_generator(cfg.seed, *key),
                          progress=lambda s, l: prog.update(0, note=f"warm start {tag} loss {l:.3f}"))


def run(cfg: ModAddConfig, stream=sys.stderr) -> dict:
    """Train everything that is not saved yet, then write results and the figure."""
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    jobs = [(m, eta, sig, w, method, k) for m in cfg.m for eta in cfg.etas for sig in cfg.teacher_signals
            for w in cfg.warm_starts for method in cfg.methods for k in range(cfg.seeds)]
    prog = Progress(sum(cfg.steps + w for *_, w, _, _ in jobs), "modadd students", stream=stream, min_interval=5.0)
    runs, teachers = [], {}
    cache = StageCache(out / "runs")
    for m in cfg.m:
        task = ModAddTask(cfg.p, m)
        teacher, acc = get_teacher(cfg, task, stream)
        device = next(teacher.parameters()).device
        eval_prompts = sample_prompts(task, cfg.n_eval, torch_generator(cfg.seed, "eval_prompts", m))
        teachers[m] = {"m": m, "consistent_accuracy": acc, "chain_exact": evaluate(task, teacher, eval_prompts).chain_exact}
        warm: dict = {}  # the shared warm starts of this m, by (signal, eta, steps, seed)

        def train_one(eta: float, sig: str, w: int, method: str, k: int, tag: str) -> dict:
            """One student of the sweep (from the cell's shared warm start when ``w`` > 0), evaluated."""
            scfg = StudentConfig(method=method, eta=eta, law=cfg.law, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr,
                                 noised_student=cfg.noised_student, d_model=cfg.d_model, n_layer=cfg.n_layer,
                                 teacher_signal=sig)
            init = None
            if w:  # w steps of BC, computed once per (m, eta, signal, w, seed) and copied into every method
                if (sig, eta, w, k) not in warm:
                    key = ("warm", m, int(eta * 1000), sig, k)
                    warm[(sig, eta, w, k)] = cache.torch(
                        f"warm_{tag}_{_key(cfg, 'warm', w)}", lambda: _warm_start(cfg, task, scfg, teacher, w, key, prog, tag),
                        load=lambda path: load_model(path).to(device), save=save_model)
                init = warm[(sig, eta, w, k)]
            gen = torch_generator(cfg.seed, "student", m, method, int(eta * 1000), sig, w, k)
            with torch_init_seed(cfg.seed, "student_init", m, method, int(eta * 1000), sig, w, k):  # global state untouched
                student = train_student(task, scfg, teacher, gen, init=init,
                                        progress=lambda s, l: prog.update(note=f"{method} {tag} loss {l:.3f}"))
            return {"m": m, "eta": eta, "teacher_signal": sig, "warm_start": w, "method": method, "seed": k,
                    **asdict(evaluate(task, student, eval_prompts))}

        for _, eta, sig, w, method, k in (j for j in jobs if j[0] == m):
            tag = f"m{m}_eta{eta}_{sig}_warm{w}_seed{k}"
            name = f"{method}_{tag}_{_key(cfg, 'run')}"
            runs.append(cache.json(name, lambda: train_one(eta, sig, w, method, k, tag)))
            prog.update(w if name in cache.seconds else cfg.steps + w, note=f"{method} {tag}" + ("" if name in cache.seconds else " (resumed)"))
    return write_outputs(cfg, out, list(teachers.values()), runs)


def write_outputs(cfg: ModAddConfig, out: Path, teachers: list[dict], runs: list[dict]) -> dict:
    """``results.json``, ``runs.csv``, ``paired.csv``, ``results.md`` and the figure from the runs."""
    rows, paired = summarise(cfg, runs)
    results = {"config": asdict(cfg), "teachers": teachers, "rows": rows, "paired": paired, "runs": runs}
    write_json(out / "results.json", results)
    write_csv(out / "runs.csv", [{k: v for k, v in r.items() if k != "per_position"} for r in runs])
    write_csv(out / "paired.csv", paired)
    md = (f"# Modular addition with a noisy teacher\n\np = {cfg.p}, law = {cfg.law}, noised student = {cfg.noised_student}; "
          f"{cfg.steps} steps x {cfg.batch} prompts per student (after the warm start, if any), width {cfg.d_model}, "
          f"{cfg.n_layer} layers; greedy decoding on {cfg.n_eval} held-out prompts; mean over {cfg.seeds} seeds with 95 % CI.\n\n"
          "## Teachers\n\n" + markdown_table(teachers)
          + "\n## Students\n\n" + markdown_table(rows)
          + f"\n## Paired differences against BC\n\nSame m, eta, signal, warm start and seed; mean with 95 % t-interval; "
            f"`p`: exact sign-flip p-value, on which `verdict` rests (with {cfg.seeds} seeds the smallest possible p is "
            f"{2 / 2 ** cfg.seeds:.4g}); `holm verdict`: after Holm's correction over all {len(paired)} rows (the family).\n\n"
          + markdown_table(paired))
    atomic_write_text(out / "results.md", md)
    plot_modadd(results, out / "modadd")
    return results


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
