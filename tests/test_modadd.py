"""Modular addition: data, teacher laws, the students' losses and the entry point's smoke preset."""

from __future__ import annotations

import math

import pytest
import torch

from experiments import modadd as exp
from shiftbounds.modadd import (
    ModAddTask,
    StudentConfig,
    consistent_targets,
    noisy_teacher_log_probs,
    prefix_has_error,
    running_sums,
    sample_prompts,
    student_step_loss,
    with_chain,
)
from shiftbounds.nn.transformer import Transformer


def test_running_sums_and_consistent_targets():
    task = ModAddTask(p=5, m=4)
    prompts = torch.tensor([[1, 2, 3, 4]])
    torch.testing.assert_close(running_sums(task, prompts), torch.tensor([[1, 3, 1, 0]]))
    wrong_chain = torch.tensor([[1, 4, 2, 1]])  # error at step 2
    seqs = with_chain(task, prompts, wrong_chain)
    torch.testing.assert_close(consistent_targets(task, seqs), torch.tensor([[1, 3, 2, 1]]))
    torch.testing.assert_close(prefix_has_error(task, seqs), torch.tensor([[False, False, True, True]]))


def test_noisy_teacher_laws():
    task = ModAddTask(p=5, m=3)
    seqs = with_chain(task, torch.tensor([[1, 1, 1]]), torch.tensor([[1, 3, 4]]))  # error at step 2
    clean = torch.log(torch.full((1, 3, 5), 1e-9)).clone()
    clean[..., 0] = 0.0
    clean = torch.log_softmax(clean, -1)
    mix = noisy_teacher_log_probs(task, clean, seqs, 0.2, "mixture").exp()
    torch.testing.assert_close(mix[0, :, 0], torch.full((3,), 0.8 + 0.2 / 5), atol=1e-6, rtol=0)
    ab = noisy_teacher_log_probs(task, clean, seqs, 0.2, "absorbing").exp()
    torch.testing.assert_close(ab[0, 2], torch.full((5,), 0.2), atol=1e-6, rtol=0)  # after the error: uniform
    torch.testing.assert_close(ab[0, :2], mix[0, :2])
    with pytest.raises(ValueError, match="law must be one of"):
        noisy_teacher_log_probs(task, clean, seqs, 0.2, "sticky")


@pytest.mark.parametrize("method", ["bc", "opd-F", "opd-R", "nail-F", "nail-R", "nail-Mixed"])
def test_every_method_gives_a_finite_differentiable_loss(method):
    task = ModAddTask(p=5, m=3)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    teacher, student = Transformer(task.model_config(16, 1)), Transformer(task.model_config(16, 1))
    loss = student_step_loss(task, StudentConfig(method=method, eta=0.1, law="absorbing", noised_student=method != "bc"),
                             student, teacher, sample_prompts(task, 8, g), g)
    assert math.isfinite(loss.item())
    loss.backward()
    assert all(p.grad is not None for p in student.parameters() if p.requires_grad)


def test_student_config_validation():
    with pytest.raises(ValueError, match="method must be one of"):
        StudentConfig(method="rlhf")
    with pytest.raises(ValueError, match="eta must lie in"):
        StudentConfig(eta=1.0)


def test_smoke_entry_point_runs_and_resumes(tmp_path, capsys):
    out = tmp_path / "ma"
    res = exp.main(["--preset", "smoke", "--out-dir", str(out)])
    assert {r["method"] for r in res["rows"]} == {"bc", "nail-F"}
    for name in ("results.md", "runs.csv", "results.json", "modadd.png", "modadd.pdf"):
        assert (out / name).exists()
    assert res["teacher_accuracy"] > 0.15  # 60 steps only: above chance (1/7), not near-perfect
    again = exp.run(exp.parse_config(exp.ModAddConfig, "", exp.PRESETS, ["--preset", "smoke", "--out-dir", str(out)], name="experiments.modadd"))
    assert again["rows"] == res["rows"]  # every run resumed from disk
    with pytest.raises(SystemExit):
        exp.main(["--law", "sticky"])
