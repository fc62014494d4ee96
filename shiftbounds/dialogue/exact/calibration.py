"""Calibrating a user simulator to logged dialogues by maximum likelihood (docs/pipeline.md, Theorem 3).

Two model classes, both fitted to the *same* logs the static learner sees:

* :func:`fit_count_model` — a per-context count model on summaries: ``P(user act | c, a)`` is the
  empirical frequency with add-``alpha`` smoothing towards uniform over the acts possible there;
  never-logged ``(c, a)`` pairs stay at that uniform prior (planners steer into exactly those);
  the judge's reward is the logged goal frequency at ``c`` smoothed towards the prior.
* :func:`fit_shared_model` — a :class:`~shiftbounds.dialogue.tasks.UserModel` whose four rates
  are shared across contexts, each the Jeffreys estimate ``(k + 1/2) / (n + 1)`` from the logs'
  goals and acts. It generalises from few logs but cannot express the real user's
  question-dependent clarification rates (a deliberate, small misspecification).
"""

from __future__ import annotations

import numpy as np

from shiftbounds.dialogue.logs import Dialogue
from shiftbounds.dialogue.summary import (
    SummarySpace,
    mdp_from_kernel,
    proposal_rewards,
    transitions_from_acts,
)
from shiftbounds.dialogue.tasks import ACCEPT, CLARIFY, N_BASE_USER_ACTS, NO, YES, UserModel
from shiftbounds.tabular import TabularMDP


def _jeffreys(k: float, n: float) -> float:
    return (k + 0.5) / (n + 1.0)


def fit_shared_model(space: SummarySpace, dialogues: list[Dialogue]) -> UserModel:
    """MLE (Jeffreys-smoothed) of a context-independent user model from logs with goals."""
    task = space.task
    n_q = n_ans = flips = clar = leaks = n_wrong = acc_wrong = 0
    for d in dialogues:
        for a, k in zip(d.actions, d.acts):
            if task.is_question(a):
                n_q += 1
                if k in (YES, NO):
                    n_ans += 1
                    flips += int((k == YES) != bool(task.answers[a, d.goal]))
                clar += int(k == CLARIFY)
                leaks += int(k >= N_BASE_USER_ACTS)
            elif a - task.n_questions != d.goal:
                n_wrong += 1
                acc_wrong += int(k == ACCEPT)
    clarify, leak = _jeffreys(clar, n_q), _jeffreys(leaks, n_q)
    return UserModel(answer_error=min(_jeffreys(flips, n_ans), 0.49), clarify=clarify, leak=leak,
                     accept_wrong=_jeffreys(acc_wrong, n_wrong), name="calibrated-shared")


def fit_count_model(space: SummarySpace, dialogues: list[Dialogue], *, alpha: float = 1.0) -> TabularMDP:
    """Per-context count model on summaries; returns its MDP (kernel and rewards).

    ``P(k | c, a) = (N(c, a, k) + alpha * u(k | c, a)) / (N(c, a) + alpha)``, ``u`` uniform over the
    acts that are possible at ``(c, a)``; goal frequencies ``(M(c, g) + alpha * prior(g)) / (M(c) + alpha)``.
    """
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0 (unseen pairs need a prior); got {alpha}")
    task = space.task
    S, A, K = space.n_states, task.n_actions, space.n_user_acts
    N = np.zeros((S, A, K))
    M = np.zeros((S, task.n_goals))
    for d in dialogues:
        for s, a, k in zip(d.states, d.actions, d.acts):
            N[s, a, k] += 1
            M[s, d.goal] += 1
    possible = (space.successor >= 0).astype(float)
    u = possible / np.maximum(possible.sum(-1, keepdims=True), 1.0)
    p_act = (N + alpha * u) / (N.sum(-1, keepdims=True) + alpha)
    p_goal = (M + alpha * task.prior) / (M.sum(-1, keepdims=True) + alpha)
    r = proposal_rewards(task, p_goal, p_act[:, task.n_questions:, ACCEPT])
    return mdp_from_kernel(space, transitions_from_acts(space, p_act), r)
