"""Modular addition with a noisy teacher: BC vs OPD vs NAIL students trained from scratch (docs/theory.md §5).

``python -m experiments.modadd [--preset smoke|default|paper] [options]``

Trains (or loads from ``<out-dir>/teacher.pt``) a clean teacher, then for every noise level
``eta``, method and seed trains a student from scratch with the same architecture and budget, and
evaluates greedy decoding on held-out prompts: full chain-of-thought exact match, final-answer
exact match and per-position accuracy. Each finished run is saved under ``runs/`` and skipped
when the same command is run again. Outputs: ``results.json``, ``results.md``, ``runs.csv`` and
``modadd.{png,pdf}`` (accuracy against ``eta`` per method, the shape of the paper's Figure 1, left).

Presets: ``smoke`` (seconds; tests), ``default`` (CPU: ``m = 8``, eta in {0, 0.1, 0.2}, six methods,
3 seeds; about 10 minutes on 2 cores), ``paper`` (``m = 31``, larger model and budget; for a GPU).
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
    ModAddTask,
    StudentConfig,
    TeacherConfig,
    evaluate,
    sample_prompts,
    teacher_accuracy,
    train_student,
    train_teacher,
)
from shiftbounds.nn.transformer import load_model, save_model
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, read_json, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import torch_generator, torch_init_seed
from shiftbounds.utils.stats import mean_ci


@dataclass(frozen=True)
class ModAddConfig:
    """Options of ``experiments.modadd``."""

    p: int = field(default=7, metadata={"help": "modulus p"})
    m: int = field(default=8, metadata={"help": "residues per prompt (chain length)"})
    etas: tuple[float, ...] = field(default=(0.0, 0.1, 0.2), metadata={"help": "teacher noise levels (each run cached by key: a folder may hold several sweeps)", "resume": False})
    methods: tuple[str, ...] = field(default=METHODS, metadata={"help": f"students, from {METHODS}", "resume": False})
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
        ModAddTask(self.p, self.m)  # validates p and m


PRESETS = {
    "default": {},
    "smoke": {"m": 4, "etas": (0.0, 0.2), "methods": ("bc", "nail-F"), "seeds": 1, "steps": 20, "batch": 32,
              "teacher_steps": 60, "n_eval": 200, "d_model": 32},
    "paper": {"m": 31, "etas": (0.0, 0.1, 0.2, 0.3), "seeds": 3, "steps": 3000, "batch": 256, "d_model": 256,
              "n_layer": 4, "teacher_steps": 6000, "n_eval": 2000, "device": "auto"},
}


def _key(cfg: ModAddConfig, *extra) -> str:
    opts = {k: v for k, v in asdict(cfg).items() if k not in ("out_dir", "etas", "methods", "seeds", "device")}
    return hashlib.sha1(json.dumps([opts, *extra], sort_keys=True).encode()).hexdigest()[:10]


def get_teacher(cfg: ModAddConfig, task: ModAddTask, stream) -> tuple[torch.nn.Module, float]:
    """Load the cached teacher or train it (and cache it); returns it with its accuracy."""
    path = Path(cfg.out_dir) / f"teacher_{_key(cfg, 'teacher')}.pt"
    device = resolve_device(cfg.device)[0]  # the students train in float32 on any device
    if path.exists():
        teacher = load_model(path).to(device).eval()
    else:
        prog = Progress(cfg.teacher_steps, "modadd teacher", stream=stream, min_interval=5.0)
        teacher = train_teacher(task, TeacherConfig(cfg.teacher_steps, lr=3e-3, d_model=cfg.d_model, n_layer=cfg.n_layer),
                                torch_generator(cfg.seed, "teacher"), progress=lambda s, l: prog.update(note=f"loss {l:.3f}"),
                                device=device)
        save_model(teacher.cpu(), path)
        teacher = teacher.to(device)
    acc = teacher_accuracy(task, teacher, 2000, torch_generator(cfg.seed, "teacher_accuracy"))
    return teacher, acc


def run(cfg: ModAddConfig, stream=sys.stderr) -> dict:
    """Train everything that is not saved yet, then write results and the figure."""
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    task = ModAddTask(cfg.p, cfg.m)
    teacher, teacher_acc = get_teacher(cfg, task, stream)
    eval_prompts = sample_prompts(task, cfg.n_eval, torch_generator(cfg.seed, "eval_prompts"))
    teacher_eval = evaluate(task, teacher, eval_prompts)
    jobs = [(eta, m, k) for eta in cfg.etas for m in cfg.methods for k in range(cfg.seeds)]
    prog = Progress(len(jobs) * cfg.steps, "modadd students", stream=stream, min_interval=5.0)
    runs = []
    for eta, method, k in jobs:
        path = out / "runs" / f"{method}_eta{eta}_seed{k}_{_key(cfg, 'run')}.json"
        if path.exists():
            runs.append(read_json(path))
            prog.update(cfg.steps, note=f"{method} eta={eta} seed={k} (resumed)")
            continue
        scfg = StudentConfig(method=method, eta=eta, law=cfg.law, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr,
                             noised_student=cfg.noised_student, d_model=cfg.d_model, n_layer=cfg.n_layer)
        gen = torch_generator(cfg.seed, "student", method, int(eta * 1000), k)
        with torch_init_seed(cfg.seed, "student_init", method, int(eta * 1000), k):  # initialisation, global state untouched
            student = train_student(task, scfg, teacher, gen,
                                    progress=lambda s, l: prog.update(note=f"{method} eta={eta} seed={k} loss {l:.3f}"))
        ev = evaluate(task, student, eval_prompts)
        rec = {"method": method, "eta": eta, "seed": k, **asdict(ev)}
        write_json(path, rec)
        runs.append(rec)
    rows = []
    for eta in cfg.etas:
        for method in cfg.methods:
            rs = [r for r in runs if r["eta"] == eta and r["method"] == method]
            ce, ae = mean_ci(np.array([r["chain_exact"] for r in rs])), mean_ci(np.array([r["answer_exact"] for r in rs]))
            rows.append({"eta": eta, "method": method, "chain_exact": ce.value, "chain_ci": f"[{ce.low:.3f}, {ce.high:.3f}]",
                         "answer_exact": ae.value, "answer_ci": f"[{ae.low:.3f}, {ae.high:.3f}]", "seeds": len(rs)})
    results = {"config": asdict(cfg), "teacher_accuracy": teacher_acc, "teacher_chain_exact": teacher_eval.chain_exact,
               "rows": rows, "runs": runs}
    write_json(out / "results.json", results)
    write_csv(out / "runs.csv", [{k: v for k, v in r.items() if k != "per_position"} for r in runs])
    md = (f"# Modular addition with a noisy teacher\n\np = {cfg.p}, m = {cfg.m}, law = {cfg.law}, "
          f"noised student = {cfg.noised_student}; {cfg.steps} steps x {cfg.batch} prompts per student, "
          f"width {cfg.d_model}, {cfg.n_layer} layers; teacher consistent-continuation accuracy {teacher_acc:.4f}, "
          f"teacher greedy chain exact match {teacher_eval.chain_exact:.3f}; greedy decoding on {cfg.n_eval} held-out "
          f"prompts; mean over {cfg.seeds} seeds with 95 % CI.\n\n" + markdown_table(rows))
    atomic_write_text(out / "results.md", md)
    plot_modadd(results, out / "modadd")
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(ModAddConfig, __doc__, PRESETS, argv, name="experiments.modadd")
    results = exit_on_stale(run, cfg)
    print(markdown_table(results["rows"]))
    print(f"wrote {cfg.out_dir}/results.md, runs.csv, results.json, modadd.png/pdf")
    return results


if __name__ == "__main__":
    main()
