"""``python -m paper_figures`` draws from saved results, names the commands for missing ones, and
with ``--run-missing`` runs them first; every figure is written as PNG + PDF."""

from __future__ import annotations

import paper_figures.__main__ as pf
from tests.marks import needs_data


def test_missing_results_are_named_not_run(tmp_path, capsys):
    written = pf.main(["--preset", "smoke", "--results-dir", str(tmp_path / "results"), "--out-dir", str(tmp_path / "figs")])
    assert written == []
    err = capsys.readouterr().err
    for exp in ("bound_check", "dialogue_regimes", "noisy_expert", "modadd", "full_pipeline", "real_dialogue"):
        assert f"python -m experiments.{exp} --preset smoke --out-dir {tmp_path / 'results' / exp / 'smoke'}" in err
    assert not (tmp_path / "results").exists()


@needs_data
def test_paper_figures_smoke_run_missing(tmp_path):
    written = pf.main(["--preset", "smoke", "--results-dir", str(tmp_path / "results"), "--out-dir", str(tmp_path / "figs"),
                       "--run-missing"])
    names = {p.name for p in written}
    for stem in ("fig_bound_check", "fig_dialogue_per_turn", "fig_dialogue_regime_map", "fig_dialogue_user_models",
                 "fig_noisy_expert", "fig_modadd", "fig_pipeline_learning_curves", "fig_pipeline_shifts",
                 "fig_real_realism_by_turn", "fig_real_sycophancy", "fig_real_paradigms", "fig_real_paired", "fig_real_training_curves",
                 "fig_real_paper_paradigms", "fig_real_paper_paired", "fig_real_paper_training_curves"):
        assert {stem + ".png", stem + ".pdf"} <= names
    assert all(p.stat().st_size > 1000 for p in written)


def test_figures_do_not_import_experiments():
    """Figures are drawn by the package from saved results: neither paper_figures nor the package
    imports an experiment entry point."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for path in list((root / "paper_figures").rglob("*.py")) + list((root / "shiftbounds").rglob("*.py")):
        text = path.read_text()
        assert "from experiments" not in text and "import experiments" not in text, path


def test_training_curves_legend_names_every_arms_lines(tmp_path, monkeypatch):
    """An arm without checkpoints (Static Context RL) drawn first: the legend still names the
    checkpoint lines another arm has, each once."""
    from shiftbounds.figures import text

    seen = {}
    monkeypatch.setattr(text, "save_figure", lambda fig, stem: seen.setdefault("fig", fig) and [])
    ckpt = {"steps": [0, 1, 2], "success": [0.5, 0.6, 0.6], "held-out user model": [0.4, 0.4, 0.5]}
    text.plot_training_curves({"training_curves": {"static seed 0": [0.1, 0.2], "calibrated seed 0": [0.3, 0.4],
                                                   "calibrated seed 1": [0.2, 0.5]},
                               "checkpoint_curves": {"calibrated seed 0": ckpt, "calibrated seed 1": ckpt}}, tmp_path / "f")
    labels = [t.get_text() for leg in seen["fig"].legends for t in leg.get_texts()]
    assert labels == ["rollouts, mean over seeds", "greedy agent vs its training simulator", "greedy agent vs held-out user model"]


def test_paradigm_bars_legend_sits_off_the_bars(tmp_path, monkeypatch):
    """The paradigm figure's legend is the figure's, one entry per agent, not drawn over the bars."""
    from shiftbounds.figures import text

    seen = {}
    monkeypatch.setattr(text, "save_figure", lambda fig, stem: seen.setdefault("fig", fig) and [])
    users = ["held-out user model", "independent user model"]
    table = [{"arm": a, **{u: 0.5 for u in users}} for a in ("sft", "static", "calibrated")]
    runs = [{"arm": a, "user": u, "success": 0.5} for a in ("sft", "static", "calibrated") for u in users]
    text.plot_paradigm_success({"evaluation_users": users, "table": table, "runs": runs}, tmp_path / "f")
    fig = seen["fig"]
    assert [t.get_text() for leg in fig.legends for t in leg.get_texts()] == ["sft", "static", "calibrated"]
    assert fig.axes[0].get_legend() is None


def test_the_paper_comparison_group_draws_the_shipped_paper_requests_run():
    """Under the default preset the paradigm comparison's figures come from the shipped run of
    ``--preset paper_requests``; the other real-dialogue figures from ``--preset cpu``."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cfg = pf.FiguresConfig(results_dir=str(root / "results"))
    folder, preset = pf.results_folder(cfg, "real_dialogue_paper")
    assert preset == "paper_requests" and (folder / "results.json").is_file()
    assert pf.results_folder(cfg, "real_dialogue") == (root / "results" / "real_dialogue" / "cpu", "cpu")
    assert pf.results_folder(pf.FiguresConfig(experiment_preset="smoke"), "real_dialogue_paper")[1] == "smoke"


def test_paired_differences_fill_only_the_orderings_holm_keeps(tmp_path, monkeypatch):
    """One row per comparison, one marker per evaluation user: filled where the Holm verdict calls
    an ordering, hollow where it does not; the training-simulator rows are not drawn."""
    from matplotlib.colors import to_rgba

    from shiftbounds.figures import text

    seen = {}
    monkeypatch.setattr(text, "save_figure", lambda fig, stem: seen.setdefault("fig", fig) and [])
    users = ["held-out user model", "independent user model"]
    paired = [{"evaluation user": u, "difference": d, "mean": m, "low": m - 0.01, "high": m + 0.01, "holm verdict": v}
              for u in users for d, m, v in (("calibrated - sft", 0.02, "calibrated > sft"), ("static - sft", 0.0, "not significant"))]
    paired.append({"evaluation user": "its training simulator (calibrated)", "difference": "calibrated - sim", "mean": 0.5,
                   "low": 0.4, "high": 0.6, "holm verdict": "calibrated > sft"})
    text.plot_paired_differences({"evaluation_users": users, "paired": paired}, tmp_path / "f")
    ax = seen["fig"].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["calibrated - sft", "static - sft"]
    points = [(line.get_xdata()[0], line.get_markerfacecolor()) for line in ax.lines
              if len(line.get_xdata()) == 1 and line.get_marker() != "|"]  # not the error bars' caps
    assert len(points) == 4
    for x, face in points:
        assert (to_rgba(face) == to_rgba("white")) == (x == 0.0), (x, face)
    assert [t.get_text() for leg in seen["fig"].legends for t in leg.get_texts()] == users
