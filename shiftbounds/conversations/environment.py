"""A user simulator as an environment for TRL's ``GRPOTrainer(environment_factory=...)``.

TRL's agent API builds one environment per rollout, calls ``reset(**row)`` with the dataset row
(its returned string is appended to the prompt's last message), exposes the environment's public
methods as tools the model calls, and, when the environment has ``get_reward()``, lets it own the
reward. :class:`SimulatedUserEnvironment` is that environment for any simulator following the
package's :class:`~shiftbounds.conversations.simulators.UserSimulator` protocol (prompted,
calibrated, rule-based):

* ``reset(goal_json=..., seed=..., **row)`` starts the simulated user on the row's goal and, with
  ``user_first``, returns its opening;
* ``send_message(message)`` is the one tool: the agent's message goes to the user, the user's reply
  comes back (and ``"[the user has left]"`` once the user ends the dialogue or ``max_turns`` is used);
* ``get_reward()`` is the task's ``judge(goal, transcript)``;
* ``transcript`` keeps the dialogue in the logs' format (the agent as ``assistant``), for
  evaluation.

:func:`environment_factory` makes the zero-argument factory TRL takes, and
:func:`environment_dataset` the rows (the prompt, the goal as JSON text, a seed per row).

When to choose which door: ``environment_factory`` is TRL's own multi-turn API (tool calls parsed
by the trainer, any model whose chat template supports tools: the tiny models get one from
:func:`tool_calling_chat_template`); it calls the tool one rollout at a time, so an LM simulator
answers unbatched. The package's ``rollout_func``
(:func:`~shiftbounds.conversations.rollouts.make_rollout_func`) speaks plain turns (no tool-call
format to learn), batches the simulator's replies across rollouts, and is what the paradigms train
with.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

from datasets import Dataset
from trl.chat_template_utils import qwen3_chat_template

from shiftbounds.conversations.records import ConversationData, as_conversations
from shiftbounds.conversations.simulators import UserSimulator
from shiftbounds.conversations.tasks import Judge
from shiftbounds.utils.seeding import derive_seed

LEFT = "[the user has left]"
"""What the tool answers once the simulated user has ended the dialogue or its turns are used."""

TOOL_INSTRUCTION = "Talk to the user only through the send_message tool."
"""The line :func:`environment_dataset` adds to the agent's system prompt."""


class SimulatedUserEnvironment:
    """One rollout's simulated user (see the module docstring). Only ``reset``, ``get_reward`` and the
    tool ``send_message`` are public methods: TRL exposes every other public method as a tool.

    Args:
        simulator: a fresh :class:`~shiftbounds.conversations.simulators.UserSimulator` (not shared
            with other environments: a simulator holds its dialogue's goal).
        judge: ``judge(goal, messages) -> float``, the reward of a finished dialogue.
        max_turns: agent messages per dialogue; later calls get :data:`LEFT`.
        user_first: the user opens the dialogue (its opening is appended to the prompt).
        seed: the root of every dialogue's draws, keyed by (this environment's index, its reset count)
            unless the row carries a ``seed``.
        index: this environment's place among those a factory made.
    """

    def __init__(self, simulator: UserSimulator, judge: Judge, *, max_turns: int = 4, user_first: bool = True,
                 seed: int = 0, index: int = 0) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns (agent messages per dialogue) must be >= 1; got {max_turns}")
        self._simulator, self._judge, self._max_turns, self._user_first = simulator, judge, max_turns, user_first
        self._seed, self._index, self._resets = seed, index, 0
        self.goal: Any = None
        self.transcript: list[dict] = []
        self.done, self.calls = False, 0

    def reset(self, goal: Any = None, goal_json: str | None = None, seed: int | None = None, **_: Any) -> str | None:
        """Start the simulated user on the row's goal (``goal``, or ``goal_json`` as JSON text);
        returns the user's opening with ``user_first``, else ``None``.

        Raises:
            ValueError: the row has no goal (``None`` or missing), or ``goal_json`` is not JSON.
        """
        if goal_json is not None:
            try:
                goal = json.loads(goal_json)
            except json.JSONDecodeError as exc:
                raise ValueError(f"goal_json must be JSON text; got {goal_json!r} ({exc})") from exc
        if goal is None:
            raise ValueError("every row needs a goal for the simulated user: a 'goal' or 'goal_json' column; got none")
        draw = seed if seed is not None else derive_seed(self._seed, "environment", self._index, self._resets)
        self._resets += 1
        self.goal, self.transcript, self.done, self.calls = goal, [], False, 0
        self._simulator.reset(goal, seed=derive_seed(draw, "user"))
        if not self._user_first:
            return None
        opening, self.done = self._simulator.respond([])
        self.transcript.append({"role": "user", "content": opening})
        return opening

    def send_message(self, message: str) -> str:
        """Send a message to the user and return the user's reply.

        Args:
            message: What you say to the user.
        """
        self.calls += 1
        if self.done or sum(m["role"] == "assistant" for m in self.transcript) >= self._max_turns:
            self.done = True
            return LEFT
        self.transcript.append({"role": "assistant", "content": str(message)})
        reply, self.done = self._simulator.respond(list(self.transcript))
        self.transcript.append({"role": "user", "content": reply})
        return reply

    def get_reward(self) -> float:
        """The judge's reward of the dialogue so far."""
        return float(self._judge(self.goal, list(self.transcript)))


