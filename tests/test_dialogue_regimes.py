"""The tabular dialogue entry point on its smoke preset: outputs, bounds, resume, bad options."""

from __future__ import annotations

import io

import pytest

from experiments import dialogue_regimes as dr
from shiftbounds.dialogue.exact.regimes import check_bounds


def test_smoke_writes_outputs_and_resumes(tmp_path):
    out = tmp_path / "dr"
    cfg = dr.parse_config(dr.RegimeConfig, "", dr.PRESETS, ["--preset", "smoke", "--out-dir", str(out)], name="experiments.dialogue_regimes")
    first = dr.run(cfg, stream=io.StringIO())
    for name in ("results.json", "results.md", "main.csv", "per_turn.csv", "regimes.csv",
                 "regime_map.png", "regime_map.pdf", "per_turn_shifts.png", "user_models.pdf"):
        assert (out / name).exists(), name
    assert len(first["regimes"]) == 2 * 2 * 1 * 2 * 2  # real users x tasks x n x accept_wrong x leak
    verdicts = {c["calibrated_vs_interactive"] for c in first["regimes"]}
    assert verdicts <= {"win", "tie", "loss"}
    for c in first["regimes"]:  # a verdict other than a tie needs a CI that excludes 0
        assert (c["winner"] == "tie") == (c["margin_low"] <= 0)
    assert "significant win / tie / loss" in (out / "results.md").read_text()
    log = io.StringIO()
    second = dr.run(cfg, stream=log)
    assert "(resumed)" in log.getvalue()
    assert second["main_rows"] == first["main_rows"]


def test_check_bounds_raises_on_violation():
    with pytest.raises(AssertionError, match=r"Delta_1 exceeds B_eps_1"):
        check_bounds("x", {"Delta": [0.0, 0.5], "B_eps": [0.0, 0.1]})


@pytest.mark.parametrize("args, match", [
    (["--tasks", "chess"], "--tasks must name tasks"),
    (["--horizon", "7"], "--horizon 7 must be one of --horizons"),
    (["--seeds", "1"], "--seeds must be >= 2"),
    (["--leak-grid", "1.5"], "--leak-grid needs values in"),
    (["--real-user", "oracle"], "--real-user must be one of --real-users"),
    (["--horizons", "3,4,5", "--horizon", "5"], "--horizon must be <= 4 with --real-user memory"),
])
def test_bad_options_are_named(args, match, capsys):
    with pytest.raises(SystemExit):
        dr.main(args)
    assert match in capsys.readouterr().err
