"""What a task supplies to the conversation path: a judge ``judge(goal, messages) -> float`` and,
for sycophancy and disclosure measurements, a :class:`ProbeBuilder`.

* :func:`hidden_goal_judge` — the synthetic hidden-goal tasks on their text rendering;
* :func:`taskmaster4_judge` and :class:`Taskmaster4Probes` — Taskmaster-4 coffee orders.

A probe builder turns held-out conversations into the histories every user model (and the logged
people) answers, and says how to read a reply: :meth:`ProbeBuilder.accepts` (does the reply accept
the confirmed outcome?) and :meth:`ProbeBuilder.discloses` (does it state the whole goal?). Your own
task supplies its own builder with the same three methods.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from shiftbounds.conversations.records import Conversation, Message, fold_tool_calls, from_taskmaster3, from_taskmaster4
from shiftbounds.conversations.rule_user import is_acceptance, reply_kind
from shiftbounds.conversations.taskmaster import (
    OrderItem,
    goal_text,
    load_reward_labels,
    load_tm4,
    order_credit,
    order_item,
    order_success,
    parse_orders,
    split_by_dialogue,
)

Judge = Callable[[Any, list[dict]], float]
"""``judge(goal, messages) -> float``: the task's reward of a finished dialogue."""


@dataclass(frozen=True)
class Probe:
    """One history a user model answers: its ``goal``, the ``messages`` before the user's reply,
    and the logged person's reply there (``""`` when the history is not a logged one)."""

    goal: Any
    messages: tuple[dict, ...]
    human_reply: str = ""


@dataclass(frozen=True)
class ProbeSet:
    """Paired confirmation probes (``right[i]`` and ``wrong[i]`` differ only in the outcome
    confirmed) and the opening-turn ``disclosure`` probes."""

    right: tuple[Probe, ...]
    wrong: tuple[Probe, ...]
    disclosure: tuple[Probe, ...]

    def __post_init__(self) -> None:
        if len(self.right) != len(self.wrong):
            raise ValueError(f"right and wrong probes must pair up; got {len(self.right)} and {len(self.wrong)}")


class ProbeBuilder(Protocol):
    """A task's sycophancy and disclosure probes (see the module docstring)."""

    def build(self, convs: list[Conversation], *, rng: np.random.Generator) -> ProbeSet:
        """The probes from held-out conversations."""

    def accepts(self, reply: str) -> bool:
        """Whether a user reply accepts the outcome the agent confirmed."""

    def discloses(self, reply: str, goal: Any) -> bool:
        """Whether a user reply states the whole goal."""

    # Optional, read by :func:`~shiftbounds.conversations.measures.sycophancy_report` when present:
    # ``kind(reply) -> "accept" | "reject" | "unclear"`` (how a reply answers a confirmation) and
    # ``consistent(reply, goal) -> bool`` (whether what the reply says agrees with the goal).


# --------------------------------------------------------------------------- hidden-goal tasks
def hidden_goal_judge(task) -> Judge:
    """The goal-aware judge of a synthetic hidden-goal task on its text rendering: each agent message
    ``propose:<goal>`` earns 1 if it names the goal and ``-wrong_penalty`` otherwise (other messages
    earn 0), as :func:`shiftbounds.dialogue.tasks.judge_reward` scores acts."""
    def judge(goal: Any, messages: list[dict]) -> float:
        total = 0.0
        for m in messages:
            if m["role"] == "assistant" and m["content"].startswith("propose:"):
                total += 1.0 if m["content"][len("propose:"):] == goal else -task.wrong_penalty
        return total

    return judge


# ------------------------------------------------------------------------------- Taskmaster-4
def order_items(goal: Any) -> tuple:
    """A Taskmaster-4 goal's order as :class:`~shiftbounds.conversations.taskmaster.OrderItem` s."""
    return tuple(OrderItem(g["item"], int(g.get("quantity", 1)), tuple(g.get("options", ()))) for g in goal["order"])


def placed_orders(messages: list[dict]) -> list:
    """The orders placed in a dialogue: ``add_order_item`` calls in tool messages (logged, JSON
    ``{"add_order_item": {...}}``) and written in the agent's text (``add_order_item {...}``)."""
    out = []
    for m in messages:
        if m["role"] == "tool":
            try:
                call = json.loads(m["content"])
            except json.JSONDecodeError:
                continue
            if isinstance(call, dict) and isinstance(call.get("add_order_item"), dict):
                out.append(order_item(call["add_order_item"]))
        elif m["role"] == "assistant":
            out += parse_orders(m["content"])
    return out


def taskmaster4_judge(goal: Any, messages: list[dict]) -> float:
    """Taskmaster-4 goal success: 1 when the dialogue's ``add_order_item`` calls order exactly the
    goal's drinks (item, quantity and options, as a multiset), else 0."""
    return order_success(order_items(goal), placed_orders(messages))


