"""The bound_check entry point on its smoke preset, and the regime claims it reports."""

from __future__ import annotations

import json

import pytest

from experiments import bound_check


def test_smoke_preset_writes_results_and_shows_quadratic_regime(tmp_path, capsys):
    out = tmp_path / "bc"
    results = bound_check.main(["--preset", "smoke", "--out-dir", str(out)])
    for name in ("table.md", "table.csv", "slopes.csv", "cliff_ratios.csv", "results.json", "bound_check.png", "bound_check.pdf"):
        assert (out / name).exists(), name
    assert json.loads((out / "results.json").read_text())["config"]["n_instances"] == 16
    slopes = {s["family"]: s for s in results["slopes"]}
    # H(H-1)/2 over H in {8, 16, 32} has log-log slope 2.07; the gap follows the bound there
    for fam in ("cliff", "sim-cliff", "absorbing", "absorbing-sim"):
        assert 1.8 <= slopes[fam]["gap_slope"] <= 2.2, fam
        assert abs(slopes[fam]["gap_slope"] - slopes[fam]["bound_slope"]) < 0.05, fam
    for r in results["cliff_ratios"]:
        if r["eps_H"] <= 0.1:
            assert r["ratio"] > 0.95
    assert "slopes of log|gap|" in capsys.readouterr().out


def test_bad_option_is_named(capsys):
    with pytest.raises(SystemExit):
        bound_check.main(["--families", "cliff,nope"])
    assert "--families must be a non-empty subset" in capsys.readouterr().err
