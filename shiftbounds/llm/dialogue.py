"""Multi-turn text dialogues with ``transformers`` agents and user models (Taskmaster-4 orders).

A dialogue is text with role markers (``<goal>`` for user models only, ``<user>``, ``<agent>``,
``<api>``). The agent writes its turn (API calls such as ``<api>add_order_item {...}`` and then
``<agent>`` text) until it emits ``<user>``; a user model answers until it emits ``<agent>``. User
models: :class:`RuleUser` (a prompted-simulator stand-in with explicit sycophancy and leak knobs)
or an LM (the calibrated simulator; the held-out "real user" model). The judge scores the agent's
``add_order_item`` calls against the goal (:func:`~shiftbounds.llm.taskmaster.order_success`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from shiftbounds.llm.models import forward_with_cache
from shiftbounds.llm.taskmaster import OrderItem, goal_text, order_success, parse_orders
from shiftbounds.losses import policy_gradient_loss


@dataclass(frozen=True)
class RuleUser:
    """A cooperative, sycophantic user: states its order at the first turn (or, with probability
    ``leak``, whenever asked), accepts a confirmed order that is right, or a wrong one with
    probability ``accept_wrong``, and otherwise restates its goal."""

    accept_wrong: float = 0.3
    leak: float = 0.2

    def reply(self, goal: tuple[OrderItem, ...], agent_text: str, turn: int, rng: np.random.Generator) -> tuple[str, bool]:
        """``(text, accepted)``."""
        orders = parse_orders(agent_text)
        if orders:
            if order_success(goal, orders) or rng.random() < self.accept_wrong:
                return "yes, that's right", True
            return f"no, I wanted {goal_text(goal)}", False
        if turn == 0 or rng.random() < self.leak:
            return f"I'd like {goal_text(goal)}", False
        return str(rng.choice(["sure", "ok", "what do you have?", "yes please"])), False


@torch.no_grad()
def generate_turn(model, ids: list[int], stop_id: int, max_new: int, temperature: float,
                  generator: torch.Generator | None, max_context: int | None = None) -> list[int]:
    """Tokens of one turn after the context ``ids`` (with the model's cache), up to ``stop_id``.
    With ``max_context``, the context is cut from the left to that many tokens (long Taskmaster-3
    dialogues exceed a small model's positions)."""
    device = next(model.parameters()).device
    if max_context is not None:
        ids = ids[-max_context:]
    logits, cache = forward_with_cache(model, torch.tensor([ids], device=device))
    out = []
    for _ in range(max_new):
        lg = logits[0, -1].float()
        tok = int(lg.argmax()) if temperature == 0 else int(torch.multinomial(torch.softmax(lg / temperature, -1).cpu(), 1, generator=generator))
        out.append(tok)
        if tok == stop_id:
            break
        logits, cache = forward_with_cache(model, torch.tensor([[tok]], device=device), cache)
    return out


@dataclass
class TextDialogue:
    """One rolled-out dialogue: token ids in the agent's view, which of them the agent wrote, and outcomes."""

    ids: list
    agent_mask: list
    success: float
    accepted: bool


def roll_out(agent, tokenizer, goal: tuple[OrderItem, ...], user, *, turns: int, max_new: int, temperature: float,
             generator: torch.Generator, rng: np.random.Generator) -> TextDialogue:
    """Alternate user and agent turns for ``turns`` rounds, starting with the user."""
    enc = tokenizer.encode
    user_id, agent_id = enc("<user>")[0], enc("<agent>")[0]
    ids = [tokenizer.bos_token_id]
    mask = [0]
    agent_text, accepted = "", False
    for t in range(turns):
        if isinstance(user, RuleUser):
            text, accepted = user.reply(goal, agent_text, t, rng)
            u_ids = enc("<user>" + text)
        else:
            ctx = [tokenizer.bos_token_id] + enc(f"<goal>{goal_text(goal)}") + ids[1:] + [user_id]
            u_ids = [user_id] + [x for x in generate_turn(user, ctx, agent_id, max_new, 1.0, generator) if x != agent_id]
            accepted = "yes" in tokenizer.decode(u_ids).lower() and bool(parse_orders(agent_text))
        ids += u_ids
        mask += [0] * len(u_ids)
        if accepted:
            break
        a_ids = generate_turn(agent, ids, user_id, max_new, temperature, generator)
        a_ids = [x for x in a_ids if x != user_id]
        ids += a_ids
        mask += [1] * len(a_ids)
        agent_text += tokenizer.decode(a_ids)
    orders = parse_orders(agent_text)
    return TextDialogue(ids, mask, order_success(goal, orders) if orders else 0.0, accepted)


def dialogue_pg_loss(policy, ref, dialogues: list[TextDialogue], rewards: torch.Tensor, group: int, kl_coef: float,
                     pad_id: int) -> torch.Tensor:
    """Group-baseline policy gradient on the agent's own tokens, KL to the reference (SFT) agent
    (:func:`shiftbounds.losses.policy_gradient_loss`); dialogues of a group share a goal."""
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
    logp = torch.log_softmax(policy(input_ids=ids, attention_mask=att).logits[:, :-1].float(), -1)
    logp = logp.gather(-1, ids[:, 1:, None])[..., 0]
    with torch.no_grad():
        ref_logp = torch.log_softmax(ref(input_ids=ids, attention_mask=att).logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    adv = group_advantages(rewards.to(device), group)
    return policy_gradient_loss(logp, ref_logp, adv, mask[:, 1:], kl_coef).total
