"""User simulators over chat messages: one protocol, three kinds.

:class:`UserSimulator` is what a trainer needs between agent turns: ``reset(goal, seed=...)`` at
the start of a dialogue, then ``respond(messages) -> (reply, done)`` after every agent turn, where
``messages`` is the dialogue so far as ``[{"role": "user" | "assistant" | "tool", "content"}]``
(the agent is ``assistant``; the simulator's own earlier replies are ``user``).

* :class:`LMUser` — any causal LM with a chat template: the *prompted* simulator (a base or
  instruction model with a persona prompt carrying the goal) and the *calibrated* one (the same,
  after :func:`~shiftbounds.conversations.calibration.calibrate`; :meth:`LMUser.from_pretrained`
  reads the persona from the folder's metadata). The model sees the dialogue with roles flipped
  (:func:`simulator_view`): the agent's turns as ``user``, its own as ``assistant``.
* :class:`HiddenGoalUser` — a synthetic hidden-goal task's explicit user model (memoryless or with
  memory, sycophancy knobs included) on the tasks' text rendering: exact reply laws, for tests and
  for checking the text path against the exact engine.
* :class:`OrderingUser` — the rule-based sycophantic Taskmaster-4 customer
  (:class:`shiftbounds.conversations.rule_user.RuleUser`) behind the protocol.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from shiftbounds.conversations.models import METADATA, chat_ids, load_chat_model, text_ids, user_turn_prefix, user_turn_text
from shiftbounds.conversations.rule_user import RuleUser
from shiftbounds.conversations.sampling import sample_batch
from shiftbounds.conversations.tasks import order_items, placed_orders
from shiftbounds.dialogue.tasks import CLARIFY, ENDING_ACTS, user_acts
from shiftbounds.utils.seeding import numpy_rng, torch_generator

PERSONA = ("You are a user talking to an assistant. Your goal: {goal}. Reply briefly, as the user would, "
           "and never reveal that you are a simulation.")
"""The default persona prompt; ``{goal}`` is replaced by the goal as JSON."""


@runtime_checkable
class UserSimulator(Protocol):
    """The protocol every user simulator follows (see the module docstring)."""

    def reset(self, goal: Any, *, seed: int | None = None) -> None:
        """Start a dialogue with ``goal``; ``seed`` fixes every draw of the dialogue."""

    def respond(self, messages: list[dict]) -> tuple[str, bool]:
        """The user's next message after ``messages`` and whether the user ends the dialogue."""


def goal_text(goal: Any) -> str:
    """A goal as persona text: strings as they are, a mapping with a ``"text"`` entry as that text
    (a goal that carries its own description, e.g. Taskmaster-4's ``"1 iced latte"``), anything else
    as compact JSON."""
    if isinstance(goal, str):
        return goal
    if isinstance(goal, dict) and isinstance(goal.get("text"), str):
        return goal["text"]
    return json.dumps(goal, sort_keys=True)


VIEWS = ("flipped", "as_user")
"""How an LM user reads the dialogue: ``flipped`` — the agent's turns as ``user`` and its own as
``assistant``, so the model speaks in the assistant's slot (the usual way to prompt a chat model as a
user); ``as_user`` — the roles as they are, the model continuing the dialogue in the ``user`` slot
(the way a model pretrained on whole dialogues has seen customers speak)."""


