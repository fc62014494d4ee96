"""The GSM8K noisy-teacher distillation study (``experiments.gsm8k_distill``): its options, the
device-memory estimate, and the run: a teacher (a local folder, or a tiny chat model fine-tuned on the
train answers), one student per (method, eta, seed) trained for the same steps and prompts
(:mod:`shiftbounds.distill.trainers`), each scored by greedy exact match on the test problems and
saved under ``runs/``; ``results.json`` and ``results.md``.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
from accelerate import PartialState
from transformers import GPT2Config

from shiftbounds.conversations.calibration import TrainingConfig, train_sft
from shiftbounds.conversations.models import build_tiny_chat_model, check_model_folder, load_chat_model
from shiftbounds.distill.gsm8k import NoisyTeacher, exact_match, load_gsm8k, prompt_messages
from shiftbounds.distill.trainers import bc_examples, on_policy_trainer
from shiftbounds.losses import METHODS
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_json
from shiftbounds.utils.memory import Stage, estimate, model_shape
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import derive_seed, torch_generator, trainer_seed
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
    batch: int = field(default=4, metadata={"help": "prompts per step and process"})
    max_new: int = field(default=48, metadata={"help": "new tokens per completion"})
    lr: float = field(default=1e-3, metadata={"help": "student learning rate"})
    teacher_steps: int = field(default=30, metadata={"help": "fine-tuning steps of a tiny teacher on the train answers"})
    d_model: int = field(default=64, metadata={"help": "tiny model width"})
    n_layer: int = field(default=2, metadata={"help": "tiny model depth"})
    vocab_size: int = field(default=512, metadata={"help": "tokenizer vocabulary of the tiny models"})
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


def memory_estimate(cfg: GSM8KConfig) -> dict:
    """Device memory for one process (:mod:`shiftbounds.utils.memory`): the teacher resident, one
    student trained on ``batch`` sequences of ``prompt_len + max_new`` tokens, generation by the
    student on as many."""
    tiny = GPT2Config(vocab_size=cfg.vocab_size + 8, n_positions=1024, n_embd=cfg.d_model, n_layer=cfg.n_layer, n_head=4)
    teacher, student = (model_shape(path or tiny) for path in (cfg.teacher_model, cfg.student_model))
    seq = cfg.prompt_len + cfg.max_new
    return estimate([Stage("distillation (teacher + student)", (teacher,), student, train_batch=cfg.batch, train_len=seq,
                           gen=student, gen_batch=cfg.batch, gen_len=seq)])


def _sft_examples(problems) -> list[dict]:
    return [{"prompt": prompt_messages(p), "completion": [{"role": "assistant", "content": p.answer}]} for p in problems]


def run(cfg: GSM8KConfig, stream: TextIO | None = None) -> dict:
    state = PartialState()
    out = Path(cfg.out_dir)
    if state.is_main_process:
        # one file per (method, eta, seed) under runs/: a sweep reuses the others, made on as many torch threads
        guard_resume(out, cfg, environment=("torch_threads",))
    state.wait_for_everyone()
    train = load_gsm8k("train", cfg.data_dir or None, cfg.n_train)
    test = load_gsm8k("test", cfg.data_dir or None, cfg.n_test)
    st = StageCache(out / "runs", save=state.is_main_process, barrier=state.wait_for_everyone)
    texts = [p.question for p in train] + [p.answer for p in train]
    init = Path(cfg.student_model) if cfg.student_model else st.folder_stage("student_init", lambda f: build_tiny_chat_model(
        f, texts, vocab_size=cfg.vocab_size, d_model=cfg.d_model, n_layer=cfg.n_layer, seed=derive_seed(cfg.seed, "student")))
    if cfg.teacher_model:
        teacher_dir = Path(cfg.teacher_model)
    else:
        teacher_dir = st.folder_stage("teacher", lambda f: train_sft(_sft_examples(train), init, f, TrainingConfig(
            steps=max(cfg.teacher_steps, 1), batch=cfg.batch, lr=3e-3, max_length=1024, seed=cfg.seed), {"kind": "teacher"}))
    teacher, tok = load_chat_model(teacher_dir)
    teacher_em = exact_match(teacher, tok, test, cfg.max_new, batch=cfg.batch)
    jobs = [(m, e, k) for e in cfg.etas for m in cfg.methods for k in range(cfg.seeds)]
    prog = Progress(len(jobs), "gsm8k_distill", stream=stream, enabled=state.is_main_process)

    def train_and_evaluate(method: str, eta: float, k: int) -> dict:
        """One student: trained by ``method`` against the teacher at noise ``eta``, then its exact match."""
        noise = NoisyTeacher(cfg.temperature, eta)
        seed = trainer_seed(cfg.seed, "student", method, int(eta * 1000), k)
        with tempfile.TemporaryDirectory() as tmp:
            if method == "bc":
                examples = bc_examples(teacher, tok, train, noise, visits=cfg.steps * cfg.batch, max_new=cfg.max_new,
                                       generator=torch_generator(seed, "teacher_samples"))
                folder = train_sft(examples, init, Path(tmp) / "student", TrainingConfig(
                    steps=cfg.steps, batch=cfg.batch, lr=cfg.lr, max_length=1024, seed=seed), {"kind": "student", "method": method})
                student, _ = load_chat_model(folder)
            else:
                trainer = on_policy_trainer(method, init, teacher_dir, train, noise, tmp, steps=cfg.steps, batch=cfg.batch,
                                            lr=cfg.lr, max_new=cfg.max_new, seed=seed)
                trainer.train()
                student = trainer.model
        return {"method": method, "eta": eta, "seed": k, "exact_match": exact_match(student, tok, test, cfg.max_new, batch=cfg.batch)}

    runs = []
    for method, eta, k in jobs:
        runs.append(st.json(f"{method}_eta{eta}_seed{k}", lambda m=method, e=eta, s=k: train_and_evaluate(m, e, s)))
        prog.update(note=f"{method} eta={eta} seed={k}")
    rows = [{"eta": e, "method": m, "exact_match": float(np.mean([r["exact_match"] for r in runs if r["eta"] == e and r["method"] == m])),
             "seeds": cfg.seeds} for e in cfg.etas for m in cfg.methods]
    results = {"config": asdict(cfg), "teacher_exact_match": teacher_em, "rows": rows, "runs": runs,
               "models": {"teacher": cfg.teacher_model or "tiny gpt2 from a config, SFT on the train answers",
                          "student": cfg.student_model or "tiny gpt2 from a config"}}
    if state.is_main_process:
        write_json(out / "results.json", results)
        atomic_write_text(out / "results.md", f"# GSM8K noisy-teacher distillation\n\nTeacher exact match {teacher_em:.3f} on "
                          f"{cfg.n_test} test problems; teacher temperature {cfg.temperature}; {cfg.steps} steps x {cfg.batch} prompts "
                          "per student; greedy exact match of the final answer.\n\n" + markdown_table(rows))
    return results
