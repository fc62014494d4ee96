"""The three training paradigms, solved exactly on the tabular view (docs/pipeline.md "The claim under test").

Every paradigm starts from the same logs (``n`` dialogues of ``pi_data`` with the real user):

* **Static Context RL** improves the policy on logged contexts only (the contexts visited at turn
  ``t`` in the logs); elsewhere it keeps the SFT policy (behaviour cloning), since it has no
  training signal there. Policy class: deterministic on logged contexts. Two variants:
  ``myopic`` maximises the judge's immediate reward, estimated from the logged goals at that
  context (this maximises the empirical ``J_static``); ``one_step`` maximises the return-to-go of
  the logged continuation for logged actions (immediate judged reward for the others): one step
  of policy improvement over ``pi_data``.
* **Fitted Q on the logs** (:func:`fitted_q`), the multi-turn logs-only baseline: dynamic
  programming on the empirical model of the logs (transitions and judged rewards of every logged
  (turn, summary, act)), acting only among logged acts (a support constraint), the SFT policy
  elsewhere. It optimises the multi-turn return from the logs alone.
* **Interactive RL**: the optimal policy against the prompt-based simulator (exact DP).
* **Calibrated Interactive RL**: the optimal policy against a simulator fitted to the same logs
  (:mod:`shiftbounds.dialogue.exact.calibration`), count model or shared-parameter model.

The exact solutions carry no KL penalty: they are the end points that regularised training
approaches as its budget grows.
"""

from __future__ import annotations

import numpy as np

from shiftbounds.dialogue.logs import Dialogue
from shiftbounds.dialogue.summary import SummarySpace
from shiftbounds.shift import kernel_error, policy_shift, simulator_shift
from shiftbounds.tabular import (
    TabularMDP,
    expected_return,
    greedy_policy,
    occupancy,
    optimal_policy,
    static_context_return,
)


def logged_contexts(space: SummarySpace, dialogues: list[Dialogue]) -> np.ndarray:
    """``[H, S]`` boolean: summary ``s`` was visited at turn ``t`` in the logs."""
    seen = np.zeros((space.task.horizon, space.n_states), dtype=bool)
    for d in dialogues:
        for t, s in enumerate(d.states):
            seen[t, s] = True
    return seen


def _judge_estimate(space: SummarySpace, dialogues: list[Dialogue]) -> np.ndarray:
    """Empirical judged reward ``[S, A]`` at logged contexts: the judge scores *any* act against
    the logged goal (as a reward model scores fresh generations on logged contexts)."""
    task = space.task
    S = space.n_states
    goal_counts = np.zeros((S, task.n_goals))
    for d in dialogues:
        for s in d.states:
            goal_counts[s, d.goal] += 1
    freq = goal_counts / np.maximum(goal_counts.sum(-1, keepdims=True), 1.0)
    r = np.zeros((S, task.n_actions))
    r[:, task.n_questions:] = freq * (1 + task.wrong_penalty) - task.wrong_penalty
    return r


def static_context_rl(space: SummarySpace, dialogues: list[Dialogue], sft_policy: np.ndarray,
                      variant: str = "myopic") -> np.ndarray:
    """Static Context RL's policy ``[H, S, A]`` from logs (see the module docstring)."""
    if variant not in ("myopic", "one_step"):
        raise ValueError(f"variant must be 'myopic' or 'one_step'; got {variant!r}")
    H = space.task.horizon
    seen = logged_contexts(space, dialogues)
    r_hat = _judge_estimate(space, dialogues)
    Q = np.broadcast_to(r_hat, (H,) + r_hat.shape).copy()
    if variant == "one_step":
        total = np.zeros_like(Q)
        count = np.zeros_like(Q)
        for d in dialogues:
            togo = np.cumsum(np.asarray(d.rewards)[::-1])[::-1]
            for t, (s, a) in enumerate(zip(d.states, d.actions)):
                total[t, s, a] += togo[t]
                count[t, s, a] += 1
        logged = count > 0
        Q[logged] = total[logged] / count[logged]
    pi = sft_policy.copy()
    pi[seen] = greedy_policy(Q[seen])
    return pi