def simulator_view(messages: list[dict], goal: Any, persona: str = PERSONA, view: str = "flipped") -> list[dict]:
    """The dialogue as a user-simulator LM reads it: a system prompt with the persona and goal, then
    the dialogue in the :data:`VIEWS` ``view`` (flipped: the agent's turns as ``user`` and the user's
    as ``assistant``); tool messages are not shown (a user does not see the agent's API calls)."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}; got {view!r}")
    roles = {"assistant": "user", "user": "assistant"} if view == "flipped" else {"assistant": "assistant", "user": "user"}
    out = [{"role": "system", "content": persona.format(goal=goal_text(goal))}]
    return out + [{"role": roles[m["role"]], "content": m["content"]} for m in messages if m["role"] in roles]


def reply_prompt_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict], goal: Any, persona: str = PERSONA, view: str = "flipped") -> list[int]:
    """The token ids an LM user reads before its next reply to ``messages``, in its ``view``."""
    msgs = simulator_view(messages, goal, persona, view)
    return chat_ids(tokenizer, msgs, True) if view == "flipped" else text_ids(tokenizer, user_turn_prefix(tokenizer, msgs))


def reply_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict], goal: Any, reply: str, persona: str = PERSONA,
              view: str = "flipped") -> tuple[list[int], list[int]]:
    """``(prompt, target)`` token ids of a user ``reply`` to ``messages`` in the ``view``: what the
    model reads (:func:`reply_prompt_ids`) and the reply's tokens with its end marker."""
    msgs = simulator_view(messages, goal, persona, view)
    if view == "flipped":
        prompt = chat_ids(tokenizer, msgs, True)
        full = chat_ids(tokenizer, msgs + [{"role": "assistant", "content": reply}], False)
        if full[: len(prompt)] != prompt:
            raise ValueError("the chat template does not render a conversation's prefix as a prefix of the whole")
        return prompt, full[len(prompt):]
    prefix, turn = user_turn_text(tokenizer, msgs, reply)
    prompt, full = text_ids(tokenizer, prefix), text_ids(tokenizer, prefix + turn)
    if full[: len(prompt)] != prompt:
        raise ValueError("the tokenizer merges tokens across the start of the user's turn; a user-role view needs a boundary there")
    return prompt, full[len(prompt):]


class LMUser:
    """A user simulator backed by a causal LM (prompted, or calibrated by SFT).

    Args:
        model, tokenizer: a causal LM and its tokenizer (with a chat template).
        persona: the system prompt; ``{goal}`` is filled in at :meth:`reset`.
        max_new_tokens, temperature: sampling of each reply (temperature 0: greedy).
        done_marker: a reply containing it ends the dialogue.
        stop: ``stop(reply, messages) -> bool``, the task's rule for a reply that ends the dialogue
            (e.g. Taskmaster-4: accepting a placed order), checked besides ``done_marker``.
        name: label in reports (``"prompted"``, ``"calibrated"``).
        view: how the model reads the dialogue (:data:`VIEWS`).
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, persona: str = PERSONA, max_new_tokens: int = 48, temperature: float = 1.0,
                 done_marker: str = "[DONE]", stop: Callable[[str, list[dict]], bool] | None = None,
                 name: str = "prompted", view: str = "flipped") -> None:
        if view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}; got {view!r}")
        if "{goal}" not in persona:
            raise ValueError(f"persona must contain '{{goal}}' where the goal goes; got {persona!r}")
        if temperature < 0 or max_new_tokens < 1:
            raise ValueError(f"need temperature >= 0 and max_new_tokens >= 1; got {temperature}, {max_new_tokens}")
        self.model, self.tokenizer = model, tokenizer
        self.persona, self.max_new_tokens, self.temperature = persona, max_new_tokens, temperature
        self.done_marker, self.stop, self.name, self.view = done_marker, stop, name, view
        self.goal, self._seed, self._calls = None, 0, 0

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, **kw) -> LMUser:
        """Load a simulator from a Hub id or a folder; a folder written by
        :func:`~shiftbounds.conversations.calibration.calibrate` supplies its persona, view and name."""
        model, tok = load_chat_model(name_or_path)
        meta_path = Path(name_or_path) / METADATA
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        kw.setdefault("persona", meta.get("persona", PERSONA))
        kw.setdefault("name", meta.get("kind", "prompted"))
        kw.setdefault("view", meta.get("view", "flipped"))
        return cls(model, tok, **kw)

    def reset(self, goal: Any, *, seed: int | None = None) -> None:
        self.goal, self._seed, self._calls = goal, 0 if seed is None else seed, 0

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """The token ids the model reads before its reply; a history too long for the model's
        positions (less the reply's) loses its oldest turns, never the persona and goal."""
        ids = reply_prompt_ids(self.tokenizer, messages, self.goal, self.persona, self.view)
        config = self.model.config
        limit = (getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None) or 10**9) - self.max_new_tokens
        if len(ids) > limit:
            head = chat_ids(self.tokenizer, simulator_view([], self.goal, self.persona, self.view), False)
            ids = head + ids[len(ids) - (limit - len(head)):]
        return ids

    def clone(self) -> LMUser:
        """A fresh simulator sharing this one's model, tokenizer and settings (a simulator factory
        for rollouts: ``lambda: sim.clone()`` loads the weights once)."""
        twin = copy.copy(self)
        twin.goal, twin._seed, twin._calls = None, 0, 0
        return twin

    def at_temperature(self, temperature: float) -> LMUser:
        """A :meth:`clone` that samples its replies at ``temperature`` (0: greedy): the same
        simulator sampled otherwise, e.g. in training rollouts while the evaluation stays greedy."""
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0; got {temperature}")
        twin = self.clone()
        twin.temperature = temperature
        return twin

    def respond(self, messages: list[dict]) -> tuple[str, bool]:
        return respond_all([self], [messages])[0]

    def batched(self, messages: list[dict]) -> LMUser:
        """The LM user whose sampled reply answers ``messages``: this one (see :func:`respond_all`)."""
        return self

    def finish(self, messages: list[dict], answer: tuple[str, bool]) -> tuple[str, bool]:
        """The reply to ``messages`` from the batched ``answer``: unchanged."""
        return answer

    def batch_key(self) -> tuple:
        """Users with equal keys sample their replies in one batch."""
        return (id(self.model), self.max_new_tokens, self.temperature)

    def answer(self, messages: list[dict], reply: str) -> tuple[str, bool]:
        """``(reply, done)`` for a sampled ``reply``."""
        return reply, self.done_marker in reply or (self.stop is not None and self.stop(reply, messages))


