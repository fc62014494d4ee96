"""Behaviour cloning over summaries: the SFT agent of the exact view, fitted to logged dialogues."""

from __future__ import annotations

import numpy as np

from shiftbounds.dialogue.logs import Dialogue
from shiftbounds.dialogue.summary import SummarySpace


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
