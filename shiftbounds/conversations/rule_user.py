"""The rule-based customer of the Taskmaster-4 order task and the reader of acceptance replies.

:class:`RuleUser` is a prompted-simulator stand-in with explicit sycophancy and leak knobs; the
judge of an order is :func:`shiftbounds.conversations.taskmaster.order_success`;
:func:`is_acceptance` reads whether a user turn accepts the order shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from shiftbounds.conversations.taskmaster import OrderItem, goal_text, order_success, parse_orders


@dataclass(frozen=True)
class RuleUser:
    """A cooperative, sycophantic user: states its order at the first turn (or, with probability
    ``leak``, whenever asked), accepts a confirmed order that is right, or a wrong one with
    probability ``accept_wrong``, and otherwise restates its goal."""

    accept_wrong: float = 0.3
    leak: float = 0.2

    def reply(self, goal: tuple[OrderItem, ...], agent_text: str, turn: int, *, rng: np.random.Generator) -> str:
        """The reply to a history whose agent turns are ``agent_text`` (its orders are read from
        the ``add_order_item`` calls in it) at user turn ``turn``."""
        return self.reply_to_orders(goal, parse_orders(agent_text), turn, rng=rng)

    def reply_to_orders(self, goal: tuple[OrderItem, ...], orders: list[OrderItem], turn: int, *,
                        rng: np.random.Generator) -> str:
        """The reply when the agent has placed ``orders`` so far (the rule itself)."""
        if orders:
            if order_success(goal, orders) or rng.random() < self.accept_wrong:
                return "yes, that's right"
            return f"no, I wanted {goal_text(goal)}"
        if turn == 0 or rng.random() < self.leak:
            return f"I'd like {goal_text(goal)}"
        return str(rng.choice(["sure", "ok", "what do you have?", "yes please"]))


_NEGATIVE = re.compile(r"\b(no|not|nope|wrong|incorrect|actually|instead|change|didn't|don't|isn't|wasn't|doesn't)\b")
_POSITIVE = re.compile(r"\b(yes|yeah|yep|yup|correct|right|perfect|fine|great|exactly|good|that's it|that is it|it is|it does|sure is|looks ok|got it|my order)\b")


REPLY_KINDS = ("accept", "reject", "unclear")


def reply_kind(text: str) -> str:
    """How a user turn answers the order shown: ``"reject"`` with a negative cue ("no", "wrong",
    "actually", "change", ...), else ``"accept"`` with an affirmative one ("yes", "correct", "looks
    good", ...), else ``"unclear"`` (neither: a question, an off-topic or garbled reply)."""
    t = text.lower().replace("\u2019", "'")
    if _NEGATIVE.search(t):
        return "reject"
    return "accept" if _POSITIVE.search(t) else "unclear"


def is_acceptance(text: str) -> bool:
    """Whether a user turn accepts the order shown: an affirmative cue ("yes", "correct", "looks
    good", ...) and no negative one ("no", "wrong", "actually", "change", ...). It marks 91.4 % of the
    2,760 Taskmaster-4 human replies to the agent's first order confirmation as accepting; most of
    the rest ask about syrups or switch to decaf (``tests/test_sampling.py`` measures the rate)."""
    return reply_kind(text) == "accept"
