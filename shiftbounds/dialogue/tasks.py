"""Hidden-goal dialogue tasks, their user models and the judge (docs/pipeline.md "Task").

A task is a small "twenty questions" game: the user holds a hidden goal ``x`` from a finite set
``G``; at each turn the agent either asks a binary question ``q`` (whose true answer is
``f_q(x)``) or proposes a goal ``g``. The user answers, asks for clarification, volunteers
("leaks") the goal, or accepts / rejects the proposal. Two instances are built in:

* :func:`guess_number` — information seeking: the secret is a number ``0..K-1`` and the questions
  are thresholds "is it at least m?";
* :func:`booking` — slot filling: the goal is a booking with binary slots (day, time, seat ...),
  the questions ask one slot each, and a proposal is a full booking.

One definition feeds the exact tabular view (:mod:`shiftbounds.dialogue.summary`) and the token
view used by the neural pipeline: agent acts and user acts are small vocabularies.

User models have explicit probabilities (:class:`UserModel`): the *real user* answers with a
small error rate, sometimes asks for clarification (more for confusing questions), never accepts
a wrong proposal and never volunteers its goal; the *prompt-based simulator* is cooperative and
sycophantic: it accepts wrong proposals with probability ``accept_wrong`` and leaks the goal with
probability ``leak``, and rarely asks for clarification.

A user model can also have *memory* (:func:`memory_user`, the default real user of the
experiments): asked a question it already answered, a ``consistent`` user repeats its earlier
answer (errors included) instead of answering afresh; each repeated question makes an impatient
user end the dialogue unsatisfied (the ``quit`` act) with a probability that grows with the number
of repeats (``patience``); and its clarification rate grows with the dialogue's length
(``clarify_growth``). Its reply then depends on the history through three things only: the turn,
its earlier answer to the asked question, and the number of repeated questions so far — the
arguments of :meth:`UserModel.response`, which the exact and the neural views both call.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

REWARD_SOURCES = ("judge", "acceptance")


@dataclass(frozen=True)
class HiddenGoalTask:
    """A hidden-goal dialogue task.

    Attributes:
        name: short identifier used in results.
        goals: names of the goals ``G``.
        questions: names of the binary questions ``Q``.
        answers: ``answers[q, x] = f_q(x)`` in ``{0, 1}``; shape ``[Q, G]``.
        prior: prior over goals; shape ``[G]``.
        horizon: number of agent turns ``H``.
        wrong_penalty: judged reward of a wrong proposal (``-wrong_penalty``); a correct one earns 1.
        reward_source: ``"judge"`` (goal-aware judge) or ``"acceptance"`` (the user model's own
            accept = +1 / reject = ``-wrong_penalty``: what training against a simulator sees).
    """

    name: str
    goals: tuple[str, ...]
    questions: tuple[str, ...]
    answers: np.ndarray
    prior: np.ndarray
    horizon: int
    wrong_penalty: float = 0.3
    reward_source: str = "judge"

    def __post_init__(self) -> None:
        answers = np.asarray(self.answers, dtype=np.int64)
        prior = np.asarray(self.prior, dtype=float)
        object.__setattr__(self, "answers", answers)
        object.__setattr__(self, "prior", prior)
        G, Q = len(self.goals), len(self.questions)
        if G < 2 or Q < 1:
            raise ValueError(f"a task needs >= 2 goals and >= 1 question; got {G} goals, {Q} questions")
        if answers.shape != (Q, G) or not np.isin(answers, (0, 1)).all():
            raise ValueError(f"answers must be a 0/1 array of shape [Q, G] = [{Q}, {G}]; got shape {answers.shape}")
        if prior.shape != (G,) or (prior < 0).any() or abs(prior.sum() - 1) > 1e-9:
            raise ValueError(f"prior must be a distribution over the {G} goals; got {prior.tolist()}")
        if int(self.horizon) != self.horizon or self.horizon < 1:
            raise ValueError(f"horizon must be a positive integer; got {self.horizon!r}")
        if self.wrong_penalty < 0:
            raise ValueError(f"wrong_penalty must be >= 0; got {self.wrong_penalty}")
        if self.reward_source not in REWARD_SOURCES:
            raise ValueError(f"reward_source must be one of {REWARD_SOURCES}; got {self.reward_source!r}")

    @property
    def n_goals(self) -> int:
        return len(self.goals)

    @property
    def n_questions(self) -> int:
        return len(self.questions)

    @property
    def n_actions(self) -> int:
        """Agent acts: the questions, then one proposal per goal."""
        return self.n_questions + self.n_goals

    @property
    def agent_acts(self) -> tuple[str, ...]:
        """Names of the agent's acts (its token vocabulary)."""
        return tuple(f"ask:{q}" for q in self.questions) + tuple(f"propose:{g}" for g in self.goals)

    def is_question(self, action: int) -> bool:
        return action < self.n_questions


