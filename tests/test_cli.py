"""The ``shiftbounds`` command on a user's own task: calibrate, measure (report with figures),
train and evaluate, each from its smoke preset, one from a config file, with clear errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from shiftbounds import cli
from shiftbounds.conversations.records import read_conversations, write_conversations


def test_the_whole_path_from_the_command_line(synthetic, tmp_path):
    prep, convs, base = synthetic
    train, held = write_conversations(tmp_path / "train.jsonl", convs[:40]), write_conversations(tmp_path / "held.jsonl", convs[100:110])
    cli.run(["calibrate", "--preset", "smoke", "--logs", str(train), "--base", str(base), "--out-dir", str(tmp_path / "o")])
    sim = tmp_path / "o" / "simulator"
    report = cli.run(["measure", "--preset", "smoke", "--logs", str(held), "--simulator", str(sim), "--probes", "tests.cli_task:Probes",
                       "--classifier", str(base), "--train-logs", str(train), "--out-dir", str(tmp_path / "m")])
    for name in ("report.md", "report.json", "report.png", "report.pdf"):
        assert (tmp_path / "m" / name).is_file()
    syc = report["sycophancy"]
    assert syc["people"]["accept_right"]["n"] == syc["simulator"]["accept_right"]["n"] > 0
    assert set(syc["simulator"]["replies_right"]) == {"accept", "reject", "unclear", "n"}
    assert syc["simulator"]["goal_consistency"]["n"] == 10 and 0.0 <= report["discriminator_auc"]["overall"]["value"] <= 1.0
    assert "goal_consistency" in (tmp_path / "m" / "report.md").read_text()
    cli.run(["train", "--preset", "smoke", "--paradigm", "calibrated", "--agent", str(base), "--logs", str(train),
              "--simulator", str(sim), "--judge", "tests.cli_task:judge", "--out-dir", str(tmp_path / "t")])
    config = tmp_path / "evaluate.json"
    config.write_text(json.dumps({"agent": str(tmp_path / "t" / "agent"), "logs": str(held), "simulator": str(sim),
                                  "judge": "tests.cli_task:judge", "max_turns": 1, "max_new_tokens": 4}))
    res = cli.run(["evaluate", "--config", str(config), "--out-dir", str(tmp_path / "e")])
    assert res["n"] == 10 and len(res["rewards"]) == 10
    transcripts = read_conversations(tmp_path / "e" / "transcripts.jsonl")
    assert [t.id for t in transcripts] == [c.id for c in convs[100:110]] and all(t.system for t in transcripts)


def test_command_line_errors_are_clear(tmp_path, capsys):
    with pytest.raises(SystemExit, match="unknown command 'frob'"):
        cli.run(["frob"])
    with pytest.raises(SystemExit):
        cli.run(["measure", "--logs", "x.jsonl"])
    assert "--simulator is required" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--judge must be module:name"):
        cli.task_part("", "nocolon", "judge")
    with pytest.raises(ValueError, match="names nothing importable"):
        cli.task_part("", "tests.cli_task:nothing", "judge")
    with pytest.raises(ValueError, match="--task must be one of"):
        cli.task_part("bookings", "", "judge")
    out = subprocess.run([sys.executable, "-m", "shiftbounds", "evaluate", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--transcripts" not in out.stdout and "--judge" in out.stdout


SCRIPT = str(Path(sys.executable).parent / "shiftbounds")
"""The installed console script, as a user types it (beside this interpreter)."""


def shiftbounds(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run the console script in ``cwd`` with no ``PYTHONPATH`` (a user's shell)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([SCRIPT, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


JUDGE_MODULE = """
from tests.cli_task import judge as _judge


def judge(goal, messages):
    return _judge(goal, messages)
