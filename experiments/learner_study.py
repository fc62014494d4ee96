"""Where the main job's learner stops: each tried RL configuration as a full main-job run on
development seeds, and each arm's gap to the exact optimum of its own objective (issue 49).

``python -m experiments.learner_study [--preset smoke|default] [options]``

Every configuration of ``--variants`` (named in ``shiftbounds.dialogue.neural.learner.VARIANTS``:
the KL weight, learning rate, entropy bonus, per-turn returns-to-go, normalised advantages, group
size, steps) is ``experiments.full_pipeline`` with those settings under ``<out-dir>/<variant>/``
(resumable; a folder made under other settings is refused), on development seeds (``--seed 7``:
no shipped main-job run uses it). Per configuration, task and arm: ``J_real``, and for the arms
whose objective has an exact optimum (interactive, oracle, static_myopic) the per-seed gap
``optimum - objective``: mean, median, largest, and whether the median is within 0.03; and, from
the saved agents, that gap computed exactly and split into the cost of the KL regularisation and
the optimisation error (the exact optimum of the KL-regularised objective on the tree of every
history, ``shiftbounds.dialogue.neural.soft_optimum``).

Writes ``learner.csv``, ``best.csv``, ``split.csv`` (per configuration, task and arm),
``split_seeds.csv`` (per seed), ``learner.md``, ``results.json``, ``learner.{png,pdf}`` and
``split.{png,pdf}`` under ``--out-dir``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from experiments import full_pipeline
from shiftbounds.dialogue.exact.references import exact_references
from shiftbounds.dialogue.neural.learner import SPLIT_PARTS, VARIANTS, best_rows, exact_split, split_summary, variant_rows
from shiftbounds.dialogue.neural.pipeline import PipelineConfig
from shiftbounds.figures import plot_gap_split, plot_learner_gaps
from shiftbounds.main_job import run as run_main_job
from shiftbounds.main_job import view
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.configs import build, override
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json


@dataclass(frozen=True)
class LearnerStudyConfig:
    """Options of ``experiments.learner_study`` (each is a command-line flag)."""

    variants: tuple[str, ...] = field(default=tuple(VARIANTS), metadata={"help": f"RL configurations to run, from {list(VARIANTS)} (each in its own guarded folder)", "resume": False})
    seeds: int = field(default=3, metadata={"help": "development seeds per task and configuration"})
    seed: int = field(default=7, metadata={"help": "the root seed (7: no shipped main-job run uses it)"})
    pipeline_preset: str = field(default="default", metadata={"help": "the full_pipeline preset each configuration modifies"})
    workers: int = field(default=0, metadata={"help": "(task, seed) runs at once (0 = every core); results do not depend on it", "resume": False})
    out_dir: str = field(default="results/development/learner", metadata={"help": "results folder", "resume": False})

    def __post_init__(self) -> None:
        bad = [v for v in self.variants if v not in VARIANTS]
        if bad or not self.variants:
            raise ValueError(f"--variants must name configurations from {list(VARIANTS)}; got unknown {bad}")
        if self.pipeline_preset not in full_pipeline.PRESETS:
            raise ValueError(f"--pipeline-preset must be one of {sorted(full_pipeline.PRESETS)}; got {self.pipeline_preset!r}")
        if self.seeds < 2:
            raise ValueError(f"--seeds must be >= 2; got {self.seeds}")


PRESETS = {"default": {"out_dir": "results/development/learner"}, "smoke": {"variants": ("today", "togo"), "seeds": 2, "pipeline_preset": "smoke"}}


def pipeline_config(cfg: LearnerStudyConfig, variant: str) -> PipelineConfig:
    """The main job's settings of one configuration."""
    base = build(PipelineConfig, full_pipeline.PRESETS[cfg.pipeline_preset])
    return override(base, **VARIANTS[variant], seeds=cfg.seeds, seed=cfg.seed, workers=cfg.workers,
                   out_dir=str(Path(cfg.out_dir) / variant))


def run(cfg: LearnerStudyConfig) -> dict:
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    rows, optimum, split, split_seeds = [], {}, [], []
    for variant in cfg.variants:
        pc = pipeline_config(cfg, variant)
        results = run_main_job(pc)
        for task in pc.tasks:
            optimum.setdefault(task, exact_references(*view(pc, task, pc.horizon))["objective_optimum"])
        rows += variant_rows(variant, pc, results, optimum)
        seeds = [{"variant": variant, **r} for task in pc.tasks for k in range(pc.seeds) for r in exact_split(pc, task, k)]
        split_seeds += seeds
        split += split_summary(variant, seeds)
    best = best_rows(rows)
    results = {"config": asdict(cfg), "variants": {v: VARIANTS[v] for v in cfg.variants}, "optimum": optimum, "rows": rows, "best": best,
               "split": split, "split_seeds": split_seeds}
    write_json(out / "results.json", results)
    write_csv(out / "learner.csv", rows)
    write_csv(out / "best.csv", best)
    write_csv(out / "split.csv", split)
    write_csv(out / "split_seeds.csv", split_seeds)
    cols = ["variant", "task", "arm", "budget", "J_real", "gap_mean", "gap_median", "gap_max", "within_target"]
    split_cols = ["variant", "task", "arm", "beta", "optimum", "soft_optimum", *(f"{p}_median" for p in SPLIT_PARTS)]
    atomic_write_text(out / "learner.md", "# Where the learner stops (development seeds)\n\n"
                      + "## Smallest median gap per task and arm\n\n" + markdown_table(best, cols)
                      + "\n## Every configuration\n\n" + markdown_table(rows, cols)
                      + "\n## The gap split exactly (medians over seeds)\n\nEach learned agent's objective computed exactly on the tree of "
                        "every history; `soft_optimum`: the objective of the optimum of the KL-regularised objective at the run's KL "
                        "weight `beta`; `regularisation_cost` = `optimum - soft_optimum`, `optimisation_error` = `soft_optimum - learned`.\n\n"
                      + markdown_table(split, split_cols))
    plot_learner_gaps(results, out / "learner")
    plot_gap_split(results, out / "split")
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(LearnerStudyConfig, __doc__, PRESETS, argv, name="experiments.learner_study")
    results = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "learner.md").read_text())
    return results


if __name__ == "__main__":
    main()
