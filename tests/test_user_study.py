"""The held-out simulator study (``experiments.simulator_study``): its goal-aware discriminator
against user models built to fool it or to be caught, the crossed bootstrap over fits and goals,
and the experiment's smoke preset end to end with resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import simulator_study
from shiftbounds.conversations.measures import UserTurn
from shiftbounds.conversations.models import build_tiny_chat_model, load_chat_model
from shiftbounds.conversations.records import Conversation, Message
from shiftbounds.conversations.user_study import (
    discriminator_text,
    fake_features,
    fit_logistic,
    probe_discriminator,
    real_features,
)
from shiftbounds.ledger import check
from shiftbounds.ledger.decide import Context, simulator_paired
from shiftbounds.utils.stats import crossed_bootstrap_ci


class _Replay:
    """A user model that answers every history with ``reply(goal, history)``."""

    def __init__(self, reply):
        self.reply, self.goal = reply, None

    def reset(self, goal, *, seed=None):
        self.goal = goal

    def respond(self, messages):
        return self.reply(self.goal, messages), False


def _turns(n: int) -> list[UserTurn]:
    drinks = ["latte", "mocha", "tea", "espresso", "cappuccino", "cold brew"]
    out = []
    for i in range(n):
        goal = {"text": f"{1 + i % 3} {drinks[i % len(drinks)]}"}
        msgs = (Message("assistant", "Hi, what can I get you?"), Message("user", f"Can I get {goal['text']} please"))
        out.append(UserTurn(Conversation(f"d{i}", goal, msgs), 1, 0))
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    texts = ["Can I get 1 latte please", "2 mocha", "3 tea", "espresso cappuccino cold brew", "goal: user: assistant:"] * 4
    return load_chat_model(build_tiny_chat_model(tmp_path_factory.mktemp("disc"), texts, vocab_size=200, d_model=16, n_layer=1))


def test_discriminator_cannot_tell_a_replay_of_the_people_and_catches_a_goal_blind_user(tiny):
    """GIVEN held-out histories WHEN the user model replays the person's own reply THEN the probe's
    AUC is exactly 0.5 (identical features, every pair tied); WHEN it ignores its goal (always a
    latte) THEN the goal-aware probe, which reads the goal, separates it far above 0.5."""
    model, tok = tiny
    train, held = _turns(40), _turns(30)
    real_tr, real_ho = real_features(model, tok, train), real_features(model, tok, held)
    replay = _Replay(lambda goal, h: f"Can I get {goal['text']} please")
    same = probe_discriminator(real_tr, fake_features(replay, model, tok, train, seed=0, tag="tr"), real_ho,
                               fake_features(replay, model, tok, held, seed=0, tag="ho"), ["0-1"] * len(held))
    assert same["overall"]["value"] == 0.5 and set(same["per_history"]) == {0.5}
    blind = _Replay(lambda goal, h: "Can I get 1 latte please")
    caught = probe_discriminator(real_tr, fake_features(blind, model, tok, train, seed=0, tag="tr"), real_ho,
                                 fake_features(blind, model, tok, held, seed=0, tag="ho"), ["0-1"] * len(held))
    assert caught["overall"]["value"] > 0.8 and caught["by_turn"]["0-1"]["n"] == len(held)
    assert "1 latte" in discriminator_text({"text": "1 latte"}, [])


def test_fit_logistic_names_bad_labels():
    with pytest.raises(ValueError, match="both classes"):
        fit_logistic(np.zeros((4, 2)), np.ones(4))


def test_crossed_bootstrap_is_the_mean_and_widens_with_fit_to_fit_variation():
    """GIVEN goal-level outcomes of 3 fits WHEN the fits agree THEN the interval is the goals'
    bootstrap; WHEN they differ by a fit effect THEN it is wider; a constant array gives a point."""
    rng = np.random.default_rng(0)
    goals = rng.normal(size=60)
    agree = np.tile(goals, (3, 1))
    apart = agree + np.array([[-1.0], [0.0], [1.0]])
    a = crossed_bootstrap_ci(agree, rng=np.random.default_rng(1))
    b = crossed_bootstrap_ci(apart, rng=np.random.default_rng(1))
    assert a.value == pytest.approx(goals.mean()) and b.value == pytest.approx(goals.mean())
    assert b.high - b.low > 1.5 * (a.high - a.low)
    c = crossed_bootstrap_ci(np.ones((3, 5)), rng=np.random.default_rng(2))
    assert (c.low, c.high) == (1.0, 1.0)
    with pytest.raises(ValueError, match="at least 2 units"):
        crossed_bootstrap_ci(np.ones((3, 1)), rng=rng)


def test_smoke_outputs_rows_and_resume(tmp_path):
    base = build_tiny_chat_model(tmp_path / "base", ["one latte please", "You are a customer"] * 4, vocab_size=300, d_model=16,
                                 n_layer=1)
    out = tmp_path / "run"
    args = ["--preset", "smoke", "--base-model", str(base), "--out-dir", str(out)]
    result = simulator_study.main(args)
    assert [r["user"] for r in result["rows"]] == ["people (logged)", "prompted", "calibrated, fit 0", "calibrated, fit 1",
                                                   "calibrated, 2 fits pooled"]
    assert {p["measure"] for p in result["paired"]} >= {"goal_disclosure", "nll", "discriminator_wins"}
    assert all(p["level"] == 0.99 and p["fits"] == 2 for p in result["paired"])
    for name in ("study.json", "units.json", "users.csv", "by_turn.csv", "paired.csv", "study.md", "study.png", "study.pdf", "config.json"):
        assert (out / name).is_file(), name
    metas = [json.loads((out / "stages" / f"calibrated_{k}" / "shiftbounds.json").read_text()) for k in (0, 1)]
    assert all(m["recipe"] == "conversation" for m in metas)
    stamp = (out / "stages" / "calibrated_0" / "model.safetensors").stat().st_mtime_ns
    assert simulator_study.main(args) == result
    assert (out / "stages" / "calibrated_0" / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(SystemExit):
        simulator_study.main([*args, "--fits", "0"])
    # the ledger decides from paired.csv and its check recomputes each mean from the per-unit file
    ctx = Context(tmp_path, 0.05, 0.005, {})
    verdict = simulator_paired({"folder": "run", "measure": "nll", "direction": "<"}, ctx)
    assert verdict.verdict in ("supported", "contradicted", "not significant") and "2 fits" in verdict.number
    assert check.simulator_paired(tmp_path, "run") == []
    units = json.loads((out / "units.json").read_text())
    units["prompted"]["nll"] = [v + 0.5 for v in units["prompted"]["nll"]]
    (out / "units.json").write_text(json.dumps(units))
    assert any("nll" in d for d in check.simulator_paired(tmp_path, "run"))
