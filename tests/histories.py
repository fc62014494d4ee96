"""Reading a user model's reply off a raw dialogue history, recounted from scratch (no summary,
no :class:`~shiftbounds.dialogue.rollout.Memory`): the independent reference of the history tests."""

from __future__ import annotations

import numpy as np

from shiftbounds.dialogue.tasks import NO, YES, HiddenGoalTask, UserModel


def reply_from_history(task: HiddenGoalTask, model: UserModel, history: tuple, a: int, goal: int) -> np.ndarray:
    """The reply to agent act ``a`` after ``history = ((a_0, k_0), ...)``: the user's earlier answer to
    ``a`` and the number of repeated questions are recounted from the history itself."""
    answered: dict[int, int] = {}
    repeats = 0
    for a_j, k_j in history:
        if task.is_question(a_j):
            repeats += a_j in answered
            if k_j in (YES, NO) and a_j not in answered:
                answered[a_j] = int(k_j == YES)
    previous = answered.get(a, -1) if task.is_question(a) else -1
    return model.response(task, a, goal, turn=len(history), previous=previous, repeats=repeats)
