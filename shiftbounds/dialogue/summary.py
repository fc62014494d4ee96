"""The exact tabular view of a hidden-goal task: a Markov summary of the dialogue history.

State (docs/theory.md §1, "any Markov summary of the history"): either ``DONE`` (a proposal was
accepted, or the user quit) or a triple ``(c, first, repeats)``:

* ``c[x]`` = number of answers so far that contradict goal ``x`` (``ELIM`` = -1 once ``x`` is ruled
  out by a rejection or a leak), shifted so that its smallest non-eliminated entry is 0;
* ``first[q]`` = the user's first answer to question ``q`` (0 / 1), or -1 if it never answered it;
* ``repeats`` = the number of questions asked again after being answered.

``first`` and ``repeats`` are tracked only in a space built with ``memory=True`` (``first = ()``,
``repeats = 0`` otherwise): a memoryless user needs ``c`` alone, and the memory-free space is much
smaller (guess_number at H = 5: 3,472 summaries with memory; the kernels are dense ``[H, S, A, S]``).

Why it is sufficient, for every :class:`~shiftbounds.dialogue.tasks.UserModel`, memoryless or
not: the likelihood of a history given goal ``x`` is a factor common to all goals (clarification,
leak, quit and answer rates, which depend on the turn, ``first`` and ``repeats`` but not on ``x``)
times ``err^{k[x]} (1-err)^{n - k[x]}``, and is 0 for eliminated goals; ``k = c`` for a memoryless
user, which answers every question afresh, and ``k`` = the contradictions of ``first`` for a
consistent one, whose repeated answers are copies. So the posterior is
``b(x | s) ∝ prior(x) (err / (1 - err))^{k[x]}``, the user's next act depends on the history only
through ``s`` and the turn, and the agent-view process on ``s`` is an exact MDP with
``T_t(s' | s, a) = sum_x b(x | s) P_t(user act | a, x, s)`` summed over acts leading to ``s'``. A
test checks this against the generative process enumerated turn by turn with the goal drawn first.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from shiftbounds.dialogue.tasks import (
    ACCEPT,
    CLARIFY,
    N_BASE_USER_ACTS,
    NO,
    QUIT,
    REJECT,
    YES,
    HiddenGoalTask,
    UserModel,
)
from shiftbounds.tabular import TabularMDP

ELIM = -1
DONE = "DONE"
State = tuple  # (c, first, repeats), or the string DONE


def start_state(task: HiddenGoalTask, memory: bool = True) -> State:
    """The summary of the empty history."""
    return (tuple([0] * task.n_goals), tuple([-1] * task.n_questions) if memory else (), 0)


def normalise(c: list[int]) -> tuple:
    """Shift non-eliminated counts so their minimum is 0 (the posterior is unchanged)."""
    live = [v for v in c if v != ELIM]
    m = min(live)
    return tuple(v - m if v != ELIM else ELIM for v in c)


def next_state(task: HiddenGoalTask, state: State, action: int, act: int) -> State | None:
    """The summary after the agent's ``action`` and the user's ``act``; ``None`` if impossible
    under every user model (e.g. a leak of an eliminated goal, a question answered "accept")."""
    if state == DONE:
        return DONE
    c, first, repeats = list(state[0]), list(state[1]), state[2]
    memory = bool(first)
    live = [x for x, v in enumerate(c) if v != ELIM]
    if task.is_question(action):
        if act == QUIT:
            return DONE
        repeats += int(memory and first[action] >= 0)
        if act in (YES, NO):
            value = 1 if act == YES else 0
            for x in live:
                if task.answers[action, x] != value:
                    c[x] += 1
            if memory and first[action] < 0:
                first[action] = value
            return normalise(c), tuple(first), repeats
        if act == CLARIFY:
            return tuple(c), tuple(first), repeats
        if act >= N_BASE_USER_ACTS and (act - N_BASE_USER_ACTS) in live:
            g = act - N_BASE_USER_ACTS
            return tuple(0 if x == g else ELIM for x in range(len(c))), tuple(first), repeats
        return None
    g = action - task.n_questions
    if act == ACCEPT:
        return DONE
    if act == REJECT:
        if live == [g]:
            return None  # the last possible goal is never rejected by a consistent user
        c[g] = ELIM
        return normalise(c), tuple(first), repeats
    return None


@dataclass(frozen=True)
class SummarySpace:
    """The reachable summaries of a task within its horizon, and their successor table.

    Attributes:
        task: the task.
        states: ``states[i]`` is the summary of index ``i``; index 0 is ``DONE``, 1 the start.
        index: inverse map.
        successor: ``successor[s, a, act]`` = index of the next summary, or -1 if impossible.
        boundary: ``boundary[s]`` is True when ``s`` needs ``H - 1`` replies to reach, so it is
            visited only at the last turn; its successors are not enumerated and its kernel rows
            go to ``DONE`` (they never affect an occupancy; ``delta_{H-1}`` counts no error there).
    """

    task: HiddenGoalTask
    states: tuple
    index: dict
    successor: np.ndarray
    boundary: np.ndarray
    memory: bool = True

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_user_acts(self) -> int:
        return N_BASE_USER_ACTS + self.task.n_goals

    def counts(self) -> np.ndarray:
        """``c`` as an array ``[S, G]`` (``DONE`` row all ``ELIM``)."""
        G = self.task.n_goals
        return np.array([[ELIM] * G if s == DONE else list(s[0]) for s in self.states])

    def first_answers(self) -> np.ndarray:
        """``first`` as an array ``[S, Q]`` (``DONE`` row all -1)."""
        Q = self.task.n_questions
        return np.array([[-1] * Q if s == DONE or not self.memory else list(s[1]) for s in self.states]).reshape(-1, Q)

    def repeats(self) -> np.ndarray:
        """``repeats`` per summary ``[S]`` (``DONE``: 0)."""
        return np.array([0 if s == DONE else s[2] for s in self.states])

    def contradictions(self, consistent: bool) -> np.ndarray:
        """``k[s, x]``: answers contradicting goal ``x`` as a user model weighs them (``ELIM`` kept):
        every answer for a memoryless user (``c``), the first answers for a consistent one."""
        c = self.counts()
        if not consistent:
            return c
        first = self.first_answers()  # [S, Q]
        answered = first >= 0
        k = ((first[:, :, None] != self.task.answers[None]) & answered[:, :, None]).sum(1)  # [S, G]
        return np.where(c == ELIM, ELIM, k)


def build_space(task: HiddenGoalTask, memory: bool = True) -> SummarySpace:
    """Enumerate every summary reachable in ``H - 1`` user replies (breadth first); ``memory=False``
    drops ``first`` and ``repeats`` (exact for memoryless users only)."""
    G, A = task.n_goals, task.n_actions
    n_acts = N_BASE_USER_ACTS + G
    start = start_state(task, memory)
    states: list = [DONE, start]
    index = {DONE: 0, start: 1}
    depth = {start: 0}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        if depth[s] >= task.horizon - 1:
            continue
        for a in range(A):
            for act in range(n_acts):
                s2 = next_state(task, s, a, act)
                if s2 is None or s2 in index:
                    continue
                index[s2] = len(states)
                states.append(s2)
                if s2 != DONE:
                    depth[s2] = depth[s] + 1
                    queue.append(s2)
    S = len(states)
    succ = np.full((S, A, n_acts), -1, dtype=np.int64)
    for i, s in enumerate(states):
        for a in range(A):
            for act in range(n_acts):
                s2 = next_state(task, s, a, act)
                if s2 is not None and s2 in index:
                    succ[i, a, act] = index[s2]
    boundary = np.array([s != DONE and depth[s] >= task.horizon - 1 for s in states])
    return SummarySpace(task, tuple(states), index, succ, boundary, memory)


def posterior(space: SummarySpace, model: UserModel) -> np.ndarray:
    """``b(x | c)`` under ``model``; shape ``[S, G]`` (the ``DONE`` row is the prior, unused)."""
    task = space.task
    c = space.contradictions(model.consistent and space.memory)
    err = model.answer_error
    ratio = err / (1 - err)
    with np.errstate(divide="ignore"):
        w = np.where(c == ELIM, 0.0, task.prior * np.power(ratio, np.maximum(c, 0)))
    w[0] = task.prior
    return w / w.sum(-1, keepdims=True)


def response_table(task: HiddenGoalTask, model: UserModel) -> np.ndarray:
    """Every reply distribution of ``model``: ``[H, A, G, 3, H, K]`` indexed by turn, agent act,
    goal, ``previous + 1`` (the earlier answer to the asked question: -1, 0, 1) and ``repeats``
    (0 .. H-1). Both views read their user models' replies from this one table."""
    H, A, G = task.horizon, task.n_actions, task.n_goals
    return np.array([[[[[model.response(task, a, x, turn=t, previous=prev, repeats=r) for r in range(H)]
                        for prev in (-1, 0, 1)] for x in range(G)] for a in range(A)] for t in range(H)])


