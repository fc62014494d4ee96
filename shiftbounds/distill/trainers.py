"""Noisy-teacher distillation students on TRL (pinned 1.16.0): BC, OPD and NAIL.

* **OPD** and **NAIL** are :class:`NoisyTeacherDistillationTrainer`, TRL's on-policy
  ``DistillationTrainer`` with the paper's prefixes and loss: OPD samples the student at
  temperature 1, NAIL rolls it out greedily (as it is deployed); both score the prefixes with the
  noisy teacher (:class:`~shiftbounds.distill.gsm8k.NoisyTeacher`: temperature ``t`` or an ``eta``
  mixture) under :func:`~shiftbounds.distill.gsm8k.on_policy_loss` (forward, reverse or mixed KL;
  NAIL's noised student). TRL's own loss ties the teacher's law to the sampling temperature and
  offers only a generalised JSD of the raw teacher, so the loss is replaced; generation, batching,
  data-parallel training (``accelerate launch``) and logging are TRL's.
* **BC** is LogLossBC on noisy-teacher samples: :func:`bc_examples` draws fresh teacher samples for
  every prompt visit, and TRL's ``SFTTrainer`` trains on them
  (:func:`shiftbounds.conversations.calibration.train_sft`).

Every method gets the same optimiser steps, prompts per step and prompt pool.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch
from datasets import Dataset
from transformers import PreTrainedTokenizerBase
from trl import DistillationConfig
from trl.trainer.distillation_trainer import DistillationTrainer

from shiftbounds.conversations.models import load_chat_model, trainer_counts_positions_from_mask
from shiftbounds.distill.gsm8k import NoisyTeacher, Problem, on_policy_loss, prompt_messages, sample_completions
from shiftbounds.losses import METHODS
from shiftbounds.utils.device import resolve_device
from shiftbounds.utils.progress import attach_progress

ON_POLICY = tuple(m for m in METHODS if m != "bc")


class NoisyTeacherDistillationTrainer(DistillationTrainer):
    """TRL's on-policy distillation trainer with the noisy teacher and the paper's losses.

    Args (besides ``DistillationTrainer``'s):
        method: one of :data:`ON_POLICY`; ``nail-*`` needs a config from :func:`distillation_config`
            with greedy generation.
        noise: the teacher's noise law.
        mixed_beta: the weight of the mixed divergence.
    """

    def __init__(self, *args, method: str, noise: NoisyTeacher, mixed_beta: float = 0.5, **kwargs) -> None:
        if method not in ON_POLICY:
            raise ValueError(f"method must be one of {ON_POLICY}; got {method!r}")
        greedy = (kwargs["args"].generation_kwargs or {}).get("do_sample") is False
        if greedy != method.startswith("nail"):
            raise ValueError(f"{method} needs {'greedy' if method.startswith('nail') else 'sampled'} prefixes; "
                             "build its config with distillation_config(method, ...)")
        super().__init__(*args, **kwargs)
        self.method, self.noise, self.mixed_beta = method, noise, mixed_beta
        self.last_completions: list[list[int]] = []

    def _generate_single_turn(self, *args, **kwargs):
        completions = super()._generate_single_turn(*args, **kwargs)
        self.last_completions = [list(c) for c in completions]  # the prefixes the loss is taken at
        return completions

    def _compute_loss(self, unwrapped_student, inputs, num_items_in_batch):
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        att = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        n = inputs["completion_ids"].size(1)
        mask = inputs["completion_mask"].float()
        student = unwrapped_student(input_ids=ids, attention_mask=att).logits[:, -n - 1: -1]
        teacher = self.accelerator.unwrap_model(self.teacher_model)
        teacher.eval()
        with torch.no_grad():
            teacher_logits = teacher(input_ids=ids, attention_mask=att).logits[:, -n - 1: -1]
        total = on_policy_loss(self.method, student, teacher_logits, self.noise, mask, mixed_beta=self.mixed_beta,
                               reduction="sum")
        n_valid = mask.sum()
        denominator = num_items_in_batch if num_items_in_batch is not None else n_valid.clamp(min=1.0)
        with torch.no_grad():
            p = torch.softmax(student.float(), -1)
            entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
        return total / denominator, (entropy * mask).sum(), n_valid


def distillation_config(method: str, output_dir: str | Path, *, steps: int, batch: int, lr: float, max_new: int, seed: int):
    """The ``trl.DistillationConfig`` of an on-policy method: the student's prefixes sampled at
    temperature 1 (OPD, no top-k / top-p) or greedy (NAIL); the teacher's temperature lives in the
    :class:`~shiftbounds.distill.gsm8k.NoisyTeacher`, not here."""
    if method not in ON_POLICY:
        raise ValueError(f"method must be one of {ON_POLICY}; got {method!r}")
    return DistillationConfig(output_dir=str(output_dir), max_steps=steps, per_device_train_batch_size=batch, learning_rate=lr,
                              max_completion_length=max_new, temperature=1.0, top_k=0, top_p=1.0,
                              generation_kwargs={"do_sample": False} if method.startswith("nail") else None, seed=seed,
                              data_seed=seed, report_to=[], logging_steps=max(steps // 10, 1), save_strategy="no",
                              bf16=False, fp16=False, gradient_checkpointing=False, disable_tqdm=True,
                              dataloader_num_workers=0, use_cpu=resolve_device().type == "cpu")


def on_policy_trainer(method: str, student: str | Path, teacher: str | Path, problems: list[Problem], noise: NoisyTeacher,
                      output_dir: str | Path, *, steps: int, batch: int, lr: float, max_new: int, seed: int):
    """The configured (untrained) :class:`NoisyTeacherDistillationTrainer` of an on-policy method,
    student and teacher given as model folders or Hub ids (they must share a tokenizer); both count
    positions from the attention mask
    (:func:`~shiftbounds.conversations.models.count_positions_from_mask`), as prompts are left-padded."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    _, tok = load_chat_model(student)
    tok.padding_side = "left"
    trainer = NoisyTeacherDistillationTrainer(model=str(student), teacher_model=str(teacher), method=method, noise=noise,
                  args=distillation_config(method, output_dir, steps=steps, batch=batch, lr=lr, max_new=max_new, seed=seed),
                  train_dataset=Dataset.from_list([{"prompt": prompt_messages(p)} for p in problems]), processing_class=tok)
    return attach_progress(trainer_counts_positions_from_mask(trainer, "model", "teacher_model"), method)


def bc_examples(teacher, tokenizer: PreTrainedTokenizerBase, problems: list[Problem], noise: NoisyTeacher, *, visits: int, max_new: int,
                generator: torch.Generator, batch: int = 64) -> list[dict]:
    """Prompt-completion examples for LogLossBC: ``ceil(visits / len(problems))`` noisy-teacher
    samples per problem, so that ``visits`` prompt visits (steps x batch) each see a fresh sample."""
    per = max(1, math.ceil(visits / len(problems)))
    pool = [p for _ in range(per) for p in problems]
    out = []
    for j in range(0, len(pool), batch):
        chunk = pool[j: j + batch]
        for p, c in zip(chunk, sample_completions(teacher, tokenizer, chunk, max_new, temperature=1.0, teacher_noise=noise,
                                                  generator=generator)):
            text = tokenizer.decode([t for t in c if t != tokenizer.eos_token_id], skip_special_tokens=True)
            out.append({"prompt": prompt_messages(p), "completion": [{"role": "assistant", "content": text}]})
    return out
