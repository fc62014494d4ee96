"""Seeds per minute of the main job: the previous configuration against today's, in one run.

``python -m benchmarks.pipeline [--preset smoke|default] [--seeds 2]``

Both rows run ``--seeds`` seeds of every task of ``experiments.full_pipeline`` (every stage, from
empty folders) on the same machine, one after the other:

* ``before`` — the configuration the main job shipped with until version 0.2: one process with two
  torch threads (``--threads 2``), 1,000 SFT, 200 discriminator and 1,000 RL steps, a learning-curve point every 100
  steps. Its stages run through today's code, whose final evaluation shares one draw of goals and
  user noise between the arms (one rollout per arm and user fewer than before), so this row is a
  little faster than the old job was;
* ``now`` — today's default: 500 SFT and 300 RL steps, 150 discriminator steps (the budget chosen from the old run's
  learning curves, docs/experiments.md), a curve point every 50 steps, and the (task, seed) runs in
  one spawned process per core, one torch thread each.

A seed covers every task. It writes seeds per minute and the ratio to ``results.md`` / ``results.json``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from benchmarks import write_report
from shiftbounds.dialogue.neural.pipeline import PipelineConfig, run_task_seed
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.configs import build, override
from shiftbounds.utils.workers import default_workers, run_jobs

BEFORE = {"sft_steps": 1000, "disc_steps": 200, "rl_steps": 1000, "eval_every": 100}


@dataclass(frozen=True)
class PipelineBenchConfig:
    """Options of ``benchmarks.pipeline``."""

    seeds: int = field(default=2, metadata={"help": "seeds timed per configuration (each covers every task)"})
    smoke: bool = field(default=False, metadata={"help": "tiny budgets for both rows (the tests)"})
    seed: int = field(default=0, metadata={"help": "seed of the runs"})
    out_dir: str = field(default="results/benchmarks/pipeline/default", metadata={"help": "results folder"})

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise ValueError(f"--seeds must be >= 1; got {self.seeds}")


PRESETS = {"default": {}, "smoke": {"seeds": 1, "smoke": True}}
SMOKE = {"n_logs": 80, "sft_steps": 20, "disc_steps": 5, "realism_steps": 5, "rl_steps": 6, "eval_every": 3,
         "n_eval": 100, "n_curve": 50, "horizon": 3, "d_model": 32, "n_layer": 1}


def _time_before(cfg: PipelineConfig, seeds: int) -> float:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        t0 = time.perf_counter()
        for task in cfg.tasks:
            for k in range(seeds):
                run_task_seed(cfg, task, k)
        return time.perf_counter() - t0
    finally:
        torch.set_num_threads(before)


def _time_now(cfg: PipelineConfig, seeds: int, workers: int) -> float:
    t0 = time.perf_counter()
    run_jobs(run_task_seed, [(cfg, task, k) for task in cfg.tasks for k in range(seeds)], workers, label="now")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    a = parse_config(PipelineBenchConfig, __doc__, PRESETS, argv, name="benchmarks.pipeline")
    scratch = Path(tempfile.mkdtemp(prefix="bench_pipeline_"))
    try:
        base = build(PipelineConfig, {"seed": a.seed, "seeds": max(2, a.seeds), **(SMOKE if a.smoke else {})})
        before = override(base, **({k: min(v, SMOKE[k]) for k, v in BEFORE.items()} if a.smoke else BEFORE),
                         out_dir=str(scratch / "before"))
        now = replace(base, out_dir=str(scratch / "now"))
        workers = default_workers()
        seconds = {"before (1 process, 2 threads, 1000 SFT + 1000 RL steps)": _time_before(before, a.seeds),
                   f"now ({workers} processes x 1 thread, 500 SFT + 300 RL steps)": _time_now(now, a.seeds, workers)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    first = next(iter(seconds.values()))
    rows = [{"configuration": name, "seconds": sec, "seeds_per_minute": a.seeds / (sec / 60), "ratio_to_before": first / sec}
            for name, sec in seconds.items()]
    notes = (f"{a.seeds} seed(s) x {len(base.tasks)} tasks per row, from empty folders, on {workers} cores. "
             "`ratio_to_before`: seeds per minute relative to the first row.")
    return write_report(a.out_dir, asdict(a), "benchmarks.pipeline: seeds per minute of the main job", rows, notes)


if __name__ == "__main__":
    main()