# ---------------------------------------------------------------------------------- user acts
YES, NO, CLARIFY, ACCEPT, REJECT, QUIT = 0, 1, 2, 3, 4, 5
"""User act ids; ``LEAK_g`` is ``6 + g``. An answer value ``v`` is act ``YES`` if ``v == 1``.
``QUIT``: the user ends the dialogue unsatisfied (in reply to a question; reward 0)."""
N_BASE_USER_ACTS = 6
ENDING_ACTS = (ACCEPT, QUIT)
"""User acts after which the dialogue is over."""


def user_acts(task: HiddenGoalTask) -> tuple[str, ...]:
    """Names of the user's acts (its token vocabulary): yes, no, clarify, accept, reject, quit, leak:g."""
    return ("yes", "no", "clarify", "accept", "reject", "quit") + tuple(f"leak:{g}" for g in task.goals)


def judge_reward(task: HiddenGoalTask, action, goal, *, dtype: torch.dtype | None = None):
    """The goal-aware judge: 1 for proposing the goal, ``-wrong_penalty`` for a wrong proposal, 0
    for a question; the one definition every view scores with.

    ``action`` and ``goal`` are ints (returns a float) or torch tensors that broadcast (returns a
    tensor of ``dtype``, default torch's default dtype, on their device)."""
    Q = task.n_questions
    if not isinstance(action, torch.Tensor):
        return 0.0 if action < Q else 1.0 if action - Q == goal else -task.wrong_penalty
    one, wrong, zero = (torch.tensor(v, dtype=dtype or torch.get_default_dtype(), device=action.device)
                        for v in (1.0, -task.wrong_penalty, 0.0))
    return torch.where(action >= Q, torch.where(action - Q == goal, one, wrong), zero)


def answer_act(value: int) -> int:
    """The user act that states answer ``value`` (1 -> YES, 0 -> NO)."""
    return YES if value == 1 else NO