def act_probabilities(space: SummarySpace, model: UserModel) -> np.ndarray:
    """``P_t(user act | s, a) = sum_x b(x | s) P_t(act | a, x, s)``; shape ``[H, S, A, acts]``."""
    task = space.task
    if model.has_memory and not space.memory:
        raise ValueError(f"user model {model.name!r} has memory (consistent={model.consistent}, patience="
                         f"{model.patience}, clarify_growth={model.clarify_growth}); build the space with memory=True")
    Q, A = task.n_questions, task.n_actions
    b = posterior(space, model)
    table = response_table(task, model)  # [H, A, G, 3, R, K]
    first = space.first_answers()  # [S, Q]
    prev = np.concatenate([first, np.full((space.n_states, A - Q), -1)], 1) + 1  # [S, A]
    reps = np.minimum(space.repeats(), task.horizon - 1)
    per = table.transpose(1, 3, 4, 0, 2, 5)[np.arange(A)[None, :], prev, reps[:, None]]  # [S, A, H, G, K]
    return np.einsum("sx,satxk->tsak", b, per)


def transitions_from_acts(space: SummarySpace, p_act: np.ndarray) -> np.ndarray:
    """Kernel ``[H, S, A, S]`` (or ``[S, A, S]``) from act probabilities ``[H, S, A, acts]`` (or
    ``[S, A, acts]``): acts leading to the same summary add up; ``DONE`` is absorbing. Raises if an
    impossible act has positive mass."""
    if p_act.ndim == 4:
        return np.stack([transitions_from_acts(space, p) for p in p_act])
    S, A, K = p_act.shape
    succ = space.successor
    bad = (succ < 0) & (p_act > 1e-12)
    bad[0] = False
    bad[space.boundary] = False
    if bad.any():
        s, a, k = np.argwhere(bad)[0]
        raise ValueError(f"act {k} after action {a} in summary {space.states[s]} has probability "
                         f"{p_act[s, a, k]:.3g} but leads nowhere; the user model is inconsistent")
    T = np.zeros((S, A, S))
    s_idx, a_idx, k_idx = np.nonzero(succ >= 0)
    np.add.at(T, (s_idx, a_idx, succ[s_idx, a_idx, k_idx]), p_act[s_idx, a_idx, k_idx])
    ends = np.zeros(S, dtype=bool)
    ends[0] = True
    ends |= space.boundary
    T[ends] = 0.0
    T[ends, :, 0] = 1.0
    return T