def respond_all(simulators: Sequence[UserSimulator], histories: Sequence[list[dict]]) -> list[tuple[str, bool]]:
    """Every simulator's ``respond`` to its own history, with :class:`LMUser` replies that share a
    model sampled in one batch. Each reply's draws come from its simulator's (seed, call index), so
    a reply does not depend on the rest of the batch.

    A simulator takes part in a batch through two methods it implements: ``batched(messages)``
    returns the :class:`LMUser` whose sampled reply answers this turn (or ``None``: the simulator
    answers with ``respond``), and ``finish(messages, answer)`` turns that user's ``(reply, done)``
    into its own (a wrapper applies its rule there). A simulator without ``batched`` answers with
    ``respond``."""
    out: list[tuple[str, bool] | None] = [None] * len(simulators)
    groups: dict[tuple, list[int]] = {}
    inners = [sim.batched(h) if hasattr(sim, "batched") else None for sim, h in zip(simulators, histories)]
    unbatched = [sim for sim in simulators if not hasattr(sim, "batched") and _holds_lm_user(sim)]
    if len(unbatched) > 1:
        warnings.warn(f"{type(unbatched[0]).__name__} holds an LM user but has no batched() / finish() methods, so "
                      f"{len(unbatched)} dialogues are answered one at a time (much slower); implement them as "
                      "CorrectedUser does to sample in one batch", UserWarning, stacklevel=2)
    for i, lm in enumerate(inners):
        if lm is None:
            out[i] = simulators[i].respond(histories[i])
        else:
            groups.setdefault(lm.batch_key(), []).append(i)
    for idx in groups.values():
        users = [inners[i] for i in idx]
        u0 = users[0]
        tok = u0.tokenizer
        rows = sample_batch(u0.model, [u.prompt_ids(histories[i]) for u, i in zip(users, idx)], u0.max_new_tokens,
                            stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, temperature=u0.temperature,
                            generator=[torch_generator(u._seed, "reply", u._calls) for u in users])
        for u, i, row in zip(users, idx, rows):
            u._calls += 1
            out[i] = simulators[i].finish(histories[i], u.answer(histories[i], tok.decode(row, skip_special_tokens=True).strip()))
    return out