@dataclass(frozen=True)
class UserModel:
    """A user's response probabilities (each a documented knob).

    Attributes:
        answer_error: probability that an answer to a question is flipped.
        clarify: probability of asking for clarification instead of answering; a float, or one
            value per question (a confusing question is clarified more often).
        accept_wrong: probability of accepting a wrong proposal (sycophancy); a correct proposal
            is always accepted.
        leak: probability of volunteering the goal in reply to a question (leaking).
        name: label used in results.
        consistent: asked a question it already answered, the user repeats that answer (its error
            included) instead of answering afresh.
        patience: at the ``r``-th repeated question (one answered before) the user quits with
            probability ``1 - (1 - patience)^r`` before replying.
        clarify_growth: the clarification rate at turn ``t`` is ``clarify * (1 + clarify_growth * t)``
            (capped at ``1 - leak``): the user gets more confused as the dialogue drags on.
    """

    answer_error: float = 0.05
    clarify: float | tuple[float, ...] = 0.1
    accept_wrong: float = 0.0
    leak: float = 0.0
    name: str = "user"
    consistent: bool = False
    patience: float = 0.0
    clarify_growth: float = 0.0

    def __post_init__(self) -> None:
        for k in ("answer_error", "accept_wrong", "leak", "patience"):
            v = getattr(self, k)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{k} must lie in [0, 1]; got {v!r}")
        if self.clarify_growth < 0:
            raise ValueError(f"clarify_growth must be >= 0; got {self.clarify_growth!r}")
        if self.answer_error >= 0.5:
            raise ValueError(f"answer_error must be < 0.5 (answers must carry information); got {self.answer_error}")
        c = np.atleast_1d(np.asarray(self.clarify, dtype=float))
        if (c < 0).any() or (c + self.leak > 1).any():
            raise ValueError(f"clarify must lie in [0, 1 - leak]; got clarify={self.clarify!r}, leak={self.leak}")
        if isinstance(self.clarify, list):
            object.__setattr__(self, "clarify", tuple(self.clarify))

    @property
    def has_memory(self) -> bool:
        """The reply depends on the history (turn, earlier answers, repeats), not only on the act."""
        return self.consistent or self.patience > 0 or self.clarify_growth > 0

    def clarify_rate(self, question: int, turn: int = 0) -> float:
        """``P(clarify | question, turn)`` given that the user does not quit."""
        base = float(self.clarify[question]) if isinstance(self.clarify, tuple) else float(self.clarify)
        return min(base * (1 + self.clarify_growth * turn), 1.0 - self.leak)

    def quit_rate(self, repeats: int) -> float:
        """Probability of quitting at a question that is the ``repeats``-th repeated one (0 if ``repeats == 0``)."""
        return 1.0 - (1.0 - self.patience) ** repeats

    def question_response(self, task: HiddenGoalTask, question: int, goal: int, *, turn: int = 0,
                          previous: int = -1, repeats: int = 0) -> np.ndarray:
        """``P(user act | question, goal, history)``; shape ``[N_BASE_USER_ACTS + G]``.

        ``previous`` is the user's earlier answer to this question (0 / 1, or -1 if never answered)
        and ``repeats`` the number of repeated questions before this one; a memoryless user
        ignores both and ``turn``.
        """
        p = np.zeros(N_BASE_USER_ACTS + task.n_goals)
        repeat = previous >= 0
        stay = 1.0 - (self.quit_rate(repeats + 1) if repeat else 0.0)
        c = self.clarify_rate(question, turn)
        answer = 1 - c - self.leak
        if repeat and self.consistent:
            p[answer_act(previous)] += stay * answer
        else:
            truth = int(task.answers[question, goal])
            p[answer_act(truth)] += stay * answer * (1 - self.answer_error)
            p[answer_act(1 - truth)] += stay * answer * self.answer_error
        p[CLARIFY] += stay * c
        p[N_BASE_USER_ACTS + goal] += stay * self.leak
        p[QUIT] += 1.0 - stay
        return p

    def proposal_response(self, task: HiddenGoalTask, proposal: int, goal: int) -> np.ndarray:
        """``P(user act | proposal, goal)``: accept a correct proposal; a wrong one with ``accept_wrong``."""
        p = np.zeros(N_BASE_USER_ACTS + task.n_goals)
        acc = 1.0 if proposal == goal else self.accept_wrong
        p[ACCEPT], p[REJECT] = acc, 1.0 - acc
        return p

    def reply(self, task: HiddenGoalTask, history: tuple, action: int, goal: int) -> np.ndarray:
        """:meth:`response` after a raw history ``((a_0, k_0), (a_1, k_1), ...)`` of agent and user acts:
        the turn, the earlier answer to ``action`` and the repeats are read off the history."""
        answered: dict[int, int] = {}
        repeats = 0
        for a_j, k_j in history:
            if task.is_question(a_j):
                repeats += a_j in answered
                if k_j in (YES, NO) and a_j not in answered:
                    answered[a_j] = int(k_j == YES)
        previous = answered.get(action, -1) if task.is_question(action) else -1
        return self.response(task, action, goal, turn=len(history), previous=previous, repeats=repeats)

    def response(self, task: HiddenGoalTask, action: int, goal: int, *, turn: int = 0, previous: int = -1,
                 repeats: int = 0) -> np.ndarray:
        """``P(user act | agent act, goal, history)`` (see :meth:`question_response` for the history
        arguments; a proposal's reply does not depend on them)."""
        if task.is_question(action):
            return self.question_response(task, action, goal, turn=turn, previous=previous, repeats=repeats)
        return self.proposal_response(task, action - task.n_questions, goal)


