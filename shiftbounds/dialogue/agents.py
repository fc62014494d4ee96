"""Agent policies over summaries: the logging agent ``pi_data`` and behaviour cloning from logs."""

from __future__ import annotations

import numpy as np

from shiftbounds.dialogue.logs import Dialogue
from shiftbounds.dialogue.summary import SummarySpace, posterior
from shiftbounds.dialogue.tasks import UserModel


def data_policy(space: SummarySpace, *, confidence: float = 0.6, noise: float = 0.1,
                belief: UserModel | None = None) -> np.ndarray:
    """A plausible, imperfect human agent ``pi_data[t, s, a]``.

    With probability ``1 - noise``: propose the most likely goal (under ``belief``, by default a
    user who errs 5 % of the time) when its probability reaches ``confidence`` or at the last turn;
    otherwise ask a question chosen uniformly among those that still split the possible goals,
    preferring questions not answered yet (a person rarely asks the same thing twice).
    With probability ``noise``: any act uniformly at random. In the ``DONE`` summary (the dialogue
    has ended) the policy is the fixed act 0, as for every policy evaluated by the package
    (:meth:`shiftbounds.dialogue.exact.PreparedTask.evaluate`), so ended dialogues add no ``eps``.
    """
    if not 0 <= noise <= 1 or not 0 < confidence <= 1:
        raise ValueError(f"need noise in [0, 1] and confidence in (0, 1]; got noise={noise}, confidence={confidence}")
    task = space.task
    b = posterior(space, belief or UserModel(answer_error=0.05))
    S, A, H, Q = space.n_states, task.n_actions, task.horizon, task.n_questions
    live = b > 1e-12
    pi = np.zeros((H, S, A))
    best = np.argmax(b, -1)
    first = space.first_answers()
    for s in range(S):
        splitting = [q for q in range(Q) if len(set(task.answers[q, live[s]])) > 1]
        splitting = [q for q in splitting if first[s, q] < 0] or splitting
        for t in range(H):
            if b[s].max() >= confidence or not splitting or t == H - 1:
                pi[t, s, Q + best[s]] = 1.0
            else:
                pi[t, s, splitting] = 1.0 / len(splitting)
    pi = (1 - noise) * pi + noise / A
    pi[:, 0] = 0.0  # DONE: the dialogue is over; every policy of the package acts alike there
    pi[:, 0, 0] = 1.0
    return pi


def behaviour_cloning(space: SummarySpace, dialogues: list[Dialogue], *, smoothing: float = 0.5) -> np.ndarray:
    """Count-based BC (the SFT initialisation): ``pi[t, s, a] ∝ N_t(s, a) + smoothing``, falling back
    to counts pooled over turns and then to uniform where turn ``t`` never visited ``s``."""
    task = space.task
    H, S, A = task.horizon, space.n_states, task.n_actions
    N = np.zeros((H, S, A))
    for d in dialogues:
        for t, (s, a) in enumerate(zip(d.states, d.actions)):
            N[t, s, a] += 1
    pooled = N.sum(0)
    pi = np.full((H, S, A), 1.0 / A)
    for t in range(H):
        seen = N[t].sum(-1) > 0
        pooled_seen = ~seen & (pooled.sum(-1) > 0)
        pi[t, seen] = (N[t, seen] + smoothing) / (N[t, seen].sum(-1, keepdims=True) + smoothing * A)
        pi[t, pooled_seen] = (pooled[pooled_seen] + smoothing) / (pooled[pooled_seen].sum(-1, keepdims=True) + smoothing * A)
    return pi