def _holds_lm_user(sim: Any) -> bool:
    """Whether a simulator wraps an :class:`LMUser` (as an attribute) without being one."""
    return not isinstance(sim, LMUser) and any(isinstance(v, LMUser) for v in getattr(sim, "__dict__", {}).values())


class HiddenGoalUser:
    """A hidden-goal task's explicit user model on the text rendering of
    :func:`~shiftbounds.conversations.records.from_hidden_goal` (agent messages are act names such as
    ``"ask:>=2"``; replies are user act names such as ``"yes"`` or ``"quit"``). The reply law is the
    model's own (:meth:`~shiftbounds.dialogue.tasks.UserModel.response`), with its memory read off the
    messages; the dialogue ends when the user accepts or quits, and the goal is a goal name. An agent
    message that is no act of the task (an untrained agent's text) is answered with ``"clarify"``
    and left out of the user's memory, unless ``strict``, where it is an error."""

    def __init__(self, task, model, *, strict: bool = False) -> None:
        self.task, self.model, self.strict = task, model, strict
        self._acts, self._ending = user_acts(task), ENDING_ACTS
        self._agent = {n: i for i, n in enumerate(task.agent_acts)}
        self._user = {n: i for i, n in enumerate(self._acts)}
        self.goal, self._rng = None, numpy_rng(0)

    def clone(self) -> HiddenGoalUser:
        """A fresh user of the same task and model (a user holds its goal and generator)."""
        return HiddenGoalUser(self.task, self.model, strict=self.strict)

    def reset(self, goal: Any, *, seed: int | None = None) -> None:
        if goal not in self.task.goals:
            raise ValueError(f"goal {goal!r} is not one of the task's goals {list(self.task.goals)}")
        self.goal, self._rng = self.task.goals.index(goal), numpy_rng(0 if seed is None else seed, "hidden_goal_user")

    def reply_law(self, messages: list[dict]) -> np.ndarray:
        """``P(user act | history)`` after the last agent message."""
        history, action = [], None
        if not messages or messages[-1]["role"] != "assistant":
            raise ValueError("the last message must be the agent's")
        for m in messages:
            if m["role"] == "assistant":
                action = self._agent.get(m["content"])
                if action is None and self.strict:
                    raise ValueError(f"agent message {m['content']!r} is not an act of {self.task.name}; expected one of "
                                     f"{list(self.task.agent_acts)}")
            elif m["role"] == "user" and action is not None:
                history.append((action, self._user[m["content"]]))
                action = None
        if action is None:  # not an act: the user asks what was meant
            law = np.zeros(len(self._acts))
            law[CLARIFY] = 1.0
            return law
        return self.model.reply(self.task, tuple(history), action, self.goal)

    def respond(self, messages: list[dict]) -> tuple[str, bool]:
        k = int(self._rng.choice(len(self._acts), p=self.reply_law(messages)))
        return self._acts[k], k in self._ending


class OrderingUser:
    """The rule-based sycophantic Taskmaster-4 customer behind the protocol; the goal is a record's
    ``{"order": [{"item", "quantity", "options"}]}``, and an accepted order ends the dialogue."""

    def __init__(self, accept_wrong: float = 0.3, leak: float = 0.2) -> None:
        self.rule = RuleUser(accept_wrong, leak)
        self.goal, self._rng = (), numpy_rng(0)

    def clone(self) -> OrderingUser:
        """A fresh customer with the same knobs (each dialogue needs its own: a customer holds its goal)."""
        return OrderingUser(self.rule.accept_wrong, self.rule.leak)

    def reset(self, goal: Any, *, seed: int | None = None) -> None:
        self.goal = order_items(goal)
        self._rng = numpy_rng(0 if seed is None else seed, "ordering_user")

    def respond(self, messages: list[dict]) -> tuple[str, bool]:
        turn = sum(m["role"] == "user" for m in messages)
        reply = self.rule.reply_to_orders(self.goal, placed_orders(messages), turn, rng=self._rng)
        return reply, reply.startswith("yes, that's right")