"""


@pytest.mark.slow
def test_console_script_chains_commands_from_one_config_file(synthetic, tmp_path):
    """``a && b`` works (exit 0), one YAML file with shared options and per-command sections serves
    sft, calibrate, train, evaluate and compare, a judge module in the current folder imports
    without PYTHONPATH, and two evaluations compare paired by dialogue."""
    _, convs, base = synthetic
    write_conversations(tmp_path / "train.jsonl", convs[:40])
    write_conversations(tmp_path / "held.jsonl", convs[100:108])
    (tmp_path / "myjudge.py").write_text(JUDGE_MODULE.replace("tests.cli_task", "cli_task_copy"))
    (tmp_path / "cli_task_copy.py").write_text((Path(__file__).parent / "cli_task.py").read_text())
    config = {"seed": 3, "max_new_tokens": 4, "judge": "myjudge:judge",
              "sft": {"logs": "train.jsonl", "base": str(base), "steps": 2, "batch": 2, "system": "You are the agent."},
              "calibrate": {"logs": "train.jsonl", "base": str(base), "steps": 2, "batch": 2, "out_dir": "o"},
              "train": {"paradigm": "calibrated", "agent": "sft/agent", "logs": "train.jsonl", "simulator": "o/simulator",
                        "steps": 1, "batch": 2, "num_generations": 2, "max_turns": 1, "out_dir": "t"},
              "evaluate": {"logs": "held.jsonl", "simulator": "o/simulator", "max_turns": 1}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    for command, extra in (("sft", ["--out-dir", "sft"]), ("calibrate", []), ("train", []),
                           ("evaluate", ["--agent", "sft/agent", "--out-dir", "e1"]),
                           ("evaluate", ["--agent", "t/agent", "--out-dir", "e2", "--system", "You are the agent."]),
                           ("compare", ["--a", "e1", "--b", "e2", "--names", "sft,calibrated", "--out-dir", "c"])):
        res = shiftbounds(command, "--config", "run.yaml", *extra, cwd=tmp_path)
        assert res.returncode == 0, (command, res.stderr[-3000:])
    assert json.loads((tmp_path / "sft" / "agent" / "shiftbounds.json").read_text())["system"] == "You are the agent."
    e1 = json.loads((tmp_path / "e1" / "evaluation.json").read_text())
    assert e1["config"]["seed"] == 3 and e1["ids"] == [c.id for c in convs[100:108]]
    comparison = json.loads((tmp_path / "c" / "comparison.json").read_text())
    diff = np.array(e1["rewards"]) - np.array(json.loads((tmp_path / "e2" / "evaluation.json").read_text())["rewards"])
    assert comparison["paired"]["n"] == 8 and comparison["paired"]["mean"] == pytest.approx(diff.mean())
    assert comparison["same_seed_and_logs"] and "sft - calibrated" in (tmp_path / "c" / "comparison.md").read_text()


def _error_of(res: subprocess.CompletedProcess) -> str:
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    return res.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_console_script_names_each_bad_input(synthetic, tmp_path):
    """A mistyped model folder, a wrong value type, malformed YAML, an option no command has, a
    function given as --probes and logs without goals each end at once with exit status 1 or 2
    and one line naming the bad value (no traceback, no hub retries)."""
    _, convs, base = synthetic
    write_conversations(tmp_path / "train.jsonl", convs[:4])
    (tmp_path / "bad_type.yaml").write_text("calibrate:\n  steps: abc\n")
    (tmp_path / "broken.yaml").write_text("steps: [1, 2\n")
    (tmp_path / "unknown.yaml").write_text("stepz: 3\n")
    goalless = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    (tmp_path / "goalless.jsonl").write_text("".join(json.dumps({**r, "goal": None}) + "\n" for r in goalless))
    assert "no such model folder" in _error_of(shiftbounds("calibrate", "--logs", "train.jsonl", "--base", "no_such_model",
                                                          cwd=tmp_path))
    base_args = ["--logs", "train.jsonl", "--base", str(base)]
    assert "option steps must be an integer; got 'abc'" in _error_of(shiftbounds("calibrate", *base_args, "--config", "bad_type.yaml",
                                                                               cwd=tmp_path))
    assert "is not valid YAML" in _error_of(shiftbounds("calibrate", *base_args, "--config", "broken.yaml", cwd=tmp_path))
    assert "unknown options ['stepz']" in _error_of(shiftbounds("sft", *base_args, "--config", "unknown.yaml", cwd=tmp_path))
    probes = shiftbounds("measure", "--logs", str(tmp_path / "train.jsonl"), "--simulator", str(base), "--probes", "tests.cli_task:judge",
                         cwd=Path(__file__).parents[1])
    assert "--probes must name a ProbeBuilder class" in _error_of(probes)
    goal = shiftbounds("evaluate", "--logs", str(tmp_path / "goalless.jsonl"), "--agent", str(base), "--simulator", str(base), "--judge",
                       "tests.cli_task:judge", cwd=Path(__file__).parents[1])
    assert "needs a goal in every conversation" in _error_of(goal)


def test_model_sources_are_checked_before_any_download(tmp_path):
    from shiftbounds.conversations.models import check_model_source

    assert check_model_source("owner/model", "--base") == "owner/model"  # a Hub id: left to from_pretrained
    (tmp_path / "runs").mkdir()
    for bad in ("no_such_model", str(tmp_path / "runs" / "sim"), "./sim", str(tmp_path / "runs")):
        with pytest.raises(ValueError, match="--base"):
            check_model_source(bad, "--base")


def test_one_config_file_serves_every_command(tmp_path):
    from shiftbounds.utils.cli import load_config_file

    sections = {name: cls for name, (cls, _) in cli.COMMANDS.items()}
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump({"seed": 4, "steps": 9, "train": {"steps": 2, "report_to": ["tensorboard"]},
                                    "evaluate": {"system": "S"}}))
    assert load_config_file(path, cli.TrainCommand, section="train", sections=sections) == {"seed": 4, "steps": 2,
                                                                                           "report_to": ("tensorboard",)}
    assert load_config_file(path, cli.EvaluateCommand, section="evaluate", sections=sections) == {"seed": 4, "system": "S"}
    assert load_config_file(path, cli.CompareCommand, section="compare", sections=sections) == {"seed": 4}
    path.write_text(yaml.safe_dump({"train": {"steps": 2.5}}))
    with pytest.raises(ValueError, match="option steps must be an integer; got 2.5"):
        load_config_file(path, cli.TrainCommand, section="train", sections=sections)
    path.write_text(yaml.safe_dump({"evaluate": {"paradigm": "static"}}))
    with pytest.raises(ValueError, match=r"unknown options \['paradigm'\]"):
        load_config_file(path, cli.EvaluateCommand, section="evaluate", sections=sections)


def test_simulator_report_figure_is_titled_and_shows_reply_kinds(monkeypatch, tmp_path):
    from shiftbounds.figures import text

    drawn = {}
    monkeypatch.setattr(text, "save_figure", lambda fig, stem: drawn.setdefault("fig", fig) and [])
    e = {"value": 0.5, "low": 0.4, "high": 0.6, "n": 10}
    side = {"accept_right": e, "accept_wrong": e, "goal_disclosure": e, "goal_consistency": e,
            "replies_right": {"accept": e, "reject": e, "unclear": e, "n": 10}, "replies_wrong": {"accept": e, "reject": e, "unclear": e, "n": 10}}
    report = {"config": {"simulator": "runs/sim", "logs": "held.jsonl"}, "simulator_kind": "calibrated",
              "nll_by_turn": {"overall": e, "by_turn": {"1": e}}, "sycophancy": {"people": side, "simulator": side}}
    text.plot_simulator_report(report, tmp_path / "r")
    fig = drawn["fig"]
    assert "runs/sim" in fig._suptitle.get_text() and "calibrated" in fig._suptitle.get_text()
    labels = [t.get_text() for t in fig.axes[-1].get_xticklabels()]
    assert labels == [f"{s}: {k}" for s in ("right", "wrong") for k in ("accept", "reject", "unclear")]


@pytest.mark.slow
def test_train_resumes_to_the_uninterrupted_weights(synthetic, tmp_path):
    """``train --save-steps 1`` killed after step 2 (its later checkpoints and agent deleted), then
    ``--resume``, gives the weights of the uninterrupted run, and they moved from the start."""
    import torch
    from safetensors.torch import load_file

    _, convs, base = synthetic
    logs = write_conversations(tmp_path / "train.jsonl", convs[:8])
    sim_args = ["calibrate", "--preset", "smoke", "--logs", str(logs), "--base", str(base), "--out-dir", str(tmp_path / "o")]
    cli.run(sim_args)
    common = ["train", "--preset", "smoke", "--paradigm", "calibrated", "--agent", str(base), "--logs", str(logs), "--simulator",
              str(tmp_path / "o" / "simulator"), "--judge", "tests.cli_task:length_judge", "--lr", "1e-3", "--max-new-tokens", "3"]
    cli.run([*common, "--steps", "4", "--out-dir", str(tmp_path / "whole")])
    cli.run([*common, "--steps", "4", "--save-steps", "1", "--out-dir", str(tmp_path / "split")])
    for late in ("checkpoint-3", "checkpoint-4", "../agent"):  # as if killed after step 2
        shutil.rmtree(tmp_path / "split" / "checkpoints" / late)
    cli.run([*common, "--steps", "4", "--save-steps", "1", "--resume", "--out-dir", str(tmp_path / "split")])
    a, b = (load_file(str(tmp_path / d / "agent" / "model.safetensors")) for d in ("whole", "split"))
    gap = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert gap == 0.0 and not all(torch.equal(a[k], load_file(str(Path(base) / "model.safetensors"))[k]) for k in a), gap


def test_a_run_mostly_without_reward_variance_warns():
    from shiftbounds.conversations.paradigms import signal_warning, training_signal

    log = [{"frac_reward_zero_std": 1.0}] * 19 + [{"frac_reward_zero_std": 0.5}]
    assert "19 of 20 steps had no reward variance" in signal_warning(training_signal(log, True), "run", "out")
    assert "learned nothing" in signal_warning(training_signal(log[:19], True), "run", "out")
    assert signal_warning(training_signal([{"frac_reward_zero_std": 0.0}] * 3 + log[:2], True), "run", "out") is None
