"""``python -m paper_figures --smoke`` runs the experiments it needs and writes PNG + PDF."""

from __future__ import annotations

import paper_figures.__main__ as pf


def test_paper_figures_smoke(tmp_path):
    written = pf.main(["--results", str(tmp_path / "results"), "--out", str(tmp_path / "figs"), "--smoke"])
    names = {p.name for p in written}
    for stem in ("fig_bound_check", "fig_dialogue_per_turn", "fig_dialogue_regime_map", "fig_dialogue_sycophancy",
                 "fig_noisy_expert", "fig_modadd", "fig_pipeline_learning_curves", "fig_pipeline_shifts",
                 "fig_real_realism_by_turn", "fig_real_sycophancy"):
        assert {stem + ".png", stem + ".pdf"} <= names
    assert all(p.stat().st_size > 1000 for p in written)