class CorrectedUser:
    """A user simulator with one rule on top: when the dialogue's outcome so far is wrong
    (``judge(goal, messages) < 1`` with something ``placed``) and the simulator ``accepts`` it
    anyway, the reply is replaced by ``correction(goal)``, which does not end the dialogue. With an
    LM user that cannot tell a right confirmation from a wrong one, this is the evaluation user
    that can (its name says which rule it carries)."""

    def __init__(self, inner: UserSimulator, *, judge: Callable[[Any, list[dict]], float],
                 placed: Callable[[list[dict]], bool], accepts: Callable[[str], bool],
                 correction: Callable[[Any], str], name: str = "corrected") -> None:
        self.inner, self.judge, self.placed, self.accepts, self.correction, self.name = inner, judge, placed, accepts, correction, name
        self.goal = None

    def clone(self) -> CorrectedUser:
        return CorrectedUser(self.inner.clone(), judge=self.judge, placed=self.placed, accepts=self.accepts, correction=self.correction,
                             name=self.name)

    def reset(self, goal: Any, *, seed: int | None = None) -> None:
        self.goal = goal
        self.inner.reset(goal, seed=seed)

    def respond(self, messages: list[dict]) -> tuple[str, bool]:
        return self.correct(messages, self.inner.respond(messages))

    def batched(self, messages: list[dict]) -> LMUser | None:
        return self.inner.batched(messages) if hasattr(self.inner, "batched") else None

    def finish(self, messages: list[dict], answer: tuple[str, bool]) -> tuple[str, bool]:
        return self.correct(messages, self.inner.finish(messages, answer))

    def correct(self, messages: list[dict], answer: tuple[str, bool]) -> tuple[str, bool]:
        """The rule applied to the inner simulator's ``(reply, done)``."""
        reply, done = answer
        if self.placed(messages) and self.judge(self.goal, messages) < 1 and self.accepts(reply):
            return self.correction(self.goal), False
        return reply, done


class LoggedOpeningUser:
    """A user simulator that opens with a logged person's first message — the goal's ``"opening"``
    entry — and answers every later turn with ``inner``. It separates what an agent does with a real
    request from whether a simulator can state one. With ``share`` < 1 a dialogue opens with the
    logged request with probability ``share`` (drawn from its seed) and otherwise as ``inner`` does.

    Raises:
        ValueError: ``share`` outside [0, 1].
    """

    def __init__(self, inner: UserSimulator, *, name: str = "logged opening", share: float = 1.0) -> None:
        if not 0 <= share <= 1:
            raise ValueError(f"share (of dialogues opened with the logged request) must lie in [0, 1]; got {share}")
        self.inner, self.name, self.share = inner, name, share
        self.goal, self.logged = None, True

    def clone(self) -> LoggedOpeningUser:
        return LoggedOpeningUser(self.inner.clone(), name=self.name, share=self.share)

    def at_temperature(self, temperature: float) -> LoggedOpeningUser:
        """The same user whose inner LM user samples at ``temperature`` (the logged openings are as logged)."""
        return LoggedOpeningUser(self.inner.at_temperature(temperature), name=self.name, share=self.share)

    def reset(self, goal: Any, *, seed: int | None = None) -> None:
        if self.share < 1 and seed is None:
            raise ValueError("a logged-opening user with share < 1 draws which dialogues open with the logged request "
                             "from their seed; got seed None")
        self.logged = self.share >= 1 or bool(numpy_rng(seed, "logged opening").random() < self.share)
        if self.logged and (not isinstance(goal, dict) or not isinstance(goal.get("opening"), str)):
            raise ValueError(f"a logged-opening user needs a goal with an 'opening' string; got {goal!r}")
        self.goal = goal
        self.inner.reset(goal, seed=seed)

    def respond(self, messages: list[dict]) -> tuple[str, bool]:
        if not messages and self.logged:
            return self.goal["opening"], False
        return self.inner.respond(messages)

    def batched(self, messages: list[dict]) -> LMUser | None:
        return self.inner.batched(messages) if (messages or not self.logged) and hasattr(self.inner, "batched") else None

    def finish(self, messages: list[dict], answer: tuple[str, bool]) -> tuple[str, bool]:
        return self.inner.finish(messages, answer)