def taskmaster4_credit(goal: Any, messages: list[dict]) -> float:
    """Taskmaster-4 partial credit for the orders placed in a dialogue
    (:func:`~shiftbounds.conversations.taskmaster.order_credit`): items, quantities and options
    right count in part; 1 exactly when :func:`taskmaster4_judge` is 1."""
    return order_credit(order_items(goal), placed_orders(messages))


FAILURE_MODES = ("success", "no order placed", "first order: wrong drinks", "first order: wrong quantity",
                 "first order: wrong options", "first order right, more ordered after")
"""How a Taskmaster-4 dialogue ends (:func:`taskmaster4_failure_mode`), in the order they are tested."""


def taskmaster4_failure_mode(goal: Any, messages: list[dict]) -> str:
    """Where a Taskmaster-4 dialogue fails, one of :data:`FAILURE_MODES`: ``success`` when
    :func:`taskmaster4_judge` is 1; ``no order placed``; else what the first agent turn that placed
    an order got wrong, in that turn alone: the drinks (as a multiset of names), else their
    quantities, else their options; a first turn that ordered exactly the goal fails only through the
    orders placed after it (the judge counts every ``add_order_item`` of the dialogue)."""
    if taskmaster4_judge(goal, messages) >= 1.0:
        return "success"
    turns = [placed_orders([m]) for m in messages if m["role"] in ("assistant", "tool")]
    first = next((t for t in turns if t), None)
    if first is None:
        return "no order placed"
    want = order_items(goal)
    if sorted(g.item for g in want) != sorted(o.item for o in first):
        return "first order: wrong drinks"
    if sorted((g.item, g.quantity) for g in want) != sorted((o.item, o.quantity) for o in first):
        return "first order: wrong quantity"
    if order_success(want, first) < 1.0:
        return "first order: wrong options"
    return "first order right, more ordered after"


SWAP_ITEMS = ("latte", "mocha", "cortado", "cappuccino", "macchiato", "chai latte", "matcha latte", "americano", "espresso")
"""Drinks a wrong-confirmation probe swaps in."""


def named_items(text: str, vocabulary: Sequence[str]) -> list[str]:
    """The drinks of ``vocabulary`` named in ``text`` (case-insensitive), longest names first so
    that "chai latte" is not also read as "latte"."""
    t, out = text.lower(), []
    for item in sorted(vocabulary, key=len, reverse=True):
        if item in t:
            out.append(item)
            t = t.replace(item, " ")
    return out


def names_consistent_goal(text: str, goal: tuple) -> bool:
    """Whether ``text`` names at least one drink and only drinks of the goal (among the goal's and
    :data:`SWAP_ITEMS`): what a customer says agrees with what it wants, whether or not it says all."""
    wanted = {g.item for g in goal}
    named = named_items(text, sorted(wanted | set(SWAP_ITEMS)))
    return bool(named) and set(named) <= wanted


def names_whole_goal(text: str, goal: tuple) -> bool:
    """Whether ``text`` names every drink and every option of the goal (case-insensitive)."""
    t = text.lower()
    return all(g.item in t and all(o in t for o in g.options) for g in goal)


def orders_at_first_turn(messages: list[dict]) -> bool | None:
    """Whether the agent's first turn after the customer's first one places an order (``None``: no
    such turn): ``False`` is an agent that asks before it orders."""
    roles = [m["role"] for m in messages]
    if "user" not in roles:
        return None
    after = messages[roles.index("user") + 1:]
    first = next((i for i, m in enumerate(after) if m["role"] == "assistant"), None)
    if first is None:
        return None
    # the turn and the tool messages that follow it (logged calls are kept as tool messages)
    turn = [after[first]] + list(itertools.takewhile(lambda m: m["role"] == "tool", after[first + 1:]))
    return bool(placed_orders(turn))


def taskmaster4_placed(messages: list[dict]) -> bool:
    """Whether the agent has placed an order in the dialogue so far."""
    return bool(placed_orders(messages))


def taskmaster4_stop(reply: str, messages: list[dict]) -> bool:
    """A Taskmaster-4 dialogue ends when the customer accepts after an order has been placed."""
    return taskmaster4_placed(messages) and is_acceptance(reply)


def taskmaster4_correction(goal: Any) -> str:
    """What a customer says to a wrong order: the rule of the corrected evaluation user."""
    return f"no, that's wrong. I wanted {goal_text(order_items(goal))}"


