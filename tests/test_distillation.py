"""Noisy-teacher students on TRL: NAIL's prefixes are greedy and OPD's sampled, the teacher's noise
law is the configured one, BC sees fresh teacher samples, and a student trains."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shiftbounds.conversations.models import build_tiny_chat_model, load_chat_model
from shiftbounds.conversations.sampling import sample_batch
from shiftbounds.distill.gsm8k import NoisyTeacher, Problem, on_policy_loss
from shiftbounds.distill.trainers import bc_examples, on_policy_trainer
from tests.padding import assert_left_padding_is_invisible

PROBLEMS = [Problem(f"Tom has {i} apples and buys {i + 2} more. How many?", f"{i} + {i + 2} = {2 * i + 2}\n#### {2 * i + 2}",
                    str(2 * i + 2)) for i in range(8)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    texts = [p.question for p in PROBLEMS] + [p.answer for p in PROBLEMS]
    student = build_tiny_chat_model(tmp_path_factory.mktemp("s"), texts, vocab_size=300, d_model=32, n_layer=1, seed=0)
    teacher = build_tiny_chat_model(tmp_path_factory.mktemp("t"), texts, vocab_size=300, d_model=32, n_layer=1, seed=1)
    return student, teacher


def _run_one_step(method, student, teacher, tmp_path, noise=NoisyTeacher(1.0, 0.0)):
    trainer = on_policy_trainer(method, student, teacher, PROBLEMS, noise, tmp_path, steps=1, batch=4, lr=1e-3, max_new=8,
                                seed=0)
    seen = []
    inner = trainer._generate_single_turn

    def record(prompt_ids, *args, **kw):
        out = inner(prompt_ids, *args, **kw)
        seen.append(([list(p) for p in prompt_ids], out))
        return out

    trainer._generate_single_turn = record
    trainer.train()
    return trainer, seen


@pytest.mark.parametrize("method, greedy", [("nail-F", True), ("opd-F", False)])
def test_nail_prefixes_are_greedy_and_opd_prefixes_sampled(models, tmp_path, method, greedy):
    student, teacher = models
    model, tok = load_chat_model(student)  # the student before its update: the one that generated
    _, seen = _run_one_step(method, student, teacher, tmp_path)
    (prompts, completions), = seen
    greedy_rows = sample_batch(model, prompts, 8, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, temperature=0.0)
    same = [list(c) == g for c, g in zip(completions, greedy_rows)]
    assert all(same) if greedy else not all(same)


def test_the_teacher_noise_law_is_the_configured_one():
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(2, 3, 11, generator=g), torch.randn(2, 3, 11, generator=g)
    mask = torch.ones(2, 3)
    noise = NoisyTeacher(temperature=4.0, eta=0.2)
    law = 0.8 * torch.softmax(t / 4.0, -1) + 0.2 / 11
    torch.testing.assert_close(noise.log_probs(t).exp(), law)
    forward = (law * (law.log() - torch.log_softmax(s, -1))).sum(-1).mean()  # OPD-F: the plain student
    torch.testing.assert_close(on_policy_loss("opd-F", s, t, noise, mask), forward)
    noised_student = 0.8 * torch.softmax(s, -1) + 0.2 / 11  # NAIL-F: the noised student
    torch.testing.assert_close(on_policy_loss("nail-F", s, t, noise, mask), (law * (law.log() - noised_student.log())).sum(-1).mean())
    with pytest.raises(ValueError, match="on-policy"):
        on_policy_loss("bc", s, t, noise, mask)


def test_trainer_loss_is_zero_at_the_teacher_and_follows_its_noise(models, tmp_path):
    """A student equal to its (noiseless) teacher has zero forward KL inside the trainer; the same
    teacher at temperature 4 does not."""
    student, _ = models
    trainer, _ = _run_one_step("opd-F", student, student, tmp_path / "a")
    assert [h["loss"] for h in trainer.state.log_history if "loss" in h] == [0.0]
    hot, _ = _run_one_step("opd-F", student, student, tmp_path / "b", NoisyTeacher(4.0, 0.0))
    assert [h["loss"] for h in hot.state.log_history if "loss" in h][0] > 0.0


def test_bc_sees_a_fresh_teacher_sample_per_visit(models):
    _, teacher = models
    model, tok = load_chat_model(teacher)
    ex = bc_examples(model, tok, PROBLEMS, NoisyTeacher(1.0, 0.2), visits=20, max_new=6, generator=torch.Generator().manual_seed(0))
    assert len(ex) == 24 and ex[0]["prompt"] == ex[8]["prompt"]  # 3 samples per problem
    assert len({e["completion"][0]["content"] for e in ex}) > 12
    assert np.mean([len(e["completion"][0]["content"]) > 0 for e in ex]) > 0.5


def test_student_and_teacher_score_a_left_padded_prompt_as_the_prompt_alone(models, tmp_path):
    """The distillation trainer left-pads prompts; the student and the teacher count positions from
    the mask, so the loss compares the two on the sequences that were sampled."""
    student, teacher = models
    trainer = on_policy_trainer("opd-F", student, teacher, PROBLEMS, NoisyTeacher(1.0, 0.0), tmp_path, steps=1, batch=4,
                                lr=1e-3, max_new=8, seed=0)
    assert_left_padding_is_invisible((trainer.model, trainer.teacher_model), load_chat_model(student)[0], vocab=300)
