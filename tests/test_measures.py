"""Measuring simulators through the conversation interface: NLL of human turns against a direct
computation, the discriminator on a simulator that is obviously wrong and one that is exact,
sycophancy probes on Taskmaster-4 with the rule-based user's known rates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shiftbounds.conversations import from_taskmaster4
from shiftbounds.conversations.measures import (
    discriminator_auc_by_turn,
    logged_confirmations,
    nll_by_turn,
    sycophancy_report,
    turn_bucket,
    user_turn_nll,
    user_turns,
)
from shiftbounds.conversations.models import load_chat_model
from shiftbounds.conversations.simulators import HiddenGoalUser, OrderingUser, simulator_view
from shiftbounds.conversations.tasks import Probe, ProbeSet, Taskmaster4Probes, placed_orders, taskmaster4_judge
from tests.marks import needs_data


def test_turn_buckets():
    assert [turn_bucket(t) for t in (0, 1, 2, 3, 4, 7, 8, 30)] == ["0-1", "0-1", "2-3", "2-3", "4-7", "4-7", "8+", "8+"]
    assert turn_bucket(5, (0, 5)) == "5+"
    with pytest.raises(ValueError, match="turn index is >= 0"):
        turn_bucket(-1)


def test_user_turn_nll_equals_the_direct_computation(synthetic):
    prep, convs, base = synthetic
    model, tok = load_chat_model(base)
    turns = user_turns(convs[:3])
    nll = user_turn_nll(model, tok, turns, batch=4)
    for u, value in zip(turns, nll):
        view = simulator_view(u.history, u.conversation.goal)
        prompt = tok.apply_chat_template(view, add_generation_prompt=True, tokenize=True, return_dict=False)
        full = tok.apply_chat_template(view + [{"role": "assistant", "content": u.text}], tokenize=True, return_dict=False)
        with torch.no_grad():
            logits = model(torch.tensor([full])).logits[0, :-1].double()
        logp = logits - torch.logsumexp(logits, -1, keepdim=True)
        target = range(len(prompt), len(full))
        direct = -np.mean([float(logp[t - 1, full[t]]) for t in target])
        assert value == pytest.approx(direct, abs=1e-4)
    report = nll_by_turn(model, tok, convs[:6])
    assert report["overall"]["n"] == sum(len(c.turns("user")) for c in convs[:6])
    assert sum(b["n"] for b in report["by_turn"].values()) == report["overall"]["n"]
    assert report["overall"]["low"] <= report["overall"]["value"] <= report["overall"]["high"]
    # regression: a history longer than the model's positions crashed with the default max_len
    from shiftbounds.conversations import Conversation, Message
    from shiftbounds.conversations.models import model_positions

    long = Conversation("long", convs[0].goal, (Message("assistant", "ask:>=2 " * 400), Message("user", "yes")))
    assert model_positions(model) < 1024
    assert np.isfinite(nll_by_turn(model, tok, [long])["overall"]["value"])


class Garbage:
    """A simulator that is wrong in an obvious way: it always says the same non-act."""

    def reset(self, goal, *, seed=None):
        pass

    def respond(self, messages):
        return "zzz qqq", False


def test_discriminator_separates_a_wrong_simulator_and_not_the_exact_one(synthetic):
    prep, convs, base = synthetic
    kw = dict(steps=40, batch=16, lr=3e-3, max_len=128, seed=0)
    wrong = discriminator_auc_by_turn(Garbage(), str(base), convs[:60], convs[60:], **kw)
    assert wrong["overall"]["low"] > 0.8
    assert sum(b["n"] for b in wrong["by_turn"].values()) == wrong["overall"]["n"] == len(user_turns(convs[60:], after_agent=True))
    exact = discriminator_auc_by_turn(HiddenGoalUser(prep.task, prep.real), str(base), convs[:60], convs[60:], **kw)
    assert exact["overall"]["low"] < 0.5 < exact["overall"]["high"]


@needs_data
def test_taskmaster4_probes_and_the_rule_users_rates():
    from shiftbounds.conversations.taskmaster import load_tm4

    convs = from_taskmaster4(load_tm4(None, 150))
    builder = Taskmaster4Probes()
    probes = builder.build(convs, rng=np.random.default_rng(0))
    assert len(probes.right) == len(probes.wrong) > 100
    for r, w in zip(probes.right, probes.wrong):  # the pair differs in the order placed and shown, nothing else
        assert len(r.messages) == len(w.messages) and r.human_reply and not w.human_reply
        assert taskmaster4_judge(r.goal, list(r.messages)) == 1.0 and taskmaster4_judge(w.goal, list(w.messages)) == 0.0
        assert placed_orders(list(r.messages))[0].item != placed_orders(list(w.messages))[0].item
        assert "[order shown:" in w.messages[-1]["content"]
    people = sycophancy_report(None, probes, builder)
    logged = logged_confirmations(probes, builder, taskmaster4_judge)
    assert logged["n"] == logged["of_the_goal"] == len(probes.right) and logged["not_accepted_wrong"] == 0
    assert logged["not_accepted"] == round(len(probes.right) * (1 - people["accept_right"]["value"])) > 0
    shifted = ProbeSet(probes.wrong, probes.right, ())  # the same histories, wrong order shown (no logged reply)
    with pytest.raises(ValueError, match="no logged reply"):
        logged_confirmations(shifted, builder, taskmaster4_judge)
    relabelled = ProbeSet(tuple(Probe(w.goal, w.messages, "no, I wanted something else") for w in probes.wrong), probes.right, ())
    assert logged_confirmations(relabelled, builder, taskmaster4_judge)["not_accepted_wrong"] == len(probes.wrong)
    assert people["accept_wrong"] is None and people["accept_right"]["value"] > 0.85
    always = sycophancy_report(OrderingUser(accept_wrong=1.0, leak=0.0), probes, builder)
    never = sycophancy_report(OrderingUser(accept_wrong=0.0, leak=0.0), probes, builder)
    assert always["accept_wrong"]["value"] == 1.0 and always["discrimination"]["value"] == 0.0
    assert never["accept_wrong"]["value"] == 0.0 and never["discrimination"]["value"] == 1.0
    some = sycophancy_report(OrderingUser(accept_wrong=0.3, leak=0.0), probes, builder, seed=1)
    assert some["accept_wrong"]["low"] < 0.3 < some["accept_wrong"]["high"]
    assert never["goal_disclosure"]["value"] == 1.0  # the rule user states its whole order first


class _YesBuilder:
    """A probe builder whose replies accept when they start with "yes"."""

    def build(self, convs, *, rng):  # pragma: no cover - the probes are made by hand here
        raise NotImplementedError

    def accepts(self, reply: str) -> bool:
        return reply.startswith("yes")

    def discloses(self, reply: str, goal) -> bool:
        return str(goal) in reply


def test_logged_people_rates_leave_out_probes_without_a_logged_reply():
    """Regression (a wrong number): GIVEN 46 logged right confirmations all accepted, 14 wrong ones
    rejected, and 40 made-up probes with no logged reply WHEN the people's report is read THEN
    accept-right is 46/46 (not 46/100), accept-wrong 0/14, discrimination over the 14 logged pairs."""
    msgs = ({"role": "assistant", "content": "confirm?"},)
    right = [Probe("g", msgs, "yes please") for _ in range(46)] + [Probe("g", msgs, "") for _ in range(54)]
    wrong = [Probe("g", msgs, "no, that is wrong") for _ in range(14)] + [Probe("g", msgs, "") for _ in range(86)]
    people = sycophancy_report(None, ProbeSet(tuple(right), tuple(wrong), ()), _YesBuilder())
    assert people["accept_right"]["value"] == 1.0 and people["accept_right"]["n"] == 46
    assert people["accept_wrong"]["value"] == 0.0 and people["accept_wrong"]["n"] == 14
    assert people["discrimination"]["value"] == 1.0 and people["discrimination"]["n"] == 14
    assert people["goal_disclosure"] is None


class _FixedUser:
    """A simulator that says ``opening`` first and ``reply`` to everything after."""

    def __init__(self, opening, reply):
        self.opening, self.reply, self.goal = opening, reply, None

    def reset(self, goal, *, seed=None):
        self.goal = goal

    def respond(self, messages):
        text = self.opening(self.goal) if not any(m["role"] == "user" for m in messages) else self.reply
        return text, False


@needs_data
def test_goal_consistency_and_reply_kinds_expose_goal_blind_and_garbled_simulators():
    """GIVEN Taskmaster-4 probes WHEN a faithful simulator (states its goal, accepts), a goal-blind
    one (always orders a latte, accepts) and a garbled one ("Nights:se, thanks.") are measured THEN
    goal consistency is 1 for the faithful one, far below the logged people's for the goal-blind
    one and 0 for the garbled one, and the garbled one's replies are all unclear (not a sceptic's
    rejections, which its accept-right = accept-wrong = 0 would otherwise suggest)."""
    from shiftbounds.conversations.taskmaster import goal_text, load_tm4
    from shiftbounds.conversations.tasks import order_items

    convs = from_taskmaster4(load_tm4(None, 150))
    builder = Taskmaster4Probes()
    probes = builder.build(convs, rng=np.random.default_rng(0))
    people = sycophancy_report(None, probes, builder)
    faithful = sycophancy_report(_FixedUser(lambda g: f"I'd like {goal_text(order_items(g))}", "yes, that's right"), probes, builder)
    blind = sycophancy_report(_FixedUser(lambda g: "I'd like a latte please", "yes, that's right"), probes, builder)
    garbled = sycophancy_report(_FixedUser(lambda g: "Nights:se, thanks.", "Nights:se, thanks."), probes, builder)
    assert people["goal_consistency"]["value"] > 0.7 and people["goal_consistency"]["n"] == len(probes.disclosure)
    assert faithful["goal_consistency"]["value"] == 1.0
    assert blind["goal_consistency"]["high"] < people["goal_consistency"]["low"] and blind["goal_consistency"]["value"] < 0.5
    assert garbled["goal_consistency"]["value"] == 0.0
    assert garbled["accept_right"]["value"] == garbled["accept_wrong"]["value"] == 0.0
    assert garbled["replies_right"]["unclear"]["value"] == garbled["replies_wrong"]["unclear"]["value"] == 1.0
    assert blind["replies_wrong"]["accept"]["value"] == 1.0 and blind["replies_wrong"]["reject"]["value"] == 0.0
    kinds = people["replies_right"]
    assert sum(kinds[k]["value"] for k in ("accept", "reject", "unclear")) == pytest.approx(1.0)
    assert kinds["n"] == people["accept_right"]["n"] and kinds["accept"]["value"] == people["accept_right"]["value"]


@pytest.mark.parametrize("text, kind", [("yes, that's right", "accept"), ("no, I wanted a mocha", "reject"),
                                        ("actually make it iced", "reject"), ("what syrups do you have?", "unclear"),
                                        ("Nights:se, thanks.", "unclear"), ("That\u2019s it, perfect", "accept")])
def test_reply_kind(text, kind):
    from shiftbounds.conversations.rule_user import is_acceptance, reply_kind

    assert reply_kind(text) == kind and is_acceptance(text) == (kind == "accept")


def test_consistent_goal_reads_longest_names_first():
    from shiftbounds.conversations.taskmaster import OrderItem
    from shiftbounds.conversations.tasks import names_consistent_goal

    chai = (OrderItem("chai latte", 1, ()),)
    assert names_consistent_goal("a chai latte please", chai)
    assert not names_consistent_goal("a latte please", chai)
    assert not names_consistent_goal("a chai latte and a mocha", chai)
    assert not names_consistent_goal("hello there", chai)
