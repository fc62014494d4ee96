"""One cell of the tabular dialogue study: every arm solved and measured exactly.

:func:`~shiftbounds.dialogue.prepare.prepare_task` builds what depends only on the task and
horizon; :func:`reference_results` the optimum, ``pi_data`` and the infinite-log static learner;
:func:`logged_paradigms` what depends on the logs (Static Context RL variants, SFT, calibrated
simulators); :func:`prompted_paradigm` what depends on the prompted simulator's knobs (Interactive
RL). The regime map combines them without recomputing shared pieces.
"""

from __future__ import annotations

import numpy as np

from shiftbounds.dialogue.exact.agents import behaviour_cloning, shared_behaviour_cloning
from shiftbounds.dialogue.exact.calibration import fit_count_model, fit_shared_model
from shiftbounds.dialogue.exact.paradigms import evaluate_policy, fitted_q, interactive_rl, static_context_rl
from shiftbounds.dialogue.logs import Dialogue
from shiftbounds.dialogue.prepare import PreparedTask
from shiftbounds.dialogue.summary import user_mdp
from shiftbounds.dialogue.tasks import prompted_simulator
from shiftbounds.tabular import TabularMDP, greedy_policy, optimal_policy, q_values

ARMS = ("static-myopic", "static-one-step", "static-fitted-q", "interactive", "calibrated-count", "calibrated-shared")
REFERENCES = ("optimal", "pi_data", "static-infinite-data", "sft", "sft-count")


def evaluate(prep: PreparedTask, policy: np.ndarray, train_mdp: TabularMDP | None = None) -> dict:
    """:func:`~shiftbounds.dialogue.exact.paradigms.evaluate_policy` against the prepared task's real user.

    The policy's row at the ``DONE`` summary (no act happens there; reward 0, absorbing) is set
    to ``pi_data``'s, so that an ended dialogue adds nothing to ``eps_t``; returns and every
    occupancy are unchanged by this.
    """
    policy = np.array(policy, dtype=float, copy=True)
    policy[:, 0] = prep.data_policy[:, 0]
    return evaluate_policy(prep.real_mdp, policy, prep.data_policy, prep.success, train_mdp)


def reference_results(prep: PreparedTask) -> dict:
    """The optimal real-user policy, ``pi_data`` itself, and a static learner with infinite logs:
    one exact step of policy improvement, greedy on ``Q^{pi_data}`` of the real user at every
    context (a much stronger baseline than any finite-log static learner; reported apart)."""
    return {
        "optimal": evaluate(prep, optimal_policy(prep.real_mdp)),
        "pi_data": evaluate(prep, prep.data_policy),
        "static-infinite-data": evaluate(prep, greedy_policy(q_values(prep.real_mdp, prep.data_policy))),
    }


def logged_paradigms(prep: PreparedTask, logs: list[Dialogue], count_alpha: float = 1.0) -> dict:
    """From the same logs: SFT (the shared-parameter model of
    :func:`~shiftbounds.dialogue.exact.agents.shared_behaviour_cloning`, the start of every static
    learner; ``sft-count``, the plain count model, for comparison), the three logs-only learners
    (Static Context RL myopic and one-step, fitted Q) and both calibrated simulators."""
    sft = shared_behaviour_cloning(prep.space, logs)
    count_mdp = fit_count_model(prep.space, logs, alpha=count_alpha)
    shared = fit_shared_model(prep.space, logs)
    shared_mdp = user_mdp(prep.space, shared)
    return {
        "sft": evaluate(prep, sft),
        "sft-count": evaluate(prep, behaviour_cloning(prep.space, logs)),
        "static-myopic": evaluate(prep, static_context_rl(prep.space, logs, sft, "myopic")),
        "static-one-step": evaluate(prep, static_context_rl(prep.space, logs, sft, "one_step")),
        "static-fitted-q": evaluate(prep, fitted_q(prep.space, logs, sft)),
        "calibrated-count": evaluate(prep, interactive_rl(count_mdp), count_mdp),
        "calibrated-shared": {**evaluate(prep, interactive_rl(shared_mdp), shared_mdp),
                              "fitted_model": {"answer_error": shared.answer_error, "clarify": shared.clarify,
                                               "accept_wrong": shared.accept_wrong, "leak": shared.leak}},
    }


def prompted_paradigm(prep: PreparedTask, accept_wrong: float, leak: float) -> dict:
    """Interactive RL against the prompted simulator with the given sycophancy and leak rates."""
    sim_mdp = user_mdp(prep.space, prompted_simulator(accept_wrong=accept_wrong, leak=leak))
    return evaluate(prep, interactive_rl(sim_mdp), sim_mdp)
