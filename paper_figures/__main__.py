"""Regenerate every figure (PNG + PDF) from saved experiment results.

``python -m paper_figures [--results results] [--out paper_figures/out] [--only NAME ...]``

Each figure is drawn from its experiment's ``results.json``; when that file is missing, the
experiment is run first with its default preset (``real_dialogue``: ``--preset cpu``; ``--preset
smoke`` with ``--smoke``). The list of
figures, what each shows and the command behind it is in ``paper_figures/README.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from shiftbounds.utils.io import read_json


def _bound_check(results: Path, out: Path, smoke: bool) -> list[Path]:
    from experiments import bound_check

    folder = results / ("bound_check_smoke" if smoke else "bound_check")
    if not (folder / "results.json").exists():
        bound_check.main(["--out-dir", str(folder)] + (["--preset", "smoke"] if smoke else []))
    return bound_check.plot(read_json(folder / "results.json"), out / "fig_bound_check")


def _dialogue(results: Path, out: Path, smoke: bool) -> list[Path]:
    from experiments import dialogue_regimes
    from shiftbounds.dialogue.plots import plot_per_turn, plot_regime_map, plot_sycophancy

    folder = results / ("dialogue_regimes_smoke" if smoke else "dialogue_regimes")
    if not (folder / "results.json").exists():
        dialogue_regimes.main(["--out-dir", str(folder)] + (["--preset", "smoke"] if smoke else []))
    r = read_json(folder / "results.json")
    return (plot_per_turn(r, out / "fig_dialogue_per_turn") + plot_regime_map(r, out / "fig_dialogue_regime_map")
            + plot_sycophancy(r, out / "fig_dialogue_sycophancy"))


def _noisy_expert(results: Path, out: Path, smoke: bool) -> list[Path]:
    from experiments import noisy_expert

    folder = results / ("noisy_expert_smoke" if smoke else "noisy_expert")
    if not (folder / "results.json").exists():
        noisy_expert.main(["--out-dir", str(folder)] + (["--preset", "smoke"] if smoke else []))
    return noisy_expert.plot(read_json(folder / "results.json"), out / "fig_noisy_expert")


def _modadd(results: Path, out: Path, smoke: bool) -> list[Path]:
    from experiments import modadd

    folder = results / ("modadd_smoke" if smoke else "modadd")
    if not (folder / "results.json").exists():
        modadd.main(["--out-dir", str(folder)] + (["--preset", "smoke"] if smoke else []))
    return modadd.plot(read_json(folder / "results.json"), out / "fig_modadd")


def _full_pipeline(results: Path, out: Path, smoke: bool) -> list[Path]:
    from experiments import full_pipeline as fp

    folder = results / "full_pipeline" / ("smoke" if smoke else "default")
    if not (folder / "results.json").exists():
        fp.main(["--out-dir", str(folder)] + (["--preset", "smoke"] if smoke else []))
    r = read_json(folder / "results.json")
    cfg = fp.PipelineConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in r["config"].items()})
    _, per_turn, curves, sims = fp.summarise(cfg, r["runs"])
    return (fp.plot_curves(curves, cfg, out / "fig_pipeline_learning_curves") + fp.plot_shifts(per_turn, cfg, out / "fig_pipeline_shifts")
            + fp.plot_sycophancy(sims, cfg, out / "fig_pipeline_sycophancy"))


def _real_dialogue(results: Path, out: Path, smoke: bool) -> list[Path]:
    from experiments import real_dialogue as rd

    folder = results / "real_dialogue" / ("smoke" if smoke else "cpu")
    if not (folder / "results.json").exists():
        rd.main(["--out-dir", str(folder), "--preset", "smoke" if smoke else "cpu"])
    r = read_json(folder / "results.json")
    return rd.plot_realism(r, out / "fig_real_realism_by_turn") + rd.plot_sycophancy(r, out / "fig_real_sycophancy")


FIGURES: dict[str, Callable[[Path, Path, bool], list[Path]]] = {
    "bound_check": _bound_check,
    "dialogue": _dialogue,
    "noisy_expert": _noisy_expert,
    "modadd": _modadd,
    "full_pipeline": _full_pipeline,
    "real_dialogue": _real_dialogue,
}


def main(argv: list[str] | None = None) -> list[Path]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results", help="folder holding the experiments' results folders")
    p.add_argument("--out", default="paper_figures/out", help="folder for the figures")
    p.add_argument("--only", nargs="*", choices=sorted(FIGURES), help="regenerate only these groups")
    p.add_argument("--smoke", action="store_true", help="use (and if needed run) the smoke presets")
    a = p.parse_args(argv)
    written = []
    for name in a.only or FIGURES:
        paths = FIGURES[name](Path(a.results), Path(a.out), a.smoke)
        written += paths
        print(f"{name}: " + ", ".join(str(x) for x in paths))
    return written


if __name__ == "__main__":
    main()
