"""Composed configs (:mod:`shiftbounds.utils.configs`): dotted flags, flat names of earlier runs,
and config files in every spelling give one config; shipped ``config.json`` files keep their layout."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from experiments import full_pipeline, modadd
from shiftbounds.conversations.taskmaster_run import RealDialogueConfig
from shiftbounds.dialogue.neural.pipeline import PipelineConfig
from shiftbounds.dialogue.neural.training import RLConfig
from shiftbounds.utils.cli import load_config_file, parse_config
from shiftbounds.utils.configs import build, component, earlier_values, flat_dict, normalise, options, override, recorded
from shiftbounds.utils.io import StaleFolderError, guard_resume

ROOT = Path(__file__).resolve().parents[1]


def parse(argv: list[str]) -> PipelineConfig:
    return parse_config(PipelineConfig, "", full_pipeline.PRESETS, ["--preset", "smoke", *argv], name="experiments.full_pipeline",
                        apply_threads=False)


def test_dotted_flag_flat_flag_and_nested_file_give_one_config(tmp_path):
    dotted = parse(["--rl.steps", "7", "--rl.goals-per-step", "3", "--no-rl.normalise"])
    flat = parse(["--rl-steps", "7", "--goals-per-step", "3", "--no-normalise-advantages"])
    nested = tmp_path / "c.yaml"
    nested.write_text("rl:\n  steps: 7\n  goals_per_step: 3\n")
    dotted_file = tmp_path / "c.json"
    dotted_file.write_text(json.dumps({"rl.steps": 7, "rl.goals_per_step": 3}))
    assert dotted == flat == parse(["--config", str(nested)]) == parse(["--config", str(dotted_file)])
    assert dotted.rl == replace(RLConfig(), steps=7, goals_per_step=3, eval_every=5)  # eval_every from the smoke preset
    assert dotted.rl != parse([]).rl


def test_help_shows_one_section_per_component(capsys):
    with pytest.raises(SystemExit):
        parse(["--help"])
    text = capsys.readouterr().out
    assert "--rl.*: policy-gradient RL" in text and "--rl.steps STEPS, --rl-steps STEPS" in text
    assert "(default: 10)" in text.split("--rl.steps")[2]  # the smoke preset's value


def test_bad_component_values_name_the_option(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse(["--rl.group", "1"])
    err = capsys.readouterr().err
    assert "--rl.*: RL needs" in err and "group >= 2" in err
    with pytest.raises(ValueError, match=r"--rl\.\*: .*group >= 2"):
        build(PipelineConfig, {"rl.group": 1})
    with pytest.raises(ValueError, match=r"unknown options \['rl\.static_reward'\]"):
        build(PipelineConfig, {"rl.static_reward": "awr"})  # set per arm by the library: not an option
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"rl": {"stepz": 3}}))
    with pytest.raises(ValueError, match=r"unknown options \['rl\.stepz'\]"):
        load_config_file(bad, PipelineConfig)
    bad.write_text(json.dumps({"rl": {"steps": "many"}}))
    with pytest.raises(ValueError, match="option rl.steps must be an integer; got 'many'"):
        load_config_file(bad, PipelineConfig)


@pytest.mark.parametrize(("cls", "pattern", "least"), [(PipelineConfig, "**/config.json", 5),
                                                     (RealDialogueConfig, "real_dialogue/*/config.json", 10)])
def test_every_shipped_config_loads_and_keeps_its_layout(cls, pattern, least):
    """Each shipped ``config.json`` of the main job and of the real-dialogue study loads, and the
    config it builds writes back its keys in the same order with the same values (settings added
    since, at their earlier values, :func:`earlier_values`, come on top)."""
    checked = 0
    for path in sorted((ROOT / "results").glob(pattern)):
        saved = json.loads(path.read_text()).get("config", {})
        if cls is PipelineConfig and ("kl_coef" not in saved or "n_curve" not in saved):
            continue
        written = json.loads(json.dumps(flat_dict(build(cls, {**earlier_values(cls), **load_config_file(path, cls)}))))
        assert [k for k in written if k in saved] == list(saved), path
        assert {k: written[k] for k in saved} == saved, path
        checked += 1
    assert checked >= least


def test_flat_dict_is_asdict_without_components():
    cfg = parse_config(modadd.ModAddConfig, "", modadd.PRESETS, ["--preset", "smoke"], name="experiments.modadd", apply_threads=False)
    assert flat_dict(cfg) == asdict(cfg) and list(flat_dict(cfg)) == list(asdict(cfg))
    main = PipelineConfig()
    assert "rl" in asdict(main) and "rl" not in flat_dict(main) and flat_dict(main)["rl_steps"] == main.rl.steps


def test_override_reads_every_spelling():
    base = PipelineConfig()
    assert override(base, rl_steps=600) == override(base, **{"rl.steps": 600}) == replace(base, rl=replace(base.rl, steps=600))
    assert override(base, rl_lr=3e-4, seeds=3).rl.lr == 3e-4 and override(base, seeds=3).seeds == 3
    by_path, unknown = normalise(PipelineConfig, {"rl": {"lr": 1.0}, "group": 8, "nope": 1})
    assert by_path == {"rl.lr": 1.0, "rl.group": 8} and unknown == ["nope"]
    assert list(options(PipelineConfig))[list(options(PipelineConfig)).index("realism_steps") + 1] == "rl.steps"


def test_component_refuses_fields_it_does_not_have():
    with pytest.raises(TypeError, match=r"no fields \['stepz'\]"):
        component(RLConfig(), "rl", flat={"stepz": "rl_steps"})
    with pytest.raises(TypeError, match="config dataclass instance"):
        component(RLConfig, "rl", flat={})


def test_options_added_since_are_declared_once_in_their_fields(tmp_path):
    """GIVEN the fields' ``earlier`` values WHEN a folder's config.json predates an option THEN the
    resume guard reads it at that value (resumes at it, refuses another), and a results.json records
    the option only where it differs from it."""
    assert earlier_values(PipelineConfig) == {"entropy_coef": 0.0, "advantage": "return", "normalise_advantages": False,
                                              "perturb_init": 0}
    cfg = PipelineConfig(out_dir=str(tmp_path))
    saved = {k: v for k, v in flat_dict(cfg).items() if k not in ("perturb_init", "entropy_coef")}
    (tmp_path / "config.json").write_text(json.dumps({"config": saved}))
    guard_resume(tmp_path, cfg)  # the folder was computed at the earlier values: it resumes
    (tmp_path / "config.json").write_text(json.dumps({"config": saved}))
    with pytest.raises(StaleFolderError, match="perturb_init: saved 0, now 1"):
        guard_resume(tmp_path, replace(cfg, perturb_init=1))
    small = parse_config(modadd.ModAddConfig, "", modadd.PRESETS, ["--preset", "smoke"], name="experiments.modadd", apply_threads=False)
    assert "curve_every" not in recorded(small) and "skip" not in recorded(small)
    assert recorded(replace(small, curve_every=5))["curve_every"] == 5