def proposal_rewards(task: HiddenGoalTask, p_correct: np.ndarray, p_accept: np.ndarray | None = None) -> np.ndarray:
    """Per-summary rewards ``[S, A]``: 0 for questions; for proposal ``g``, ``1`` if the reward
    event happens and ``-wrong_penalty`` otherwise, in expectation. ``judge``: the event is
    "``g`` is the goal" (``p_correct[s, g]``); ``acceptance``: "the user accepts" (``p_accept``)."""
    p = p_correct if task.reward_source == "judge" or p_accept is None else p_accept
    pen = task.wrong_penalty
    r = np.zeros((p.shape[0], task.n_actions))
    r[:, task.n_questions:] = p * (1 + pen) - pen
    r[0] = 0.0
    return r


def _stationary(task: HiddenGoalTask, T: np.ndarray, r: np.ndarray, S: int) -> TabularMDP:
    """A ``TabularMDP`` from a kernel ``[S, A, S]`` (broadcast over turns) or ``[H, S, A, S]``."""
    mu0 = np.zeros(S)
    mu0[1] = 1.0
    H = task.horizon
    T = T if T.ndim == 4 else np.broadcast_to(T, (H,) + T.shape)
    return TabularMDP(T, np.broadcast_to(r, (H,) + r.shape), mu0)


def user_mdp(space: SummarySpace, model: UserModel) -> TabularMDP:
    """The exact agent-view MDP against ``model`` (kernel per turn; a proposal's acceptance, and so
    the reward, does not depend on the turn)."""
    task = space.task
    p_act = act_probabilities(space, model)
    b = posterior(space, model)
    r = proposal_rewards(task, b, p_act[0, :, task.n_questions:, ACCEPT])
    return _stationary(task, transitions_from_acts(space, p_act), r, space.n_states)


def success_rewards(space: SummarySpace, model: UserModel) -> np.ndarray:
    """``[S, A]``: probability that the action is a proposal of the true goal (success)."""
    r = np.zeros((space.n_states, space.task.n_actions))
    r[:, space.task.n_questions:] = posterior(space, model)
    r[0] = 0.0
    return r


def mdp_from_kernel(space: SummarySpace, T: np.ndarray, r: np.ndarray) -> TabularMDP:
    """An MDP on the summaries from a kernel ``[S, A, S]`` (stationary) or ``[H, S, A, S]`` and rewards ``[S, A]``."""
    return _stationary(space.task, T, r, space.n_states)
