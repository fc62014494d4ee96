"""GPU checks: the main job's smoke preset on CUDA agrees with the CPU run (tests marked ``gpu``
are skipped without a CUDA device), and ``scripts/gpu_check.sh`` runs end to end as a CPU dry run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments import full_pipeline as fp
from shiftbounds.utils.device import resolve_device

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_main_job_smoke_cpu_and_gpu_agree(tmp_path):
    args = ["--preset", "smoke", "--tasks", "guess_number", "--rl-steps", "6"]
    cpu = fp.main(args + ["--device", "cpu", "--out-dir", str(tmp_path / "cpu")])
    gpu = fp.main(args + ["--device", "cuda", "--out-dir", str(tmp_path / "gpu")])
    # the same draws (CPU generators) through different kernels: returns agree to a few percent of their range
    for a, b in zip(cpu["main"], gpu["main"]):
        assert a["paradigm"] == b["paradigm"]
        if "J_real" in a:
            assert abs(a["J_real"] - b["J_real"]) < 0.1, (a["paradigm"], a["J_real"], b["J_real"])


def test_device_cuda_without_a_gpu_names_the_option(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ValueError, match="--device cuda: no CUDA device"):
        resolve_device("cuda")


@pytest.mark.slow
def test_gpu_check_script_cpu_dry_run(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--device", "cpu"], check=True, cwd=ROOT, env=env,
                   capture_output=True, timeout=900)
    for name in ("environment.json", "full_pipeline/results.json", "modadd/results.json", "real_dialogue/goals.csv",
                 "smollm2_random/config.json", "benchmark_llm.txt", "gpu_check.log"):
        assert (tmp_path / "out" / name).exists(), name
    assert "random weights" in (tmp_path / "out" / "gpu_check.log").read_text()
