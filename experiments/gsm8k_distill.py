"""Noisy-teacher distillation on GSM8K with transformers models: BC vs OPD vs NAIL.

``python -m experiments.gsm8k_distill [--preset smoke|gpu] [options]``
(several processes: ``torchrun --nproc_per_node N -m experiments.gsm8k_distill ...``)

A teacher (``--teacher-model`` folder, or a tiny model built from a config and fine-tuned on the
train answers for ``--teacher-steps``) is made noisy by a sampling temperature or an ``eta``
mixture; students (``--student-model`` or tiny, same architecture) are trained with each method for
the same number of steps and prompts, and scored by exact match of the final ``#### <number>`` under
greedy decoding on test problems. Each finished run is saved under ``runs/`` and skipped on a rerun;
``results.json`` / ``results.md`` / ``config.json`` follow the full pipeline's layout.

The smoke preset (tiny random models, a handful of problems) checks the machinery in about a
minute on a CPU; its accuracies are 0 and mean nothing. The gpu preset documents a 0.5-1.5B run:
``--teacher-model`` / ``--student-model`` local folders (e.g. a 1.5B teacher and a 0.5B student),
bf16, batch 16 prompts, 384 new tokens, 500 steps per method; ``--estimate-only`` prints the
expected device memory (:mod:`shiftbounds.llm.memory`) without loading weights.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from shiftbounds.llm.distributed import init_from_env, shard, wrap
from shiftbounds.llm.gsm8k import METHODS, SPECIALS, NoisyTeacher, exact_match, load_gsm8k, prompt_text, student_loss
from shiftbounds.llm.memory import Stage, estimate, format_estimate, model_shape
from shiftbounds.llm.models import ByteTokenizer, TinyLM, check_model_folder, load_causal_lm, tiny_config
from shiftbounds.llm.training import fit, make_batch, span_nll
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng, torch_generator
from shiftbounds.utils.stages import StageCache


@dataclass(frozen=True)
class GSM8KConfig:
    """Options of ``experiments.gsm8k_distill``."""

    data_dir: str = field(default="", metadata={"help": "folder holding gsm8k/ (default: ../shared/data)"})
    teacher_model: str = field(default="", metadata={"help": "local teacher folder (empty: tiny model from a config)"})
    student_model: str = field(default="", metadata={"help": "local student folder (empty: tiny model from a config)"})
    methods: tuple[str, ...] = field(default=METHODS, metadata={"help": f"students, from {METHODS}", "resume": False})
    etas: tuple[float, ...] = field(default=(0.0, 0.2), metadata={"help": "noise as an eta mixture with uniform", "resume": False})
    temperature: float = field(default=1.0, metadata={"help": "teacher sampling temperature (paper: 1 or 4)"})
    seeds: int = field(default=1, metadata={"help": "seeds per (method, eta)", "resume": False})
    n_train: int = field(default=64, metadata={"help": "training problems"})
    n_test: int = field(default=32, metadata={"help": "test problems"})
    steps: int = field(default=20, metadata={"help": "student steps"})
    batch: int = field(default=4, metadata={"help": "prompts per step (over all processes)"})
    max_new: int = field(default=48, metadata={"help": "new tokens per completion"})
    lr: float = field(default=1e-3, metadata={"help": "student learning rate"})
    teacher_steps: int = field(default=30, metadata={"help": "fine-tuning steps of a tiny teacher on the train answers"})
    d_model: int = field(default=64, metadata={"help": "tiny model width"})
    n_layer: int = field(default=2, metadata={"help": "tiny model depth"})
    device: str = field(default="auto", metadata={"help": "auto, cpu or cuda", "resume": False})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "recompute activations in the backward pass (less memory)", "resume": False})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="results/gsm8k_distill/default", metadata={"help": "results folder", "resume": False})
    prompt_len: int = field(default=256, metadata={"help": "prompt tokens assumed by --estimate-only", "resume": False})
    estimate_only: bool = field(default=False, metadata={"help": "print the device-memory estimate and exit (loads no weights)", "resume": False})

    def __post_init__(self) -> None:
        check_model_folder(self.teacher_model, "--teacher-model")
        check_model_folder(self.student_model, "--student-model")
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise ValueError(f"--methods must come from {METHODS}; got unknown {bad}")
        if any(not 0 <= e < 1 for e in self.etas) or self.temperature <= 0:
            raise ValueError(f"--etas in [0, 1) and --temperature > 0 required; got {self.etas}, {self.temperature}")
        for k in ("seeds", "n_train", "n_test", "steps", "batch", "max_new", "prompt_len"):
            if getattr(self, k) < 1:
                raise ValueError(f"--{k.replace('_', '-')} must be >= 1; got {getattr(self, k)}")


PRESETS = {
    "smoke": {"methods": ("bc", "opd-F", "nail-F", "nail-Mixed"), "etas": (0.0, 0.2), "n_train": 16, "n_test": 8,
              "steps": 3, "batch": 2, "max_new": 24, "teacher_steps": 5, "d_model": 32, "n_layer": 1},
    "gpu": {"etas": (0.0, 0.1, 0.2), "seeds": 2, "n_train": 7473, "n_test": 1319, "steps": 500, "batch": 16,
            "max_new": 384, "lr": 1e-5, "teacher_steps": 0, "gradient_checkpointing": True},
}


def _spec(cfg: GSM8KConfig) -> TinyLM:
    return TinyLM("gpt2", cfg.d_model, cfg.n_layer, 4, 1024)


def memory_estimate(cfg: GSM8KConfig) -> dict:
    """Device memory for one process (:mod:`shiftbounds.llm.memory`): the teacher resident, one
    student trained on ``batch`` sequences of ``prompt_len + max_new`` tokens, generation by the
    larger model on as many; evaluation in batches of the same size."""
    tiny = tiny_config(_spec(cfg), ByteTokenizer(SPECIALS).vocab_size)
    teacher, student = (model_shape(path or tiny) for path in (cfg.teacher_model, cfg.student_model))
    seq = cfg.prompt_len + cfg.max_new
    gen = max((teacher, student), key=lambda m: m.n_layer * m.kv_dim)
    return estimate([Stage("distillation (teacher + student)", (teacher,), student, train_batch=cfg.batch, train_len=seq,
                           gen=gen, gen_batch=cfg.batch, gen_len=seq, checkpointing=cfg.gradient_checkpointing)])


def _model(path: str, cfg: GSM8KConfig, seed: int):
    return load_causal_lm(path or None, _spec(cfg), special_tokens=SPECIALS, device=cfg.device,
                          gradient_checkpointing=cfg.gradient_checkpointing, seed=seed)


def run(cfg: GSM8KConfig, stream=sys.stderr) -> dict:
    info = init_from_env()
    out = Path(cfg.out_dir)
    train = load_gsm8k("train", cfg.data_dir or None, cfg.n_train)
    test = load_gsm8k("test", cfg.data_dir or None, cfg.n_test)
    teacher, tok, dev = _model(cfg.teacher_model, cfg, cfg.seed)
    if not cfg.teacher_model and cfg.teacher_steps:
        rng = numpy_rng(cfg.seed, "teacher")
        batches = (make_batch(tok, [(prompt_text(train[i]), train[i].answer) for i in rng.integers(len(train), size=cfg.batch)],
                              1024).to(dev) for _ in range(cfg.teacher_steps))
        fit(teacher, span_nll, batches, lr=3e-3)
    teacher.eval()
    teacher_em = exact_match(teacher, tok, test, cfg.max_new, batch=cfg.batch)
    jobs = [(m, e, k) for e in cfg.etas for m in cfg.methods for k in range(cfg.seeds)]
    prog = Progress(len(jobs) * cfg.steps, "gsm8k_distill", stream=stream, enabled=info.is_main)
    if info.is_main:
        # one file per (method, eta, seed): adding methods, noise levels or seeds reuses the others
        guard_resume(out, cfg)  # one file per (method, eta, seed) under runs/: a sweep reuses the others
    runs, cache = [], StageCache(out / "runs", save=info.is_main)

    def train_and_evaluate(method: str, eta: float, k: int) -> dict:
        """One student: trained by ``method`` against the teacher at noise ``eta``, then its exact match."""
        student, _, _ = _model(cfg.student_model, cfg, cfg.seed + 1000 + k)
        net = wrap(student, info)
        opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=0.0)
        noise = NoisyTeacher(cfg.temperature, eta)
        g = torch_generator(cfg.seed, "student", method, int(eta * 1000), k)
        rng = numpy_rng(cfg.seed, "batches", method, int(eta * 1000), k)
        for step in range(cfg.steps):
            batch = [train[i] for i in rng.integers(len(train), size=cfg.batch)]
            loss = student_loss(method, net, teacher, tok, shard(batch, info), noise, cfg.max_new, g)  # DDP syncs gradients
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
            opt.step()
            prog.update(note=f"{method} eta={eta} seed={k} loss {loss.item():.3f}")
        return {"method": method, "eta": eta, "seed": k, "exact_match": exact_match(student, tok, test, cfg.max_new, batch=cfg.batch)}

    for method, eta, k in jobs:
        name = f"{method}_eta{eta}_seed{k}"
        runs.append(cache.json(name, lambda: train_and_evaluate(method, eta, k)))
        if name not in cache.seconds:
            prog.update(cfg.steps, note=f"{method} eta={eta} (resumed)")
    rows = [{"eta": e, "method": m, "exact_match": float(np.mean([r["exact_match"] for r in runs if r["eta"] == e and r["method"] == m])),
             "seeds": cfg.seeds} for e in cfg.etas for m in cfg.methods]
    results = {"config": asdict(cfg), "teacher_exact_match": teacher_em, "rows": rows, "runs": runs,
               "models": {"teacher": cfg.teacher_model or "tiny gpt2 from a config", "student": cfg.student_model or "tiny gpt2 from a config"}}
    if info.is_main:
        write_json(out / "results.json", results)
        atomic_write_text(out / "results.md", f"# GSM8K noisy-teacher distillation\n\nTeacher exact match {teacher_em:.3f} on "
                          f"{cfg.n_test} test problems; teacher temperature {cfg.temperature}; {cfg.steps} steps x {cfg.batch} prompts "
                          "per student; greedy exact match of the final answer.\n\n" + markdown_table(rows))
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(GSM8KConfig, __doc__, {"default": {}, **PRESETS}, argv, name="experiments.gsm8k_distill")
    if cfg.estimate_only:
        est = memory_estimate(cfg)
        print(format_estimate(est))
        return est
    results = exit_on_stale(run, cfg)
    print(markdown_table(results["rows"]))
    return results


if __name__ == "__main__":
    main()
