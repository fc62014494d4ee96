"""Behaviour cloning over summaries: the SFT agent of the exact view, fitted to logged dialogues.

* :func:`behaviour_cloning` — counts per (turn, summary), backing off to counts pooled over turns
  and then to uniform where the logs never visited a summary;
* :func:`shared_behaviour_cloning` — the strongest logs-only model of the study: a log-linear
  policy with parameters shared across summaries (:func:`act_features`, fitted by maximum
  likelihood), used as a Dirichlet prior for the counts, so that it is the count model where the
  logs are plentiful and the shared model where they saw nothing.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from shiftbounds.dialogue.logs import Dialogue
from shiftbounds.dialogue.summary import SummarySpace, posterior
from shiftbounds.dialogue.tasks import UserModel


def _counts(space: SummarySpace, dialogues: list[Dialogue]) -> np.ndarray:
    """``N[t, s, a]``: how often the logs took act ``a`` in summary ``s`` at turn ``t``."""
    task = space.task
    N = np.zeros((task.horizon, space.n_states, task.n_actions))
    for d in dialogues:
        for t, (s, a) in enumerate(zip(d.states, d.actions)):
            N[t, s, a] += 1
    return N


def behaviour_cloning(space: SummarySpace, dialogues: list[Dialogue], *, smoothing: float = 0.5) -> np.ndarray:
    """Count-based BC: ``pi[t, s, a] ∝ N_t(s, a) + smoothing``, falling back to counts pooled over
    turns and then to uniform where turn ``t`` never visited ``s``."""
    task = space.task
    H, S, A = task.horizon, space.n_states, task.n_actions
    N = _counts(space, dialogues)
    pooled = N.sum(0)
    pi = np.full((H, S, A), 1.0 / A)
    for t in range(H):
        seen = N[t].sum(-1) > 0
        pooled_seen = ~seen & (pooled.sum(-1) > 0)
        pi[t, seen] = (N[t, seen] + smoothing) / (N[t, seen].sum(-1, keepdims=True) + smoothing * A)
        pi[t, pooled_seen] = (pooled[pooled_seen] + smoothing) / (pooled[pooled_seen].sum(-1, keepdims=True) + smoothing * A)
    return pi


ACT_FEATURES = ("question", "question_splits", "question_splits_unanswered", "question_last_turn",
                "propose_belief", "propose_best", "propose_best_confident", "propose_best_last_turn")


def act_features(space: SummarySpace, belief: UserModel | None = None) -> np.ndarray:
    """Features ``[H, S, A, F]`` of every act in every summary and turn (:data:`ACT_FEATURES`),
    computed from the task's definition (its questions' answers over goals) and the summary alone:
    for a question, whether it still splits the goals not ruled out and was not answered yet, and
    the last turn; for a proposal, the posterior of its goal (under ``belief``, by default a user
    who errs 5 % of the time), whether it is the most likely goal, that with confidence >= 0.6 and
    at the last turn. Shared by every summary, these let a policy learnt from some summaries act
    sensibly in ones the logs never reached."""
    task = space.task
    H, S, A, Q = task.horizon, space.n_states, task.n_actions, task.n_questions
    b = posterior(space, belief or UserModel(answer_error=0.05))
    live = b > 1e-12
    first = space.first_answers()
    splits = np.array([[len(set(task.answers[q, live[s]])) > 1 for q in range(Q)] for s in range(S)])  # [S, Q]
    best = np.zeros((S, task.n_goals), bool)
    best[np.arange(S), b.argmax(-1)] = True
    confident = (b.max(-1) >= 0.6)[:, None]
    F = np.zeros((H, S, A, len(ACT_FEATURES)))
    last = np.zeros(H, bool)
    last[-1] = True
    F[:, :, :Q, 0] = 1.0
    F[:, :, :Q, 1] = splits
    F[:, :, :Q, 2] = splits & (first < 0)
    F[:, :, :Q, 3] = last[:, None, None]
    F[:, :, Q:, 4] = b
    F[:, :, Q:, 5] = best
    F[:, :, Q:, 6] = best & confident
    F[:, :, Q:, 7] = best[None] & last[:, None, None]
    return F


def log_linear_policy(features: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``pi[..., a] ∝ exp(features[..., a, :] @ w)``."""
    z = features @ w
    z = z - z.max(-1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(-1, keepdims=True)


def fit_log_linear(features: np.ndarray, counts: np.ndarray, *, l2: float = 1e-3) -> np.ndarray:
    """Maximum-likelihood weights of :func:`log_linear_policy` for act counts ``[..., A]`` (with a
    small L2 penalty ``l2 |w|^2``, so the fit exists when the logs separate the acts); convex."""
    X = features.reshape(-1, features.shape[-2], features.shape[-1])
    N = counts.reshape(-1, counts.shape[-1])
    keep = N.sum(-1) > 0
    X, N = X[keep], N[keep]
    total = max(float(N.sum()), 1.0)

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = X @ w
        z = z - z.max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        p = np.exp(logp)
        nll = -(N * logp).sum() / total + l2 * w @ w
        grad = -np.einsum("na,naf->f", N - N.sum(-1, keepdims=True) * p, X) / total + 2 * l2 * w
        return float(nll), grad

    res = minimize(objective, np.zeros(X.shape[-1]), jac=True, method="L-BFGS-B")
    return res.x


def shared_behaviour_cloning(space: SummarySpace, dialogues: list[Dialogue], *, prior_strength: float = 2.0) -> np.ndarray:
    """The log-linear model of :func:`act_features` fitted to the logs, as the prior of the counts:
    ``pi[t, s, a] ∝ N_t(s, a) + prior_strength * pi_shared[t, s, a]``."""
    N = _counts(space, dialogues)
    F = act_features(space)
    shared = log_linear_policy(F, fit_log_linear(F, N))
    pi = N + prior_strength * shared
    return pi / pi.sum(-1, keepdims=True)
