"""How many logs calibration needs: the paired rows, the paying-size rule, the minimum detectable
effect, and the entry point's smoke preset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import log_size
from shiftbounds.dialogue.exact.log_size import size_rows, smallest_paying_size
from shiftbounds.utils.stats import minimum_detectable_effect, seeds_for_power


@pytest.mark.parametrize("n", [3, 5, 10, 20, 50])
@pytest.mark.parametrize("sd", [0.03, 1.0])
def test_the_minimum_detectable_effect_inverts_seeds_for_power(n, sd):
    mde = minimum_detectable_effect(sd, n)
    assert seeds_for_power(sd, mde * (1 + 1e-9)) == n
    assert seeds_for_power(sd, mde * (1 - 1e-6)) == n + 1
    assert minimum_detectable_effect(0.0, n) == 0.0


def _J(**arms):
    return {k: np.asarray(v, dtype=float) for k, v in arms.items()}


def test_size_rows_pick_the_best_logs_only_arm_and_never_show_a_zero_width_interval():
    J = _J(cal=[0.6, 0.6, 0.6, 0.6, 0.6, 0.6], interactive=[0.5] * 6, a=[0.1, 0.2, 0.1, 0.2, 0.1, 0.2], b=[0.3, 0.4, 0.3, 0.4, 0.3, 0.4])
    inter, best = size_rows(100, J, calibrated=("cal",), logs_only=("a", "b"))
    assert inter["against"] == "interactive" and inter["ci"] == "constant" and inter["pays"]  # 6 draws: p = 2 / 64
    assert best["against"] == "best logs-only (b)" and best["mean"] == pytest.approx(0.25) and best["ci"].startswith("[")


def test_a_calibrated_arm_equal_to_interactive_never_pays():
    """A model built to fool the rule: the calibrated simulator's plan is Interactive RL's, draw by draw."""
    J = _J(cal=[0.5, 0.4, 0.6, 0.5], interactive=[0.5, 0.4, 0.6, 0.5], a=[0.1] * 4)
    assert not size_rows(10, J, calibrated=("cal",), logs_only=("a",))[0]["pays"]


@pytest.mark.parametrize("pays, first", [([False, True, False, True, True], 4), ([True] * 3, 1), ([True, True, False], None), ([], None)])
def test_the_smallest_paying_size_must_pay_at_every_larger_size(pays, first):
    rows = [{"n_logs": i + 1, "calibrated": "c", "against": "interactive", "pays": p} for i, p in enumerate(pays)]
    assert smallest_paying_size(rows, "c", "interactive") == first


def test_learned_rows_read_a_main_job_folder(tmp_path):
    rng = np.random.default_rng(0)
    arms = ("calibrated", "calibrated_realism", "static_myopic", "static_one_step", "static_awr", "interactive")
    runs = [{"task": "guess_number", "seed": s, "paradigms": {a: {"J_real": float(rng.random())} for a in arms}} for s in range(4)]
    (tmp_path / "results.json").write_text(json.dumps({"config": {"n_logs": 150, "tasks": ["guess_number"]}, "runs": runs}))
    rows = log_size.learned_rows(tmp_path)
    assert len(rows) == 4 and {r["n_logs"] for r in rows} == {150} and {r["replicates"] for r in rows} == {4}


def test_the_smoke_preset_writes_every_output(tmp_path):
    out = tmp_path / "smoke"
    res = log_size.main(["--preset", "smoke", "--out-dir", str(out), "--workers", "1"])
    assert {r["n_logs"] for r in res["exact"]} == {30, 120}
    for name in ("exact.csv", "thresholds.csv", "results.md", "results.json", "log_size.png", "log_size.pdf"):
        assert (out / name).is_file(), name
    # the draws are stages: a rerun on two workers with a learned folder recomputes nothing exact, the same bytes
    before = (out / "exact.csv").read_bytes()
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "stages").glob("draws_*.json")}
    learned = tmp_path / "learned"
    learned.mkdir()
    arms = ("calibrated", "calibrated_realism", "static_myopic", "static_one_step", "static_awr", "interactive")
    runs = [{"task": "guess_number", "seed": s, "paradigms": {a: {"J_real": 0.1 * s + 0.01 * i} for i, a in enumerate(arms)}}
            for s in range(3)]
    (learned / "results.json").write_text(json.dumps({"config": {"n_logs": 60, "tasks": ["guess_number"]}, "runs": runs}))
    again = log_size.main(["--preset", "smoke", "--out-dir", str(out), "--workers", "2", "--learned", str(learned)])
    assert (out / "exact.csv").read_bytes() == before and len(stamps) == 2
    assert {p.name: p.stat().st_mtime_ns for p in (out / "stages").glob("draws_*.json")} == stamps
    assert {r["n_logs"] for r in again["learned"]} == {60} and (out / "learned.csv").is_file()
    with pytest.raises(ValueError, match="--learned folders need a finished main job"):
        log_size.LogSizeConfig(learned=(str(tmp_path / "nowhere"),))