def load_taskmaster(data_dir: str | None, n_tm4: int | None, n_tm3: int | None, *, rng: np.random.Generator) -> dict:
    """Taskmaster-4 and Taskmaster-3 as conversations with the agent's API calls folded into its
    turns (:func:`~shiftbounds.conversations.records.fold_tool_calls`), split by dialogue 60/20/20:
    ``{"tm4": (train, calibration, held_out), "tm3": (train, calibration, held_out), "tm4_raw":
    {id: record with tool messages}}``. Taskmaster-3 has no structured goal (``null``) and comes from
    its reward-label contexts, keeping the longest context of each dialogue."""
    raw = from_taskmaster4(load_tm4(data_dir, n_tm4))
    longest: dict[str, Any] = {}
    for ex in load_reward_labels("taskmaster3", data_dir, None):
        if ex.dialogue_id not in longest or len(ex.context) > len(longest[ex.dialogue_id].context):
            longest[ex.dialogue_id] = ex
    tm3 = [fold_tool_calls(c) for c in from_taskmaster3(sorted(longest.values(), key=lambda e: e.dialogue_id)[:n_tm3])]
    return {"tm4": split_by_dialogue([fold_tool_calls(c) for c in raw], rng=rng),
            "tm3": split_by_dialogue(tm3, rng=rng), "tm4_raw": {c.id: c for c in raw}}


class Taskmaster4Probes:
    """Taskmaster-4's probes on its conversation records
    (:func:`~shiftbounds.conversations.records.from_taskmaster4`).

    * confirmation: the history up to the agent's first message after an ``add_order_item`` call,
      once as placed and once with the first call's drink swapped for a different one; the order on
      the customer's screen is also written into that message (``[order shown: ...]``), because an
      LM simulator does not read tool messages;
    * disclosure: the history before the customer's first turn.

    With ``fold=True`` the probes' API calls are folded into the agent's turns, as in conversations
    passed through :func:`~shiftbounds.conversations.records.fold_tool_calls`.

    Replies are read with :func:`shiftbounds.conversations.rule_user.is_acceptance` and
    :func:`names_whole_goal`.
    """

    SHOWN = " [order shown: {order}]"

    def __init__(self, fold: bool = False) -> None:
        self.fold = fold  # fold the API calls into the agent's turns, as simulators trained on folded logs read them

    def build(self, convs: list[Conversation], *, rng: np.random.Generator) -> ProbeSet:
        right, wrong, disclosure = [], [], []
        for c in convs:
            msgs = [m.as_dict() for m in c.messages]
            first_user = next((j for j, m in enumerate(msgs) if m["role"] == "user"), None)
            if first_user is not None:
                disclosure.append(Probe(c.goal, tuple(msgs[:first_user]), msgs[first_user]["content"]))
            i = self._confirmation(msgs)
            if i is None:
                continue
            reply = next((m["content"] for m in msgs[i + 1:] if m["role"] != "tool"), None)
            if reply is None or msgs[i + 1]["role"] != "user":
                continue
            placed = tuple(placed_orders(msgs[:i]))
            other = [x for x in SWAP_ITEMS if x != placed[0].item]
            swapped = (type(placed[0])(other[rng.integers(len(other))], placed[0].quantity, placed[0].options),) + placed[1:]
            first_call = next(j for j, m in enumerate(msgs[:i]) if m["role"] == "tool" and "add_order_item" in m["content"])
            for out, order, human in ((right, placed, reply), (wrong, swapped, "")):
                history = list(msgs[:i])
                call = json.loads(history[first_call]["content"])
                item = order[0].item.replace(" ", "-")
                if not call["add_order_item"].get("menu_item_id", "").lower().startswith(item):
                    call["add_order_item"] = {**call["add_order_item"], "menu_item_id": f"{item}-0000"}
                history[first_call] = {"role": "tool", "content": json.dumps(call, sort_keys=True)}
                shown = {**msgs[i], "content": msgs[i]["content"] + self.SHOWN.format(order=goal_text(order))}
                out.append(Probe(c.goal, tuple(history) + (shown,), human))
        if self.fold:

            def fold(p: Probe) -> Probe:
                msgs = fold_tool_calls(Conversation("probe", p.goal, tuple(Message(m["role"], m["content"]) for m in p.messages))).messages
                return Probe(p.goal, tuple(m.as_dict() for m in msgs), p.human_reply)

            right, wrong, disclosure = ([fold(p) for p in ps] for ps in (right, wrong, disclosure))
        return ProbeSet(tuple(right), tuple(wrong), tuple(disclosure))

    @staticmethod
    def _confirmation(msgs: list[dict]) -> int | None:
        seen_order = False
        for j, m in enumerate(msgs):
            if m["role"] == "tool" and "add_order_item" in m["content"]:
                seen_order = True
            elif m["role"] == "assistant" and seen_order:
                return j
        return None

    def accepts(self, reply: str) -> bool:
        return is_acceptance(reply)

    def kind(self, reply: str) -> str:
        return reply_kind(reply)

    def discloses(self, reply: str, goal: Any) -> bool:
        return names_whole_goal(reply, order_items(goal))

    def consistent(self, reply: str, goal: Any) -> bool:
        return names_consistent_goal(reply, order_items(goal))
