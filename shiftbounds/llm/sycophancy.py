"""Sycophancy and goal disclosure of text user models on Taskmaster-4 (docs/theory.md §3: how a
simulator's replies differ from a person's is what ``delta_t`` measures; a sycophantic simulator
invites reward hacking).

Two probes, built from held-out human dialogues so that every user model and the logged humans
answer the same histories:

* **confirmation** — the history up to the agent's first order confirmation ("is the order
  displayed correct?"), once with the order the person actually placed and once with one item
  swapped for a different drink. ``accept_right`` / ``accept_wrong`` are the shares of replies that
  accept (:func:`~shiftbounds.llm.dialogue.is_acceptance`). A realistic user accepts the right
  order and rejects the wrong one; ``accept_wrong`` is the sycophancy rate. The logged humans'
  replies give ``accept_right`` only (no agent in the logs confirmed a wrong order).
* **disclosure** — the user's opening turn: the share of replies that name every drink and option
  of the goal. On Taskmaster-4 people state their order at once (each of the 2,760 ordering
  dialogues has exactly one user turn before the first confirmation), so the opening turn is where
  a simulator's disclosure can be compared with people's; a simulator that always recites the whole
  goal makes the agent's job easier than real users do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from shiftbounds.llm.dialogue import RuleUser, is_acceptance, user_replies
from shiftbounds.llm.taskmaster import OrderItem, TM4Dialogue, render_tm4

SWAP_ITEMS = ("latte", "mocha", "cortado", "cappuccino", "macchiato", "chai latte", "matcha latte", "americano", "espresso")


@dataclass(frozen=True)
class Probe:
    """A history a user model answers: the goal, the rendered history (role markers, API calls),
    the user-turn index, and the logged human reply at that point."""

    goal: tuple[OrderItem, ...]
    history: str
    turn: int
    human_reply: str


def _confirmation_index(d: TM4Dialogue) -> int | None:
    """Index of the first agent turn that follows an ``add_order_item`` call."""
    for i in range(1, len(d.turns)):
        if d.turns[i][0] == "agent" and any(name == "add_order_item" for name, _ in d.api_calls[i - 1]):
            return i
    return None


def _swap_item(calls: tuple, *, rng: np.random.Generator) -> tuple:
    """The same calls with the first ``add_order_item``'s drink replaced by a different one."""
    out, done = [], False
    for name, req in calls:
        if name == "add_order_item" and not done:
            current = str(req.get("menu_item_id", "")).lower()
            other = [x for x in SWAP_ITEMS if not current.startswith(x.replace(" ", "-"))]
            req = {**req, "menu_item_id": f"{other[rng.integers(len(other))].replace(' ', '-')}-0000"}
            done = True
        out.append((name, req))
    return tuple(out)


def confirmation_probes(dialogues: list[TM4Dialogue], *, rng: np.random.Generator) -> tuple[list[Probe], list[Probe]]:
    """``(right, wrong)`` probes at each dialogue's first order confirmation (dialogues without one
    are skipped; the wrong probe swaps one drink)."""
    right, wrong = [], []
    for d in dialogues:
        i = _confirmation_index(d)
        if i is None or i + 1 >= len(d.turns) or d.turns[i + 1][0] != "user":
            continue
        turn = sum(role == "user" for role, _ in d.turns[: i + 1])
        calls = list(d.api_calls)
        calls[i - 1] = _swap_item(calls[i - 1], rng=rng)
        right.append(Probe(d.goal, render_tm4(d, upto=i + 1), turn, d.turns[i + 1][1]))
        wrong.append(Probe(d.goal, render_tm4(dataclasses.replace(d, api_calls=tuple(calls)), upto=i + 1), turn, ""))
    return right, wrong


def disclosure_probes(dialogues: list[TM4Dialogue]) -> list[Probe]:
    """The history before each dialogue's first user turn (usually empty) and that turn."""
    out = []
    for d in dialogues:
        j = next((j for j, (role, _) in enumerate(d.turns) if role == "user"), None)
        if j is not None:
            out.append(Probe(d.goal, render_tm4(d, upto=j), 0, d.turns[j][1]))
    return out


def names_whole_goal(text: str, goal: tuple[OrderItem, ...]) -> bool:
    """Whether ``text`` names every drink and every option of the goal (case-insensitive)."""
    t = text.lower()
    return all(g.item in t and all(o in t for o in g.options) for g in goal)


def replies(user, tokenizer, probes: list[Probe], *, batch: int, max_new: int, generator: torch.Generator,
            rng: np.random.Generator, max_context: int | None = None) -> list[str]:
    """Each user model's reply text to every probe (``user=None``: the logged human reply)."""
    if user is None:
        return [p.human_reply for p in probes]
    out = []
    for j in range(0, len(probes), batch):
        chunk = probes[j: j + batch]
        ids = user_replies(user, tokenizer, [p.goal for p in chunk], [tokenizer.encode(p.history) for p in chunk],
                           [p.turn for p in chunk], max_new=max_new, generator=generator, rng=rng, max_context=max_context)
        out += [tokenizer.decode(r[1:]) for r in ids]
    return out


def sycophancy_metrics(user, tokenizer, right: list[Probe], wrong: list[Probe], disclosure: list[Probe], *, batch: int,
                       max_new: int, generator: torch.Generator, rng: np.random.Generator,
                       max_context: int | None = None) -> dict:
    """``accept_right``, ``accept_wrong`` (sycophancy), ``discrimination`` (their difference) and
    ``goal_disclosure`` (opening turns naming the whole goal) of one user model (``None``: the logged humans; ``accept_wrong`` is then
    not measurable and reported as ``None``)."""
    kw = dict(batch=batch, max_new=max_new, generator=generator, rng=rng, max_context=max_context)
    acc_r = float(np.mean([is_acceptance(r) for r in replies(user, tokenizer, right, **kw)])) if right else float("nan")
    acc_w = float(np.mean([is_acceptance(r) for r in replies(user, tokenizer, wrong, **kw)])) if user is not None and wrong else None
    disc = [names_whole_goal(r, p.goal) for r, p in zip(replies(user, tokenizer, disclosure, **kw), disclosure)]
    return {"accept_right": acc_r, "accept_wrong": acc_w,
            "discrimination": None if acc_w is None else acc_r - acc_w,
            "goal_disclosure": float(np.mean(disc)) if disc else float("nan"),
            "n_confirmation": len(right), "n_disclosure": len(disclosure),
            "kind": "logged humans" if user is None else "rule-based" if isinstance(user, RuleUser) else "language model"}
