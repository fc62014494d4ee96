"""One cell of the tabular dialogue study: logs, paradigms and exact measurements.

:func:`prepare_task` builds what depends only on the task and horizon (summary space, real-user
MDP, ``pi_data``); :func:`logged_paradigms` what depends on the logs (Static Context RL variants,
SFT, calibrated simulators); :func:`prompted_paradigm` what depends on the prompted simulator's
knobs (Interactive RL). The regime map combines them without recomputing shared pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shiftbounds.dialogue.agents import behaviour_cloning, data_policy
from shiftbounds.dialogue.calibration import fit_count_model, fit_shared_model
from shiftbounds.dialogue.logs import Dialogue, sample_dialogues
from shiftbounds.dialogue.paradigms import evaluate_policy, interactive_rl, static_context_rl
from shiftbounds.dialogue.summary import SummarySpace, build_space, success_rewards, user_mdp
from shiftbounds.dialogue.tasks import REAL_USERS, TASKS, HiddenGoalTask, UserModel, prompted_simulator
from shiftbounds.tabular import TabularMDP, greedy_policy, optimal_policy, q_values

PARADIGMS = ("static-myopic", "static-one-step", "interactive", "calibrated-count", "calibrated-shared")
REFERENCES = ("optimal", "pi_data", "static-infinite-data", "sft")


@dataclass(frozen=True)
class PreparedTask:
    """Everything that depends only on the task and its horizon."""

    task: HiddenGoalTask
    space: SummarySpace
    real: UserModel
    real_mdp: TabularMDP
    data_policy: np.ndarray
    success: np.ndarray

    def evaluate(self, policy: np.ndarray, train_mdp: TabularMDP | None = None) -> dict:
        """:func:`~shiftbounds.dialogue.paradigms.evaluate_policy` against this task's real user.

        The policy's row at the ``DONE`` summary (no act happens there; reward 0, absorbing) is set
        to ``pi_data``'s, so that an ended dialogue adds nothing to ``eps_t``; returns and every
        occupancy are unchanged by this.
        """
        policy = np.array(policy, dtype=float, copy=True)
        policy[:, 0] = self.data_policy[:, 0]
        return evaluate_policy(self.real_mdp, policy, self.data_policy, self.success, train_mdp)


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


def reference_results(prep: PreparedTask) -> dict:
    """The optimal real-user policy, ``pi_data`` itself, and a static learner with infinite logs:
    one exact step of policy improvement, greedy on ``Q^{pi_data}`` of the real user at every
    context (a much stronger baseline than any finite-log static learner; reported apart)."""
    return {
        "optimal": prep.evaluate(optimal_policy(prep.real_mdp)),
        "pi_data": prep.evaluate(prep.data_policy),
        "static-infinite-data": prep.evaluate(greedy_policy(q_values(prep.real_mdp, prep.data_policy))),
    }


def sample_logs(prep: PreparedTask, n: int, *, rng: np.random.Generator) -> list[Dialogue]:
    """``n`` dialogues of ``pi_data`` with the real user."""
    return sample_dialogues(prep.space, prep.data_policy, prep.real, n, rng=rng)


def logged_paradigms(prep: PreparedTask, logs: list[Dialogue], count_alpha: float = 1.0) -> dict:
    """SFT, both Static Context RL variants and both calibrated simulators from the same logs."""
    sft = behaviour_cloning(prep.space, logs)
    count_mdp = fit_count_model(prep.space, logs, alpha=count_alpha)
    shared = fit_shared_model(prep.space, logs)
    shared_mdp = user_mdp(prep.space, shared)
    return {
        "sft": prep.evaluate(sft),
        "static-myopic": prep.evaluate(static_context_rl(prep.space, logs, sft, "myopic")),
        "static-one-step": prep.evaluate(static_context_rl(prep.space, logs, sft, "one_step")),
        "calibrated-count": prep.evaluate(interactive_rl(count_mdp), count_mdp),
        "calibrated-shared": {**prep.evaluate(interactive_rl(shared_mdp), shared_mdp),
                              "fitted_model": {"answer_error": shared.answer_error, "clarify": shared.clarify,
                                               "accept_wrong": shared.accept_wrong, "leak": shared.leak}},
    }


def prompted_paradigm(prep: PreparedTask, accept_wrong: float, leak: float) -> dict:
    """Interactive RL against the prompted simulator with the given sycophancy and leak rates."""
    sim_mdp = user_mdp(prep.space, prompted_simulator(accept_wrong=accept_wrong, leak=leak))
    return prep.evaluate(interactive_rl(sim_mdp), sim_mdp)
