"""The share of GRPO groups that carry a success gradient: the subset formula against the
enumeration of every group of draws, and its corners."""

from __future__ import annotations

import itertools
import json
import warnings
from math import comb

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shiftbounds.conversations.signal import mixed_group_share


def _enumerated(successes: list[int], draws: int, group: int) -> float:
    shares = []
    for s in successes:
        outcomes = [1] * s + [0] * (draws - s)
        groups = list(itertools.combinations(range(draws), group))
        shares.append(np.mean([len({outcomes[i] for i in g}) == 2 for g in groups]))
    return float(np.mean(shares))


@st.composite
def _cases(draw):
    draws = draw(st.integers(2, 8))
    group = draw(st.integers(2, draws))
    return draw(st.lists(st.integers(0, draws), min_size=2, max_size=12)), draws, group


@settings(max_examples=80, deadline=None)
@given(_cases())
@example(([0, 4], 4, 4))  # never and always: no group is mixed
@example(([1, 1], 2, 2))  # one success of two: every pair is mixed
def test_mixed_group_share_equals_the_enumeration_of_groups(case):
    successes, draws, group = case
    assert mixed_group_share(successes, draws, group) == pytest.approx(_enumerated(successes, draws, group), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 0.95), st.integers(2, 6))
def test_mixed_group_share_estimates_the_chance_a_fresh_group_is_mixed(p, group):
    """Unbiased: its mean over every outcome of the draws is 1 - p^g - (1-p)^g."""
    draws = group + 2
    expected = sum(comb(draws, s) * p ** s * (1 - p) ** (draws - s) * mixed_group_share([s], draws, group) for s in range(draws + 1))
    assert expected == pytest.approx(1 - p ** group - (1 - p) ** group, abs=1e-12)


@pytest.mark.parametrize(("successes", "draws", "group", "match"), [
    ([1], 4, 1, "2 <= group <= draws"), ([1], 2, 3, "2 <= group <= draws"),
    ([5], 4, 2, r"counts in \[0, 4\]"), ([], 4, 2, r"counts in \[0, 4\]"), ([-1], 4, 2, r"counts in \[0, 4\]")])
def test_mixed_group_share_refuses_bad_input(successes, draws, group, match):
    with pytest.raises(ValueError, match=match):
        mixed_group_share(successes, draws, group)


