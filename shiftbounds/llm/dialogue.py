"""Multi-turn text dialogues with ``transformers`` agents and user models (Taskmaster-4 orders).

A dialogue is text with role markers (``<goal>`` for user models only, ``<user>``, ``<agent>``,
``<api>``). The agent writes its turn (API calls such as ``<api>add_order_item {...}`` and then
``<agent>`` text) until it emits ``<user>``; a user model answers until it emits ``<agent>``. User
models: :class:`RuleUser` (a prompted-simulator stand-in with explicit sycophancy and leak knobs)
or an LM (the calibrated simulator; the held-out "real user" model). The judge scores the agent's
``add_order_item`` calls against the goal (:func:`~shiftbounds.llm.taskmaster.order_success`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from shiftbounds.llm.sampling import sample_batch
from shiftbounds.llm.taskmaster import OrderItem, goal_text, order_success, parse_orders
from shiftbounds.losses import PolicyGradientLoss, policy_gradient_loss, token_log_probs


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


def is_acceptance(text: str) -> bool:
    """Whether a user turn accepts the order shown: an affirmative cue ("yes", "correct", "looks
    good", ...) and no negative one ("no", "wrong", "actually", "change", ...). It marks 91.4 % of the
    2,760 Taskmaster-4 human replies to the agent's first order confirmation as accepting; most of
    the rest ask about syrups or switch to decaf (``tests/test_llm_rollouts.py`` measures the rate)."""
    t = text.lower().replace("\u2019", "'")
    return bool(_POSITIVE.search(t)) and not _NEGATIVE.search(t)


def user_prompt(goal: tuple[OrderItem, ...], history: str) -> str:
    """What an LM user model reads before its turn: the history, then ``<goal>`` and the goal. The
    goal comes last so that cutting a long history from the left never drops it (training pairs
    and rollouts use this one layout)."""
    return f"{history}<goal>{goal_text(goal)}"


def user_replies(user, tokenizer, goals: list[tuple[OrderItem, ...]], histories: list[list[int]], turns: list[int], *,
                 max_new: int, generator: torch.Generator, rng: np.random.Generator,
                 max_context: int | None = None) -> list[list[int]]:
    """One user turn per history (token ids after the beginning-of-text marker), starting with
    ``<user>``: from :class:`RuleUser` (which reads the orders in the history) or sampled at
    temperature 1 from an LM user model prompted with :func:`user_prompt`."""
    enc = tokenizer.encode
    user_id, agent_id = enc("<user>")[0], enc("<agent>")[0]
    if isinstance(user, RuleUser):
        return [enc("<user>" + user.reply(g, tokenizer.decode(h), t, rng=rng)) for g, h, t in zip(goals, histories, turns)]
    prompts = [[tokenizer.bos_token_id] + list(h) + enc(user_prompt(g, "")) + [user_id] for g, h in zip(goals, histories)]
    rows = sample_batch(user, prompts, max_new, stop_ids=[agent_id, tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id,
                        temperature=1.0, generator=generator, max_context=max_context)
    return [[user_id] + [x for x in r if x not in (agent_id, tokenizer.eos_token_id)] for r in rows]


@dataclass
class TextDialogue:
    """One rolled-out dialogue: token ids in the agent's view, which of them the agent wrote, and outcomes."""

    ids: list
    agent_mask: list
    success: float
    accepted: bool


def roll_out_batch(agent, tokenizer, goals: list[tuple[OrderItem, ...]], user, *, turns: int, max_new: int,
                   temperature: float, generator: torch.Generator, rng: np.random.Generator,
                   max_context: int | None = None) -> list[TextDialogue]:
    """Alternate user and agent turns for ``turns`` rounds, starting with the user, for every goal
    at once (each turn is one batched, cached sampling call over the dialogues still open). A
    dialogue ends when the user accepts an order; its success is the judge's verdict on the
    agent's ``add_order_item`` calls."""
    enc = tokenizer.encode
    user_id = enc("<user>")[0]
    ids = [[tokenizer.bos_token_id] for _ in goals]
    masks = [[0] for _ in goals]
    accepted = [False] * len(goals)
    for t in range(turns):
        open_ = [i for i in range(len(goals)) if not accepted[i]]
        if not open_:
            break
        replies = user_replies(user, tokenizer, [goals[i] for i in open_], [ids[i][1:] for i in open_], [t] * len(open_),
                               max_new=max_new, generator=generator, rng=rng, max_context=max_context)
        for i, r in zip(open_, replies):
            accepted[i] = bool(parse_orders(tokenizer.decode(ids[i]))) and is_acceptance(tokenizer.decode(r[1:]))
            ids[i] += r
            masks[i] += [0] * len(r)
        open_ = [i for i in open_ if not accepted[i]]
        if not open_:
            break
        rows = sample_batch(agent, [ids[i] for i in open_], max_new, stop_ids=[user_id, tokenizer.eos_token_id],
                            pad_id=tokenizer.pad_token_id, temperature=temperature, generator=generator, max_context=max_context)
        for i, r in zip(open_, rows):
            r = [x for x in r if x not in (user_id, tokenizer.eos_token_id)]
            ids[i] += r
            masks[i] += [1] * len(r)
    out = []
    for g, i, m, acc in zip(goals, ids, masks, accepted):
        orders = parse_orders(tokenizer.decode([x for x, a in zip(i, m) if a]))
        out.append(TextDialogue(i, m, order_success(g, orders) if orders else 0.0, acc))
    return out


def dialogue_pg_loss(policy, ref, dialogues: list[TextDialogue], rewards: torch.Tensor, group: int, kl_coef: float,
                     pad_id: int) -> PolicyGradientLoss:
    """Group-baseline policy gradient on the agent's own tokens, sampled KL to the reference (SFT)
    agent (:func:`shiftbounds.losses.policy_gradient_loss`, with its named parts); dialogues of a
    group share a goal."""
    from shiftbounds.losses import group_advantages

    device = next(policy.parameters()).device
    T = max(len(d.ids) for d in dialogues)
    ids = torch.full((len(dialogues), T), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(dialogues), T), device=device)
    att = torch.zeros((len(dialogues), T), dtype=torch.long, device=device)
    for i, d in enumerate(dialogues):
        ids[i, : len(d.ids)] = torch.tensor(d.ids)
        mask[i, : len(d.ids)] = torch.tensor(d.agent_mask, dtype=torch.float)
        att[i, : len(d.ids)] = 1
    logp = token_log_probs(policy(input_ids=ids, attention_mask=att).logits, ids, shift=True)
    with torch.no_grad():
        ref_logp = token_log_probs(ref(input_ids=ids, attention_mask=att).logits, ids, shift=True)
    adv = group_advantages(rewards.to(device), group)
    return policy_gradient_loss(logp, adv, mask[:, 1:], kl_coef, ref_log_probs=ref_logp)
