"""Where the variance of Calibrated - Interactive RL comes from: log draws, simulator fits, RL
seeds (issue 49, item 3).

``python -m experiments.variance_study [--preset smoke|default] [options]``

A nested design on one task of the main job (``shiftbounds.dialogue.neural.variance``):
``--draws`` independent log draws, ``--fits`` calibrated simulators per draw (each its own
initialisation and minibatch order) and ``--rl-seeds`` RL seeds per fit; Interactive RL once per
(draw, RL seed) against the prompted simulator, from the same SFT agent (each RL run draws its own).
Each unit is ``J_real(calibrated) - J_real(interactive)`` on the draw's common evaluation noise.
The balanced nested ANOVA's method of moments splits its variance into the three levels, with
percentile intervals from resampling the draws. The RL settings are the main job's
(``--pipeline-preset``); calibration is plain SFT (no realism tuning).

Writes ``units.csv``, ``components.csv``, ``variance.md``, ``results.json`` and
``variance.{png,pdf}`` under ``--out-dir``; every stage is saved under ``<task>/seed<draw>/`` and
skipped on a rerun; the draws run on ``--workers`` processes, one torch thread each, so the files
are the same bytes with any number of workers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from experiments import full_pipeline
from shiftbounds.dialogue.neural.pipeline import PipelineConfig
from shiftbounds.dialogue.neural.variance import draw_units, nested_array, variance_components
from shiftbounds.dialogue.tasks import TASKS
from shiftbounds.figures import plot_variance_components
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.configs import build
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import mean_ci
from shiftbounds.utils.workers import default_workers, run_jobs


@dataclass(frozen=True)
class VarianceConfig:
    """Options of ``experiments.variance_study`` (each is a command-line flag)."""

    task: str = field(default="guess_number", metadata={"help": f"the task, from {sorted(TASKS)}"})
    draws: int = field(default=6, metadata={"help": "independent log draws (the top level)"})
    fits: int = field(default=3, metadata={"help": "calibrated simulators fitted per draw"})
    rl_seeds: int = field(default=3, metadata={"help": "RL seeds per fit (Interactive RL: per draw)"})
    pipeline_preset: str = field(default="default", metadata={"help": "the full_pipeline preset whose settings every stage uses"})
    n_boot: int = field(default=2000, metadata={"help": "resamples of the draws for the intervals"})
    seed: int = field(default=20, metadata={"help": "the root seed (20: no other shipped run uses it)"})
    workers: int = field(default=0, metadata={"help": "draws at once, one process each (0 = every core); results do not depend on it", "resume": False})
    out_dir: str = field(default="results/variance_study/default", metadata={"help": "results folder", "resume": False})

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"--task must be one of {sorted(TASKS)}; got {self.task!r}")
        if min(self.draws, self.fits, self.rl_seeds) < 2:
            raise ValueError(f"--draws, --fits and --rl-seeds must each be >= 2; got {self.draws}, {self.fits}, {self.rl_seeds}")
        if self.pipeline_preset not in full_pipeline.PRESETS:
            raise ValueError(f"--pipeline-preset must be one of {sorted(full_pipeline.PRESETS)}; got {self.pipeline_preset!r}")


PRESETS = {"default": {}, "smoke": {"draws": 2, "fits": 2, "rl_seeds": 2, "pipeline_preset": "smoke", "n_boot": 200}}


def pipeline_config(cfg: VarianceConfig) -> PipelineConfig:
    """The main job's settings every stage uses (one task, no realism tuning, this run's seed and folder)."""
    base = build(PipelineConfig, full_pipeline.PRESETS[cfg.pipeline_preset])
    return replace(base, tasks=(cfg.task,), realism_steps=0, seed=cfg.seed, out_dir=cfg.out_dir)


def run(cfg: VarianceConfig) -> dict:
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    pc = pipeline_config(cfg)
    jobs = [(pc, cfg.task, i, cfg.fits, cfg.rl_seeds) for i in range(cfg.draws)]
    units = [u for draw in run_jobs(draw_units, jobs, cfg.workers or default_workers(), label="variance_study draws") for u in draw]
    y = nested_array(units)
    comps = variance_components(y, rng=numpy_rng(cfg.seed, "variance components"), n_boot=cfg.n_boot)
    e = mean_ci(y.reshape(-1))
    summary = {"task": cfg.task, "units": int(y.size), "mean": e.value, "total_variance": float(y.var(ddof=1))}
    results = {"config": asdict(cfg), "summary": summary, "components": comps, "units": units}
    write_json(out / "results.json", results)
    write_csv(out / "units.csv", units)
    write_csv(out / "components.csv", comps)
    atomic_write_text(out / "variance.md", f"# Calibrated - Interactive RL: where the variance lives ({cfg.task})\n\n"
                      f"{summary['units']} units; mean difference {e.value:.4f}; total variance {summary['total_variance']:.6f}.\n\n"
                      + markdown_table(comps))
    plot_variance_components(results, out / "variance")
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(VarianceConfig, __doc__, PRESETS, argv, name="experiments.variance_study")
    results = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "variance.md").read_text())
    return results


if __name__ == "__main__":
    main()
