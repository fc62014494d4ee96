"""``experiments.pretrained_users`` on its smoke preset with a tiny chat model: every user model
gets a row (the people, each persona, each calibration recipe), the outputs are written, and a
second call resumes from the saved stages without recomputing them."""

from __future__ import annotations

import json

from experiments import pretrained_users
from shiftbounds.conversations.models import build_tiny_chat_model


def test_smoke_rows_outputs_and_resume(tmp_path):
    base = build_tiny_chat_model(tmp_path / "base", ["one latte please", "You are a customer"] * 4, vocab_size=300, d_model=16,
                                 n_layer=1)
    out = tmp_path / "run"
    args = ["--preset", "smoke", "--base-model", str(base), "--out-dir", str(out)]
    rows = pretrained_users.main(args)
    users = [r["user"] for r in rows]
    assert users == ["people (logged replies)", *(f"prompted, persona {i}" for i in range(4)), "calibrated, turns",
                     "calibrated, conversation"]
    assert rows[0]["goal_disclosure"] is not None and all(r["accept_right"] is not None for r in rows[1:])
    assert all(isinstance(r["nll"], float) for r in rows[-2:]) and isinstance(rows[1]["nll"], float)
    for name in ("users.json", "users.csv", "users.md", "users.png", "users.pdf", "config.json"):
        assert (out / name).is_file(), name
    paired = json.loads((out / "users.json").read_text())["recipe_nll_paired"]
    assert paired["difference"] == "turns - conversation" and paired["n"] == len(
        json.loads((out / "stages" / "nll_per_turn_turns.json").read_text()))
    meta = json.loads((out / "stages" / "calibrated_conversation" / "shiftbounds.json").read_text())
    assert meta["recipe"] == "conversation"
    stamp = (out / "stages" / "calibrated_turns" / "model.safetensors").stat().st_mtime_ns
    assert pretrained_users.main(args) == rows
    assert (out / "stages" / "calibrated_turns" / "model.safetensors").stat().st_mtime_ns == stamp
