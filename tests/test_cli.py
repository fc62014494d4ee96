"""The ``shiftbounds`` command on a user's own task: calibrate, measure (report with figures),
train and evaluate, each from its smoke preset, one from a config file, with clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shiftbounds import cli
from shiftbounds.conversations.records import read_conversations, write_conversations


def test_the_whole_path_from_the_command_line(synthetic, tmp_path):
    prep, convs, base = synthetic
    train, held = write_conversations(tmp_path / "train.jsonl", convs[:40]), write_conversations(tmp_path / "held.jsonl", convs[100:110])
    cli.main(["calibrate", "--preset", "smoke", "--logs", str(train), "--base", str(base), "--out-dir", str(tmp_path / "o")])
    sim = tmp_path / "o" / "simulator"
    report = cli.main(["measure", "--preset", "smoke", "--logs", str(held), "--simulator", str(sim), "--probes", "tests.cli_task:Probes",
                       "--classifier", str(base), "--train-logs", str(train), "--out-dir", str(tmp_path / "m")])
    for name in ("report.md", "report.json", "report.png", "report.pdf"):
        assert (tmp_path / "m" / name).is_file()
    syc = report["sycophancy"]
    assert syc["people"]["accept_right"]["n"] == syc["simulator"]["accept_right"]["n"] > 0
    assert set(syc["simulator"]["replies_right"]) == {"accept", "reject", "unclear", "n"}
    assert syc["simulator"]["goal_consistency"]["n"] == 10 and 0.0 <= report["discriminator_auc"]["overall"]["value"] <= 1.0
    assert "goal_consistency" in (tmp_path / "m" / "report.md").read_text()
    cli.main(["train", "--preset", "smoke", "--paradigm", "calibrated", "--agent", str(base), "--logs", str(train),
              "--simulator", str(sim), "--judge", "tests.cli_task:judge", "--out-dir", str(tmp_path / "t")])
    config = tmp_path / "evaluate.json"
    config.write_text(json.dumps({"agent": str(tmp_path / "t" / "agent"), "logs": str(held), "simulator": str(sim),
                                  "judge": "tests.cli_task:judge", "max_turns": 1, "max_new_tokens": 4}))
    res = cli.main(["evaluate", "--config", str(config), "--out-dir", str(tmp_path / "e")])
    assert res["n"] == 10 and len(res["rewards"]) == 10
    transcripts = read_conversations(tmp_path / "e" / "transcripts.jsonl")
    assert [t.id for t in transcripts] == [c.id for c in convs[100:110]] and all(t.system for t in transcripts)


def test_command_line_errors_are_clear(tmp_path, capsys):
    with pytest.raises(SystemExit, match="unknown command 'frob'"):
        cli.main(["frob"])
    with pytest.raises(SystemExit):
        cli.main(["measure", "--logs", "x.jsonl"])
    assert "--logs and --simulator are required" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--judge must be module:name"):
        cli.task_part("", "nocolon", "judge")
    with pytest.raises(ValueError, match="names nothing importable"):
        cli.task_part("", "tests.cli_task:nothing", "judge")
    with pytest.raises(ValueError, match="--task must be one of"):
        cli.task_part("bookings", "", "judge")
    out = subprocess.run([sys.executable, "-m", "shiftbounds", "evaluate", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--transcripts" not in out.stdout and "--judge" in out.stdout
