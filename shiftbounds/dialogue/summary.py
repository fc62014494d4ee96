"""The exact tabular view of a hidden-goal task: a Markov summary of the dialogue history.

State (docs/theory.md §1, "any Markov summary of the history"): either ``DONE`` (a proposal was
accepted) or the vector ``c`` with ``c[x]`` = number of answers so far that contradict goal ``x``
(``ELIM`` = -1 once ``x`` is ruled out by a rejection or a leak), shifted so that its smallest
non-eliminated entry is 0.

Why it is sufficient: for every :class:`~shiftbounds.dialogue.tasks.UserModel`, the likelihood of
a history given goal ``x`` is a factor common to all goals (clarifications, leak and answer rates)
times ``err^{c[x]} (1-err)^{n - c[x]}``, and is 0 for eliminated goals. So the posterior is
``b(x | c) ∝ prior(x) (err / (1 - err))^{c[x]}`` and the user's next act depends on the history only
through ``c``: the agent-view process on ``c`` is an exact MDP with
``T(c' | c, a) = sum_x b(x | c) P(user act | a, x)`` summed over acts leading to ``c'``. A test
checks this against the generative process enumerated turn by turn with the goal drawn first.
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
    REJECT,
    YES,
    HiddenGoalTask,
    UserModel,
)
from shiftbounds.tabular import TabularMDP

ELIM = -1
DONE = "DONE"
State = tuple  # tuple of ints, or the string DONE


def normalise(c: list[int]) -> State:
    """Shift non-eliminated counts so their minimum is 0 (the posterior is unchanged)."""
    live = [v for v in c if v != ELIM]
    m = min(live)
    return tuple(v - m if v != ELIM else ELIM for v in c)


def next_state(task: HiddenGoalTask, state: State, action: int, act: int) -> State | None:
    """The summary after the agent's ``action`` and the user's ``act``; ``None`` if impossible
    under every user model (e.g. a leak of an eliminated goal, a question answered "accept")."""
    if state == DONE:
        return DONE
    c = list(state)
    live = [x for x, v in enumerate(c) if v != ELIM]
    if task.is_question(action):
        if act in (YES, NO):
            value = 1 if act == YES else 0
            for x in live:
                if task.answers[action, x] != value:
                    c[x] += 1
            return normalise(c)
        if act == CLARIFY:
            return state
        if act >= N_BASE_USER_ACTS and (act - N_BASE_USER_ACTS) in live:
            g = act - N_BASE_USER_ACTS
            return tuple(0 if x == g else ELIM for x in range(len(c)))
        return None
    g = action - task.n_questions
    if act == ACCEPT:
        return DONE
    if act == REJECT:
        if live == [g]:
            return None  # the last possible goal is never rejected by a consistent user
        c[g] = ELIM
        return normalise(c)
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

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_user_acts(self) -> int:
        return N_BASE_USER_ACTS + self.task.n_goals

    def counts(self) -> np.ndarray:
        """``c`` as an array ``[S, G]`` (``DONE`` row all ``ELIM``)."""
        G = self.task.n_goals
        return np.array([[ELIM] * G if s == DONE else list(s) for s in self.states])


def build_space(task: HiddenGoalTask) -> SummarySpace:
    """Enumerate every summary reachable in ``H - 1`` user replies (breadth first)."""
    G, A = task.n_goals, task.n_actions
    n_acts = N_BASE_USER_ACTS + G
    start = tuple([0] * G)
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
    return SummarySpace(task, tuple(states), index, succ, boundary)


def posterior(space: SummarySpace, model: UserModel) -> np.ndarray:
    """``b(x | c)`` under ``model``; shape ``[S, G]`` (the ``DONE`` row is the prior, unused)."""
    task = space.task
    c = space.counts()
    err = model.answer_error
    ratio = err / (1 - err)
    with np.errstate(divide="ignore"):
        w = np.where(c == ELIM, 0.0, task.prior * np.power(ratio, np.maximum(c, 0)))
    w[0] = task.prior
    return w / w.sum(-1, keepdims=True)


def act_probabilities(space: SummarySpace, model: UserModel) -> np.ndarray:
    """``P(user act | c, a) = sum_x b(x | c) P(act | a, x)``; shape ``[S, A, acts]``."""
    task = space.task
    b = posterior(space, model)
    per_goal = np.array([[model.response(task, a, x) for x in range(task.n_goals)] for a in range(task.n_actions)])
    return np.einsum("sx,axk->sak", b, per_goal)  # [S, A, acts]


def transitions_from_acts(space: SummarySpace, p_act: np.ndarray) -> np.ndarray:
    """Kernel ``[S, A, S]`` from act probabilities ``[S, A, acts]``: acts leading to the same
    summary add up; ``DONE`` is absorbing. Raises if an impossible act has positive mass."""
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
    mu0 = np.zeros(S)
    mu0[1] = 1.0
    H = task.horizon
    return TabularMDP(np.broadcast_to(T, (H,) + T.shape), np.broadcast_to(r, (H,) + r.shape), mu0)


def user_mdp(space: SummarySpace, model: UserModel) -> TabularMDP:
    """The exact agent-view MDP against ``model`` (stationary kernel broadcast over turns)."""
    task = space.task
    p_act = act_probabilities(space, model)
    b = posterior(space, model)
    r = proposal_rewards(task, b, p_act[:, task.n_questions:, ACCEPT])
    return _stationary(task, transitions_from_acts(space, p_act), r, space.n_states)


def success_rewards(space: SummarySpace, model: UserModel) -> np.ndarray:
    """``[S, A]``: probability that the action is a proposal of the true goal (success)."""
    r = np.zeros((space.n_states, space.task.n_actions))
    r[:, space.task.n_questions:] = posterior(space, model)
    r[0] = 0.0
    return r


def mdp_from_kernel(space: SummarySpace, T: np.ndarray, r: np.ndarray) -> TabularMDP:
    """A stationary MDP on the summaries from a kernel ``[S, A, S]`` and rewards ``[S, A]``."""
    return _stationary(space.task, T, r, space.n_states)
