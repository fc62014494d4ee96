"""Regenerate every figure (PNG + PDF) from saved experiment results.

``python -m paper_figures [--preset smoke|default] [--results-dir results] [--out-dir DIR] [--only NAME ...] [--run-missing]``

Each figure is drawn from its experiment's ``results.json`` under
``<results-dir>/<experiment>/<preset>/`` (under ``--preset default``, ``real_dialogue``: its ``cpu``
preset, and ``real_dialogue_paper``: its ``paper_requests`` preset, the paradigms compared). A missing results file is reported with the command that makes it, and the
group is skipped; ``--run-missing`` runs those commands first (one after the other). The list of
figures, what each shows and the command behind it is in ``paper_figures/README.md``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from shiftbounds import figures as F
from shiftbounds.figures.text import (
    plot_paired_differences,
    plot_paradigm_success,
    plot_text_realism,
    plot_text_sycophancy,
    plot_training_curves,
)
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.io import read_json


def _bound_check(r: dict, out: Path) -> list[Path]:
    return F.plot_bound_check(r, out / "fig_bound_check")


def _dialogue(r: dict, out: Path) -> list[Path]:
    return (F.plot_regime_per_turn(r, out / "fig_dialogue_per_turn") + F.plot_regime_map(r, out / "fig_dialogue_regime_map")
            + F.plot_regime_user_models(r, out / "fig_dialogue_user_models"))


def _noisy_expert(r: dict, out: Path) -> list[Path]:
    return F.plot_noisy_expert(r, out / "fig_noisy_expert")


def _modadd(r: dict, out: Path) -> list[Path]:
    return F.plot_modadd(r, out / "fig_modadd")


def _full_pipeline(r: dict, out: Path) -> list[Path]:
    return (F.plot_pipeline_curves(r, out / "fig_pipeline_learning_curves") + F.plot_pipeline_shifts(r, out / "fig_pipeline_shifts")
            + F.plot_pipeline_user_models(r, out / "fig_pipeline_user_models"))


def _real_dialogue(r: dict, out: Path) -> list[Path]:
    return (plot_text_realism(r, out / "fig_real_realism_by_turn") + plot_text_sycophancy(r, out / "fig_real_sycophancy")
            + plot_paradigm_success(r, out / "fig_real_paradigms") + plot_paired_differences(r, out / "fig_real_paired")
            + (plot_training_curves(r, out / "fig_real_training_curves") if r.get("training_curves") else []))


def _real_dialogue_paper(r: dict, out: Path) -> list[Path]:
    return (plot_paradigm_success(r, out / "fig_real_paper_paradigms") + plot_paired_differences(r, out / "fig_real_paper_paired")
            + plot_training_curves(r, out / "fig_real_paper_training_curves"))


# group -> (experiment whose results it draws, the drawing function)
FIGURES: dict[str, tuple[str, Callable[[dict, Path], list[Path]]]] = {
    "bound_check": ("bound_check", _bound_check),
    "dialogue": ("dialogue_regimes", _dialogue),
    "noisy_expert": ("noisy_expert", _noisy_expert),
    "modadd": ("modadd", _modadd),
    "full_pipeline": ("full_pipeline", _full_pipeline),
    "real_dialogue": ("real_dialogue", _real_dialogue),
    "real_dialogue_paper": ("real_dialogue", _real_dialogue_paper),
}
MAIN_PRESET = {"real_dialogue": "cpu", "real_dialogue_paper": "paper_requests", "modadd": "cpu"}
"""The preset whose results a figure group draws from, where it is not its experiment's ``default``."""


@dataclass(frozen=True)
class FiguresConfig:
    """Options of ``python -m paper_figures``."""

    results_dir: str = field(default="results", metadata={"help": "folder holding results/<experiment>/<preset>/"})
    only: tuple[str, ...] = field(default=tuple(FIGURES), metadata={"help": f"figure groups, from {tuple(FIGURES)}"})
    run_missing: bool = field(default=False, metadata={"help": "run the experiments whose results are missing (may take long)"})
    experiment_preset: str = field(default="", metadata={"help": "draw every group from this preset of its experiment (default: each experiment's main preset)"})
    seed: int = field(default=0, metadata={"help": "seed passed to experiments run by --run-missing"})
    out_dir: str = field(default="paper_figures/out", metadata={"help": "folder for the figures"})

    def __post_init__(self) -> None:
        bad = [g for g in self.only if g not in FIGURES]
        if bad or not self.only:
            raise ValueError(f"--only must name groups from {tuple(FIGURES)}; got unknown {bad}")


PRESETS = {"default": {}, "smoke": {"experiment_preset": "smoke", "out_dir": "paper_figures/out_smoke"}}


def results_folder(cfg: FiguresConfig, group: str) -> tuple[Path, str]:
    """The results folder a figure group draws from, and the preset that makes it."""
    preset = cfg.experiment_preset or MAIN_PRESET.get(group, "default")
    return Path(cfg.results_dir) / FIGURES[group][0] / preset, preset


def main(argv: list[str] | None = None) -> list[Path]:
    cfg = parse_config(FiguresConfig, __doc__, PRESETS, argv, name="paper_figures")
    written, missing = [], []
    for name in cfg.only:
        experiment, draw = FIGURES[name]
        folder, preset = results_folder(cfg, name)
        cmd = [sys.executable, "-m", f"experiments.{experiment}", "--preset", preset, "--out-dir", str(folder),
               "--seed", str(cfg.seed)]
        if not (folder / "results.json").exists() and cfg.run_missing:
            subprocess.run(cmd, check=True)
        if not (folder / "results.json").exists():
            missing.append(f"python -m experiments.{experiment} --preset {preset} --out-dir {folder}")
            print(f"{name}: skipped, {folder / 'results.json'} is missing", file=sys.stderr)
            continue
        paths = draw(read_json(folder / "results.json"), Path(cfg.out_dir))
        written += paths
        print(f"{name}: " + ", ".join(str(x) for x in paths))
    if missing:
        print("make the missing results with (or pass --run-missing):\n  " + "\n  ".join(missing), file=sys.stderr)
    return written


if __name__ == "__main__":
    main()