def test_rollout_signal_warns_when_no_group_carries_a_success_gradient(monkeypatch):
    """An agent that always fails (or a sampler that always gives one answer) leaves every group
    uniform: the probe reports a mixed share of 0 and warns; one that varies does not warn."""
    from shiftbounds.conversations import signal
    from shiftbounds.conversations.records import Conversation

    convs = [Conversation(str(i), {"order": []}, []) for i in range(3)]

    def fake(rewards):
        return lambda *a, **k: {"mean": float(np.mean(rewards(k["seed"]))), "rewards": rewards(k["seed"])}

    monkeypatch.setattr(signal, "evaluate_agent", fake(lambda seed: [0.0, 0.0, 0.0]))
    with pytest.warns(RuntimeWarning, match="no gradient for success"):
        out = signal.rollout_signal(None, None, convs, None, None, draws=2, group=2, temperature=1.0, max_turns=1, max_new_tokens=1)
    assert out["mixed_group_share"] == 0 and out["goals_by_successes"] == {"0": 3, "1": 0, "2": 0}
    monkeypatch.setattr(signal, "evaluate_agent", fake(lambda seed: [float(seed % 2), 0.0, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = signal.rollout_signal(None, None, convs, None, None, draws=4, group=2, temperature=1.0, max_turns=1, max_new_tokens=1)
    assert out["goals_by_successes"]["0"] == out["goals_by_successes"]["4"] == 1 and out["mixed_group_share"] > 0
    with pytest.raises(ValueError, match="2 <= group <= draws"):
        signal.rollout_signal(None, None, convs, None, None, draws=2, group=3, temperature=1.0, max_turns=1, max_new_tokens=1)


def _order(item: str, quantity: int = 1, options: tuple = ()) -> str:
    call = {"menu_item_id": item, "quantity": quantity, "attributes": [{"option": o} for o in options]}
    return "add_order_item " + json.dumps(call)


@pytest.mark.parametrize(("turns", "mode"), [
    (["hello", "bye"], "no order placed"),
    ([_order("latte", 2, ("oat milk",)), "bye"], "success"),
    (["what would you like?", _order("latte", 2, ("oat milk",))], "success"),
    ([_order("mocha", 2, ("oat milk",))], "first order: wrong drinks"),
    ([_order("latte", 1, ("oat milk",))], "first order: wrong quantity"),
    ([_order("latte", 2, ())], "first order: wrong options"),
    ([_order("latte", 2, ("oat milk",)), _order("latte", 2, ("oat milk",))], "first order right, more ordered after"),
    ([_order("latte", 1, ("oat milk",)), _order("latte", 1, ("oat milk",))], "first order: wrong quantity"),
])
def test_taskmaster4_failure_mode_names_what_the_first_order_got_wrong(turns, mode):
    """Planted dialogues, one per mode; a right order placed in two halves is a success (the judge
    counts the whole dialogue), and its first half is what a failing dialogue is blamed on."""
    from shiftbounds.conversations.taskmaster import OrderItem, order_item
    from shiftbounds.conversations.tasks import FAILURE_MODES, taskmaster4_failure_mode

    goal = {"order": [{"item": "latte", "quantity": 2, "options": ["oat milk"]}]}
    assert order_item(json.loads(_order("latte", 2, ("oat milk",))[len("add_order_item "):])) == OrderItem("latte", 2, ("oat milk",))
    messages = [{"role": "user", "content": "hi"}]
    for t in turns:
        messages += [{"role": "assistant", "content": t}, {"role": "user", "content": "yes"}]
    assert taskmaster4_failure_mode(goal, messages) == mode and mode in FAILURE_MODES


def test_orders_at_first_turn_reads_the_agents_first_turn_after_the_opening():
    """An agent that orders at once, one that asks first (its later order does not count), a
    logged call kept as a tool message after the turn, and dialogues without such a turn."""
    from shiftbounds.conversations.tasks import orders_at_first_turn

    user, bye = {"role": "user", "content": "a latte"}, {"role": "assistant", "content": "bye"}
    order = {"role": "assistant", "content": _order("latte")}
    assert orders_at_first_turn([user, order, user, bye]) is True
    assert orders_at_first_turn([user, {"role": "assistant", "content": "which milk?"}, user, order]) is False
    tool = {"role": "tool", "content": json.dumps({"add_order_item": {"menu_item_id": "latte"}})}
    assert orders_at_first_turn([{"role": "system", "content": "s"}, user, {"role": "assistant", "content": "ok"}, tool, user]) is True
    assert orders_at_first_turn([order, user]) is None and orders_at_first_turn([user]) is None


def test_asking_credits_a_user_that_states_its_goal_and_not_one_that_parrots_the_question():
    """The --ask measure of experiments.disclosure_probe against users built to pass or fool it: one
    that answers with its order is credited at every silent opening; one that repeats the agent's
    question (which here names the whole goal) earns nothing; disclosed openings are not asked."""
    from experiments.disclosure_probe import asked
    from shiftbounds.conversations.tasks import Probe, Taskmaster4Probes

    class Scripted:
        def __init__(self, reply):
            self.reply = reply

        def reset(self, goal, *, seed=None):
            self.goal = goal

        def respond(self, messages):
            return self.reply(self.goal, messages), False

    goal = {"order": [{"item": "latte", "quantity": 1, "options": ["oat milk"]}]}
    probes = [Probe(goal, ({"role": "assistant", "content": "hello"},)) for _ in range(3)]
    openings = ["a latte please", "hi", "a latte with oat milk"]
    ask = "A latte with oat milk?"
    discloses = Taskmaster4Probes().discloses
    truthful = asked(Scripted(lambda g, m: "a latte with oat milk"), probes, openings, ask, discloses, 0)
    parrot = asked(Scripted(lambda g, m: m[-1]["content"]), probes, openings, ask, discloses, 0)
    assert truthful["asked"] == parrot["asked"] == 2
    assert truthful["whole goal after asking"] == 1.0 and parrot["whole goal after asking"] == 0.0
    assert asked(Scripted(lambda g, m: ""), probes[2:], openings[2:], ask, discloses, 0)["whole goal after asking"] is None