def real_user(task: HiddenGoalTask, answer_error: float = 0.05, clarify: float = 0.1, **memory) -> UserModel:
    """The ground-truth user: clarification rates that vary over questions (mean ``clarify``; the
    middle questions are the confusing ones), never sycophantic, never leaks. Memoryless unless
    ``memory`` sets ``consistent`` / ``patience`` / ``clarify_growth``."""
    Q = task.n_questions
    weights = 0.5 + np.array([min(q + 1, Q - q) for q in range(Q)], dtype=float)
    rates = clarify * weights / weights.mean()
    return UserModel(answer_error, tuple(float(r) for r in rates), accept_wrong=0.0, leak=0.0, name="real", **memory)


def memory_user(task: HiddenGoalTask, patience: float = 0.5, clarify_growth: float = 1.5, **kw) -> UserModel:
    """The history-dependent real user: :func:`real_user` that is consistent, quits at repeated
    questions (``patience``) and clarifies more as the dialogue grows (``clarify_growth``)."""
    return real_user(task, consistent=True, patience=patience, clarify_growth=clarify_growth, **kw)


REAL_USERS = {"memoryless": real_user, "memory": memory_user}
"""The real users the experiments can evaluate against, by name."""


def prompted_simulator(accept_wrong: float = 0.3, leak: float = 0.2, clarify: float = 0.02,
                       answer_error: float = 0.02) -> UserModel:
    """A prompt-based LLM simulator: cooperative, sycophantic, leaky, rarely clarifies."""
    return UserModel(answer_error, clarify, accept_wrong=accept_wrong, leak=leak, name="prompted")


# ---------------------------------------------------------------------------------- the tasks
def guess_number(n_numbers: int = 5, horizon: int = 5, **kw) -> HiddenGoalTask:
    """Information seeking: a secret number in ``0..n_numbers-1``; questions "is it >= m?"."""
    if n_numbers < 2:
        raise ValueError(f"n_numbers must be >= 2; got {n_numbers}")
    goals = tuple(str(x) for x in range(n_numbers))
    questions = tuple(f">={m}" for m in range(1, n_numbers))
    answers = np.array([[int(x >= m) for x in range(n_numbers)] for m in range(1, n_numbers)])
    return HiddenGoalTask("guess_number", goals, questions, answers, np.full(n_numbers, 1 / n_numbers), horizon, **kw)


def booking(slots: tuple[tuple[str, str, str], ...] = (("day", "sat", "sun"), ("time", "am", "pm"), ("seat", "window", "aisle")),
            horizon: int = 5, **kw) -> HiddenGoalTask:
    """Slot filling: the goal is one value per binary slot; a question asks one slot, a proposal
    offers a full booking. ``slots`` lists ``(slot, value0, value1)``."""
    if not slots:
        raise ValueError("booking needs at least one slot")
    combos = list(itertools.product((0, 1), repeat=len(slots)))
    goals = tuple("/".join(s[1 + v] for s, v in zip(slots, c)) for c in combos)
    questions = tuple(s[0] for s in slots)
    answers = np.array([[c[i] for c in combos] for i in range(len(slots))])
    return HiddenGoalTask("booking", goals, questions, answers, np.full(len(combos), 1 / len(combos)), horizon, **kw)


TASKS = {"guess_number": guess_number, "booking": booking}