def environment_factory(simulator_factory: Callable[[], UserSimulator], judge: Judge, *, max_turns: int = 4,
                        user_first: bool = True, seed: int = 0) -> Callable[[], SimulatedUserEnvironment]:
    """The zero-argument factory for ``GRPOTrainer(environment_factory=...)``: each call makes a
    :class:`SimulatedUserEnvironment` around a fresh simulator from ``simulator_factory`` (e.g.
    ``LMUser.from_pretrained(folder).clone``: the weights load once), numbered in creation order.
    The factory keeps every environment it made in ``.environments`` (their transcripts)."""
    counter = itertools.count()
    made: list[SimulatedUserEnvironment] = []

    def make() -> SimulatedUserEnvironment:
        env = SimulatedUserEnvironment(simulator_factory(), judge, max_turns=max_turns, user_first=user_first, seed=seed,
                                       index=next(counter))
        made.append(env)
        return env

    make.environments = made  # type: ignore[attr-defined]
    return make


def environment_dataset(convs: ConversationData, system: str, *, seed: int = 0, repeat: int = 1,
                        instruction: str = TOOL_INSTRUCTION) -> Any:
    """The ``datasets.Dataset`` for an environment run: per conversation (``repeat`` times), the
    agent's prompt (``system`` and ``instruction``, then an empty user message the opening is
    appended to), the goal as JSON text (``goal_json``) and a seed from (``seed``, id, repetition).

    Raises:
        ValueError: a conversation without a goal (naming it), or ``repeat < 1``.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1; got {repeat}")
    convs = as_conversations(convs)
    missing = [c.id for c in convs if c.goal is None]
    if missing:
        raise ValueError(f"conversations {missing[:5]} have no goal; the simulated user needs one per row")
    prompt = [{"role": "system", "content": f"{system}\n{instruction}".strip()}, {"role": "user", "content": ""}]
    rows: Sequence[dict] = [{"prompt": prompt, "goal_json": json.dumps(c.goal, sort_keys=True), "seed": derive_seed(seed, c.id, r)}
                            for r in range(repeat) for c in convs]
    return Dataset.from_list(list(rows))


def tool_calling_chat_template() -> str:
    """A Qwen-style ChatML chat template that renders tools and tool calls and that TRL recognises
    (it sets the response parser for it): the installed TRL's own Qwen3 template. Give it to a tiny
    model's tokenizer (with ``<|im_end|>`` as EOS) to train it through ``environment_factory``."""
    return qwen3_chat_template
