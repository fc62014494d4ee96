"""Task set-up shared by the exact and the neural views: a built-in task by name, its summary space,
real user and exact real-user MDP, the logging agent ``pi_data``, and its logs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shiftbounds.dialogue.logs import Dialogue, sample_dialogues
from shiftbounds.dialogue.summary import SummarySpace, build_space, posterior, success_rewards, user_mdp
from shiftbounds.dialogue.tasks import REAL_USERS, TASKS, HiddenGoalTask, UserModel
from shiftbounds.tabular import TabularMDP


@dataclass(frozen=True)
class PreparedTask:
    """Everything that depends only on the task and its horizon."""

    task: HiddenGoalTask
    space: SummarySpace
    real: UserModel
    real_mdp: TabularMDP
    data_policy: np.ndarray
    success: np.ndarray


def make_task(name: str, horizon: int, reward_source: str = "acceptance", wrong_penalty: float = 0.3) -> HiddenGoalTask:
    """A built-in task by name (:data:`~shiftbounds.dialogue.tasks.TASKS`)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    return TASKS[name](horizon=horizon, reward_source=reward_source, wrong_penalty=wrong_penalty)


def prepare_task(task: HiddenGoalTask, real_user: str = "memory") -> PreparedTask:
    """Summary space, real user (a name in :data:`~shiftbounds.dialogue.tasks.REAL_USERS`), its exact
    MDP and the logging agent. The space tracks the user's memory only when the real user has one."""
    if real_user not in REAL_USERS:
        raise ValueError(f"unknown real user {real_user!r}; choose from {sorted(REAL_USERS)}")
    real = REAL_USERS[real_user](task)
    space = build_space(task, memory=real.has_memory)
    return PreparedTask(task, space, real, user_mdp(space, real), data_policy(space), success_rewards(space, real))


def data_policy(space: SummarySpace, *, confidence: float = 0.6, noise: float = 0.1,
                belief: UserModel | None = None) -> np.ndarray:
    """A plausible, imperfect human agent ``pi_data[t, s, a]``.

    With probability ``1 - noise``: propose the most likely goal (under ``belief``, by default a
    user who errs 5 % of the time) when its probability reaches ``confidence`` or at the last turn;
    otherwise ask a question chosen uniformly among those that still split the possible goals,
    preferring questions not answered yet (a person rarely asks the same thing twice).
    With probability ``noise``: any act uniformly at random. In the ``DONE`` summary (the dialogue
    has ended) the policy is the fixed act 0, as for every policy evaluated by the package
    (:func:`shiftbounds.dialogue.exact.study.evaluate`), so ended dialogues add no ``eps``.
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


def sample_logs(prep: PreparedTask, n: int, *, rng: np.random.Generator) -> list[Dialogue]:
    """``n`` dialogues of ``pi_data`` with the real user."""
    return sample_dialogues(prep.space, prep.data_policy, prep.real, n, rng=rng)
