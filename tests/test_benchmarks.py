"""The benchmarks' smoke presets: same CLI convention as the experiments, results written."""

from __future__ import annotations

import json

import pytest

from benchmarks import llm, rollout, tabular


@pytest.mark.parametrize("module, n_rows", [(tabular, 2), (rollout, 2), (llm, 3)])
def test_benchmark_smoke_writes_results(module, n_rows, tmp_path):
    out = tmp_path / module.__name__.rsplit(".", 1)[-1]
    res = module.main(["--preset", "smoke", "--out-dir", str(out), "--seed", "3"])
    saved = json.loads((out / "results.json").read_text())
    assert saved["config"]["seed"] == 3 and len(saved["rows"]) == len(res["rows"]) >= n_rows
    assert (out / "results.md").read_text().startswith("# benchmarks.")
    with pytest.raises(SystemExit):
        module.main(["--preset", "smoke", "--repeats", "0", "--out-dir", str(out)])


def test_pipeline_benchmark_smoke_times_both_configurations(tmp_path):
    from benchmarks import pipeline

    res = pipeline.main(["--preset", "smoke", "--out-dir", str(tmp_path / "pipeline")])
    assert [r["configuration"].split()[0] for r in res["rows"]] == ["before", "now"]
    assert all(r["seeds_per_minute"] > 0 for r in res["rows"]) and res["rows"][0]["ratio_to_before"] == 1.0
    with pytest.raises(SystemExit):
        pipeline.main(["--preset", "smoke", "--seeds", "0", "--out-dir", str(tmp_path / "x")])


def test_rl_step_benchmark_smoke_times_every_agent_on_a_random_smollm2(tmp_path):
    """Without the model folder the user and the pretrained agent are SmolLM2's architecture with random
    weights, and the report says so; the LoRA agent trains the same model as the full one."""
    from benchmarks import rl_step

    res = rl_step.main(["--preset", "smoke", "--out-dir", str(tmp_path / "rl"), "--model", str(tmp_path / "absent")])
    assert [r["agent"] for r in res["rows"]] == ["tiny", "lora", "full"] and res["rows"][0]["ratio_to_first"] == 1.0
    assert all(r["median_step_seconds"] > 0 and r["steps_timed"] == 1 for r in res["rows"])
    assert res["rows"][1]["parameters"] == res["rows"][2]["parameters"] and res["rows"][1]["lora_rank"] == 2
    assert "random weights" in (tmp_path / "rl" / "results.md").read_text()
    with pytest.raises(SystemExit):
        rl_step.main(["--preset", "smoke", "--agents", "huge", "--out-dir", str(tmp_path / "x")])
