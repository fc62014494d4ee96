"""Runs that can be trusted: a folder made under other settings is refused, a run killed with
SIGKILL mid-RL and resumed writes exactly what an uninterrupted run writes, and ``config.json``
records the environment and reruns the run through ``--config``."""

from __future__ import annotations

import filecmp
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from experiments import full_pipeline
from shiftbounds.utils.configs import build
from shiftbounds.utils.io import StaleFolderError

# one worker: a SIGKILL of the main process would leave spawned workers finishing their stage
ARGS = ["--preset", "smoke", "--tasks", "guess_number", "--rl-steps", "40", "--eval-every", "10", "--workers", "1"]


def _cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "experiments.full_pipeline", *ARGS, "--out-dir", str(out), *extra]


def test_other_settings_are_refused_naming_each(tmp_path):
    out = tmp_path / "run"
    full_pipeline.main(["--preset", "smoke", "--tasks", "guess_number", "--seeds", "2", "--rl-steps", "4",
                        "--eval-every", "2", "--out-dir", str(out)])
    with pytest.raises(SystemExit, match="rl_steps: saved 4, now 3.*sft_steps: saved 30, now 2"):
        full_pipeline.main(["--preset", "smoke", "--tasks", "guess_number", "--seeds", "2", "--rl-steps", "3",
                            "--sft-steps", "2", "--eval-every", "2", "--out-dir", str(out)])
    cfg = full_pipeline.PRESETS["smoke"] | {"tasks": ("guess_number",), "rl_steps": 3, "eval_every": 2, "out_dir": str(out)}
    with pytest.raises(StaleFolderError, match="rl_steps"):
        full_pipeline.run(build(full_pipeline.PipelineConfig, cfg))
    # the output folder itself is not a setting that changes results: a copy may be reopened elsewhere
    record = json.loads((out / "config.json").read_text())
    assert record["config"]["rl_steps"] == 4
    env = record["environment"]
    for key in ("shiftbounds", "git_commit", "torch", "transformers", "torch_threads", "cuda_available", "python"):
        assert key in env, key
    assert env["torch"] == torch.__version__


def _files(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*")
                  if p.is_file() and not any(part.startswith("timings") for part in p.relative_to(folder).parts))


def _assert_same_files(ref: Path, out: Path, what: str) -> None:
    """Every file but timings the same: bytes, or tensors for torch files (whose serialisation id is random)."""
    assert _files(ref) == _files(out)
    for rel in _files(ref):
        if rel.suffix in (".pt", ".ckpt"):
            a, b = (torch.load(d / rel, weights_only=True) for d in (ref, out))
            sa = a["state"] if "state" in a else a["agent"]
            sb = b["state"] if "state" in b else b["agent"]
            assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa), rel
        else:
            assert filecmp.cmp(ref / rel, out / rel, shallow=False), f"{rel} differs {what}"


@pytest.mark.slow
def test_sigkill_mid_rl_then_resume_equals_uninterrupted(tmp_path):
    out = tmp_path / "run"
    subprocess.run(_cmd(out), check=True, capture_output=True, timeout=600)
    ref = tmp_path / "reference"
    out.rename(ref)
    kills = 0
    for _ in range(8):
        proc = subprocess.Popen(_cmd(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        before = set(out.glob("*/seed*/rl_*.ckpt")) if out.exists() else set()
        while proc.poll() is None:
            if kills < 3 and set(out.glob("*/seed*/rl_*.ckpt")) - before:
                time.sleep(0.2)  # a little further into RL, past the checkpoint
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                break
            time.sleep(0.02)
        if proc.returncode == 0:
            break
    assert kills == 3 and proc.returncode == 0
    _assert_same_files(ref, out, "after kill and resume")


def test_one_worker_and_two_workers_write_the_same_bytes(tmp_path):
    """GIVEN the smoke preset (two tasks x two seeds: four independent (task, seed) stages) WHEN it
    runs on one worker and, in the same folder afresh, on two spawned workers THEN the recorded
    worker counts differ and every other file is the same."""
    out = tmp_path / "run"
    args = ["--preset", "smoke", "--rl-steps", "6", "--eval-every", "3", "--out-dir", str(out)]
    full_pipeline.main([*args, "--workers", "1"])
    ref = tmp_path / "reference"
    out.rename(ref)
    full_pipeline.main([*args, "--workers", "2"])
    counts = [json.loads((d / "timings.json").read_text())["this_call"]["workers"] for d in (ref, out)]
    assert counts == [1, 2]
    assert len(list(out.glob("*/seed*/measures.json"))) == 4
    _assert_same_files(ref, out, "between one and two workers")


def test_config_json_reruns_the_run(tmp_path):
    out = tmp_path / "run"
    first = full_pipeline.main(["--preset", "smoke", "--tasks", "booking", "--rl-steps", "2", "--eval-every", "1",
                                "--out-dir", str(out)])
    again = full_pipeline.main(["--config", str(out / "config.json"), "--out-dir", str(tmp_path / "rerun")])
    assert again["config"]["rl_steps"] == 2 and tuple(again["config"]["tasks"]) == ("booking",)
    assert again["main"] == first["main"] and again["paired"] == first["paired"]


@pytest.mark.slow
def test_ray_executor_writes_the_local_workers_bytes_and_resumes(tmp_path):
    """GIVEN the smoke preset WHEN its (task, seed) jobs run as Ray tasks on a local Ray started here
    (num_cpus=2) THEN every file equals the local workers' run, and a second call on the same
    folder (a resume with every stage saved) changes nothing."""
    ray = pytest.importorskip("ray", reason="ray is in the test extra; install shiftbounds[dev]")
    from shiftbounds.utils import workers

    out = tmp_path / "run"
    args = ["--preset", "smoke", "--rl-steps", "6", "--eval-every", "3", "--out-dir", str(out)]
    full_pipeline.main([*args, "--workers", "1"])
    out.rename(tmp_path / "local")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        full_pipeline.main([*args, "--executor", "ray"])
        _assert_same_files(tmp_path / "local", out, "between Ray tasks and local workers")
        before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and "timings" not in p.name}
        full_pipeline.main([*args, "--executor", "ray"])
        assert {p: p.read_bytes() for p in before} == before
    finally:
        ray.shutdown()
        workers.set_executor("local")


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc (Linux)")
def test_workers_exit_when_the_main_job_is_killed(tmp_path):
    """GIVEN the main job on two spawned workers WHEN it is killed with SIGKILL THEN its workers exit
    by themselves within a few seconds (they used to finish their stages as orphans)."""
    proc = subprocess.Popen([sys.executable, "-m", "experiments.full_pipeline", "--preset", "smoke", "--rl-steps", "400",
                             "--workers", "2", "--out-dir", str(tmp_path / "run")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    kids: list[int] = []
    while time.time() < deadline and len(kids) < 2:
        time.sleep(0.5)
        kids = [k for k in _children(proc.pid) if "spawn_main" in Path(f"/proc/{k}/cmdline").read_text(errors="ignore")]
    assert len(kids) >= 2, "the workers did not start"
    time.sleep(3)  # into their jobs
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 20
    while time.time() < deadline and any(Path(f"/proc/{k}").exists() for k in kids):
        time.sleep(0.5)
    alive = [k for k in kids if Path(f"/proc/{k}").exists() and "Z" not in Path(f"/proc/{k}/stat").read_text().rsplit(")", 1)[1][:3]]
    assert not alive, f"workers {alive} outlived the killed main job"
