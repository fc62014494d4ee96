"""The learner study: per-configuration gaps to the exact optima, and its entry point's smoke run."""

from __future__ import annotations

import pytest

from experiments import learner_study
from shiftbounds.dialogue.neural.learner import GAP_TARGET, VARIANTS, best_rows, budget, variant_rows
from shiftbounds.dialogue.neural.pipeline import PipelineConfig
from shiftbounds.utils.configs import build


def _results(values: dict[str, list[float]]) -> dict:
    """Main-job results of one task with the given per-seed objective values per arm."""
    n = len(next(iter(values.values())))
    runs = []
    for k in range(n):
        paradigms = {arm: {"J_real": 0.1 * k, "J_sim": v[k], "J_static": v[k]} for arm, v in values.items()}
        runs.append({"task": "guess_number", "seed": k, "sft": {"J_real": 0.0, "J_static": 0.0}, "paradigms": paradigms})
    return {"runs": runs}


def test_variant_rows_are_the_per_seed_gaps_to_the_optimum():
    cfg = PipelineConfig(tasks=("guess_number",), realism_steps=0)
    arms = ("static_myopic", "static_one_step", "static_awr", "interactive", "calibrated", "oracle")
    values = {a: [0.5, 0.6, 0.9] for a in arms}
    values["oracle"] = [0.99, 0.98, 0.5]  # two seeds within 0.03 of 1.0, one far: the median is within
    optimum = {"guess_number": {"interactive": 1.0, "oracle": 1.0, "static_myopic": 0.9}}
    rows = {r["arm"]: r for r in variant_rows("v", cfg, _results(values), optimum)}
    assert set(rows) == {"sft", *arms}
    assert rows["interactive"]["gap_median"] == pytest.approx(0.4) and rows["interactive"]["gap_max"] == pytest.approx(0.5)
    assert rows["interactive"]["gap_mean"] == pytest.approx((0.5 + 0.4 + 0.1) / 3)
    assert rows["oracle"]["gap_median"] == pytest.approx(0.02) and rows["oracle"]["within_target"] and GAP_TARGET == 0.03
    assert rows["static_myopic"]["gap_median"] == pytest.approx(0.3) and not rows["static_myopic"]["within_target"]
    assert "gap_median" not in rows["calibrated"]  # no exact optimum: no gap
    assert rows["oracle"]["J_real"] == pytest.approx(0.1)
    assert [r["arm"] for r in best_rows(list(rows.values()))] == ["interactive", "oracle", "static_myopic"]
    assert budget(build(PipelineConfig, {"rl.steps": 600})) == 2.0 and budget(build(PipelineConfig, {"rl.group": 8, "rl.goals_per_step": 8})) == 1.0


def test_learner_study_smoke_runs_resumes_and_refuses_a_bad_variant(tmp_path, capsys):
    out = tmp_path / "learner"
    res = learner_study.main(["--preset", "smoke", "--out-dir", str(out), "--workers", "1"])
    assert {r["variant"] for r in res["rows"]} == {"today", "togo"}
    gaps = [r for r in res["rows"] if "gap_median" in r]
    assert len(gaps) == 2 * 2 * 3  # variants x tasks x exact-optimum arms
    for name in ("learner.csv", "best.csv", "split.csv", "split_seeds.csv", "learner.md", "results.json", "learner.png",
                 "learner.pdf", "split.png", "split.pdf", "today/results.json"):
        assert (out / name).exists(), name
    # the exact split adds up, its parts are signed as they must be, and the exact gap of each
    # learned agent sits near the gap measured from sampled dialogues
    assert len(res["split_seeds"]) == 2 * 2 * 2 * 3  # variants x tasks x seeds x exact-optimum arms
    sampled = {(r["variant"], r["task"], r["arm"]): r["gap_mean"] for r in gaps}
    for r in res["split_seeds"]:
        assert r["gap"] == pytest.approx(r["regularisation_cost"] + r["optimisation_error"], abs=1e-12)
        assert r["regularisation_cost"] >= -1e-12 and r["soft_kl"] >= 0 and r["beta"] == 0.05
    for r in res["split"]:
        assert r["gap_mean"] == pytest.approx(r["regularisation_cost_mean"] + r["optimisation_error_mean"], abs=1e-12)
    for r in res["split"]:
        exact = [x["gap"] for x in res["split_seeds"] if (x["variant"], x["task"], x["arm"]) == (r["variant"], r["task"], r["arm"])]
        assert abs(sum(exact) / len(exact) - sampled[(r["variant"], r["task"], r["arm"])]) < 0.1
    first = (out / "learner.csv").read_bytes()
    learner_study.main(["--preset", "smoke", "--out-dir", str(out), "--workers", "1"])
    assert (out / "learner.csv").read_bytes() == first  # resumed from the saved runs, same bytes
    with pytest.raises(SystemExit):
        learner_study.main(["--preset", "smoke", "--variants", "vibes", "--out-dir", str(tmp_path / "x")])
    assert "vibes" in capsys.readouterr().err
    assert set(VARIANTS) >= set(learner_study.PRESETS["smoke"]["variants"])