def fitted_q(space: SummarySpace, dialogues: list[Dialogue], sft_policy: np.ndarray, *, pessimism: float = 1.0) -> np.ndarray:
    """The multi-turn logs-only learner's policy ``[H, S, A]`` (see the module docstring):
    ``Q_t(s, a) = r_hat_t(s, a) + sum_s' T_hat_t(s' | s, a) V_{t+1}(s') - pessimism * R / sqrt(N_t(s, a))``
    on logged ``(t, s, a)``, with the empirical means of the logged judged rewards and next
    summaries, ``R`` the judge's reward span and ``V_t(s) = max`` over logged acts; a dialogue that
    ended (``DONE``, or after turn ``H``) has value 0. The lower-confidence penalty keeps the
    maximum from chasing acts that paid once in few tries (without it, on ``booking`` with 500 logs
    the learner falls far below ``pi_data``); ``pessimism = 1`` was fixed on development log draws
    (docs/experiments.md)."""
    H, S, A = space.task.horizon, space.n_states, space.task.n_actions
    count = np.zeros((H, S, A))
    reward = np.zeros((H, S, A))
    nxt = np.zeros((H, S, A, S))
    for d in dialogues:
        for t, (s, a, r) in enumerate(zip(d.states, d.actions, d.rewards)):
            count[t, s, a] += 1
            reward[t, s, a] += r
            if t + 1 < len(d.states):
                nxt[t, s, a, d.states[t + 1]] += 1
            # else the dialogue ended after this turn (accepted, quit, or the horizon): value 0
    logged = count > 0
    n = np.maximum(count, 1.0)
    r_hat, T_hat = reward / n, nxt / n[..., None]
    span = 1.0 + space.task.wrong_penalty
    V = np.zeros(S)
    pi = sft_policy.copy()
    for t in reversed(range(H)):
        Q = np.where(logged[t], r_hat[t] + T_hat[t] @ V - pessimism * span / np.sqrt(n[t]), -np.inf)
        seen = logged[t].any(-1)
        pi[t, seen] = greedy_policy(Q[seen])
        V_next = np.zeros(S)
        V_next[seen] = Q[seen].max(-1)
        V_next[0] = 0.0  # DONE
        V = V_next
    return pi


def interactive_rl(sim_mdp: TabularMDP) -> np.ndarray:
    """Interactive RL (prompted simulator) or Calibrated Interactive RL (fitted simulator): the
    exact optimum of ``J_sim`` on the policy's own rollouts."""
    return optimal_policy(sim_mdp)


def evaluate_policy(real_mdp: TabularMDP, policy: np.ndarray, data_policy: np.ndarray,
                    success_rewards: np.ndarray, train_mdp: TabularMDP | None = None) -> dict:
    """Every exact measurement of a policy against the real user (docs/pipeline.md "Measurements").

    Returns a dict with scalars ``J_real``, ``success``, ``turns``, ``questions``, ``J_train``
    (``J_sim`` for simulator-trained policies, ``J_static`` otherwise), ``train_gap``
    (``J_train - J_real``), the bounds, and per-turn lists ``eps``, ``Delta``, ``B_eps``
    and, with a training simulator, ``delta``, ``D``, ``rho``, ``B_delta``, ``delta_on_logs``.
    """
    d = occupancy(real_mdp, policy)
    J_real = float(expected_return(real_mdp, policy))
    ps = policy_shift(real_mdp, policy, data_policy)
    out = {
        "J_real": J_real,
        "success": float(expected_return(real_mdp.with_rewards(np.broadcast_to(success_rewards, real_mdp.rewards.shape)), policy)),
        "turns": float((1 - d[:, 0]).sum()),
        "eps": ps.eps.tolist(),
        "Delta": ps.Delta.tolist(),
        "B_eps": ps.bound.tolist(),
        "theorem1_rhs": float(ps.theorem1_rhs),
        "static_gap": float(ps.return_gap),
    }
    if train_mdp is None:
        out["J_train"] = float(static_context_return(real_mdp, policy, data_policy))
    else:
        ss = simulator_shift(real_mdp, train_mdp, policy)
        d_logs = occupancy(real_mdp, data_policy)
        out.update({
            "J_train": float(expected_return(train_mdp, policy)),
            "delta": ss.delta.tolist(),
            "D": ss.D.tolist(),
            "rho": ss.rho.tolist(),
            "B_delta": ss.bound.tolist(),
            "theorem2_rhs": float(ss.theorem2_rhs),
            "delta_on_logs": kernel_error(real_mdp, train_mdp, d_logs, data_policy).tolist(),
        })
    out["train_gap"] = out["J_train"] - J_real
    return out
