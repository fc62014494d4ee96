"""Exact per-turn shift measures: policy-induced (§2), simulator-induced (§3) and unified (§3, Thm 3).

Every quantity is computed from exact occupancies (:func:`shiftbounds.tabular.occupancy`), per
turn, for single MDPs or batches, NumPy or torch. Results are frozen dataclasses whose array
fields have the turn on the last axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shiftbounds.tabular import backend as B
from shiftbounds.tabular.backend import Array
from shiftbounds.tabular.evaluation import expected_return, occupancy, turn_rewards
from shiftbounds.tabular.mdp import TabularMDP, check_policy, reward_span
from shiftbounds.theory.bounds import compounding, theorem1_rhs, theorem2_rhs, theorem3_rhs


def total_variation(p: Array, q: Array) -> Array:
    """``TV(p, q) = 1/2 ||p - q||_1`` over the last axis (docs/theory.md §1)."""
    return 0.5 * abs(p - q).sum(-1)


def _check_same_space(a: TabularMDP, b: TabularMDP, names: tuple[str, str]) -> None:
    shape_a = (a.horizon, a.n_states, a.n_actions)
    shape_b = (b.horizon, b.n_states, b.n_actions)
    if shape_a != shape_b:
        raise ValueError(f"{names[0]} has (H, S, A) = {shape_a} but {names[1]} has {shape_b}; they must match")


def _stationary(x: Array, axis: int) -> bool:
    return not B.is_torch(x) and x.strides[axis] == 0 and x.shape[axis] > 1


def kernel_tv(real_mdp: TabularMDP, sim_mdp: TabularMDP) -> Array:
    """``TV(T_real,t(.|s,a), T_sim,t(.|s,a))``; shape ``[..., H, S, A]``.

    Kernels passed as stride-0 broadcasts over turns (stationary users) are compared once and
    the result broadcast, instead of materialising ``H`` copies of the difference.
    """
    Tr, Ts = real_mdp.transitions, sim_mdp.transitions
    if _stationary(Tr, -4) and _stationary(Ts, -4):
        once = total_variation(Tr[..., :1, :, :, :], Ts[..., :1, :, :, :])
        return np.broadcast_to(once, once.shape[:-3] + (Tr.shape[-4],) + once.shape[-2:])
    return total_variation(Tr, Ts)


def kernel_error(real_mdp: TabularMDP, sim_mdp: TabularMDP, contexts: Array, policy: Array) -> Array:
    """Per-turn simulator error at given contexts: ``sum_{s,a} w_t(s) pi_t(a|s) TV(T_real, T_sim)(s,a)``.

    ``contexts`` is ``w[..., H, S]``: ``d^{pi,sim}`` gives ``delta_t`` (§3), ``d^{pi_data,real}`` with
    ``policy = pi_data`` gives the error on logged contexts, which is what fitting a simulator to
    logs controls (§3, Theorem 3 remark). Shape ``[..., H]``.
    """
    return (contexts[..., :, :, None] * policy * kernel_tv(real_mdp, sim_mdp)).sum((-2, -1))


def reward_error(real_mdp: TabularMDP, sim_mdp: TabularMDP, contexts: Array, policy: Array) -> Array:
    """Per-turn reward mismatch ``sum_{s,a} w_t(s) pi_t(a|s) |r_real - r_sim|(s,a)``; ``rho_t`` for ``w = d^{pi,sim}``."""
    return (contexts[..., :, :, None] * policy * abs(real_mdp.rewards - sim_mdp.rewards)).sum((-2, -1))


@dataclass(frozen=True)
class PolicyShift:
    """Policy-induced shift of Static Context RL (docs/theory.md §2). Arrays ``[..., H]`` or ``[...]``.

    Attributes:
        eps: ``eps_t = sum_s d_t^{pi_data}(s) TV(pi_t(.|s), pi_data_t(.|s))``.
        Delta: ``Delta_t = TV(d_t^pi, d_t^{pi_data})``.
        bound: ``B(eps)_t`` (Lemma 1: ``Delta <= bound``).
        return_gap: ``J(pi) - J_static(pi)`` (signed).
        theorem1_rhs: ``R sum_t B(eps)_t`` (Theorem 1: ``|return_gap| <= theorem1_rhs``).
        reward_span: ``R``.
    """

    eps: Array
    Delta: Array
    bound: Array
    return_gap: Array
    theorem1_rhs: Array
    reward_span: Array


def policy_shift(mdp: TabularMDP, policy: Array, data_policy: Array) -> PolicyShift:
    """Exact ``eps_t``, ``Delta_t``, ``B(eps)_t``, ``J - J_static`` and Theorem 1's bound."""
    pi = check_policy(policy, mdp)
    pi_data = check_policy(data_policy, mdp, "data_policy")
    d_pi = occupancy(mdp, pi)
    d_data = occupancy(mdp, pi_data)
    eps = (d_data * total_variation(pi, pi_data)).sum(-1)
    f = turn_rewards(mdp, pi)
    gap = ((d_pi - d_data) * f).sum((-2, -1))
    R = reward_span(mdp)
    return PolicyShift(
        eps=eps,
        Delta=total_variation(d_pi, d_data),
        bound=compounding(eps),
        return_gap=gap,
        theorem1_rhs=theorem1_rhs(eps, R),
        reward_span=R,
    )


@dataclass(frozen=True)
class SimulatorShift:
    """Simulator-induced shift of Interactive RL (docs/theory.md §3). Arrays ``[..., H]`` or ``[...]``.

    Attributes:
        delta: ``delta_t = sum_{s,a} d_t^{pi,sim}(s) pi_t(a|s) TV(T_real,t(.|s,a), T_sim,t(.|s,a))``.
        D: ``D_t = TV(d_t^{pi,real}, d_t^{pi,sim})``.
        rho: ``rho_t = sum_{s,a} d_t^{pi,sim}(s) pi_t(a|s) |r_real - r_sim|(s,a)``.
        bound: ``B(delta)_t`` (Lemma 2: ``D <= bound``).
        return_gap: ``J_real(pi) - J_sim(pi)`` (signed).
        theorem2_rhs: ``R sum_t B(delta)_t + sum_t rho_t``.
        reward_span: ``R`` of the real reward.
    """

    delta: Array
    D: Array
    rho: Array
    bound: Array
    return_gap: Array
    theorem2_rhs: Array
    reward_span: Array


def simulator_shift(real_mdp: TabularMDP, sim_mdp: TabularMDP, policy: Array) -> SimulatorShift:
    """Exact ``delta_t``, ``D_t``, ``rho_t``, ``B(delta)_t``, ``J_real - J_sim`` and Theorem 2's bound.

    The two MDPs share ``(H, S, A)`` and the initial law is taken from each (a simulator may
    also open the dialogue differently; Lemma 2 then needs ``mu0`` equal, which the tests use).
    """
    _check_same_space(real_mdp, sim_mdp, ("real_mdp", "sim_mdp"))
    pi = check_policy(policy, real_mdp)
    d_real = occupancy(real_mdp, pi)
    d_sim = occupancy(sim_mdp, pi)
    delta = kernel_error(real_mdp, sim_mdp, d_sim, pi)
    rho = reward_error(real_mdp, sim_mdp, d_sim, pi)
    R = reward_span(real_mdp)
    return SimulatorShift(
        delta=delta,
        D=total_variation(d_real, d_sim),
        rho=rho,
        bound=compounding(delta),
        return_gap=expected_return(real_mdp, pi) - expected_return(sim_mdp, pi),
        theorem2_rhs=theorem2_rhs(delta, rho, R),
        reward_span=R,
    )


@dataclass(frozen=True)
class UnifiedShift:
    """Theorem 3: training contexts ``q_t = d_t^{beta,T_sim}`` against deployment ``d_t^{pi,T_real}``.

    Attributes:
        eps: ``sum_s q_t(s) TV(pi_t(.|s), beta_t(.|s))``.
        delta: ``sum_{s,a} q_t(s) pi_t(a|s) TV(T_real, T_sim)(s,a)``.
        rho: ``sum_{s,a} q_t(s) pi_t(a|s) |r_real - r_sim|(s,a)``.
        context_shift: ``TV(q_t, d_t^{pi,real})``.
        bound: ``B(eps + delta)_t`` (Theorem 3: ``context_shift <= bound``).
        objective_bias: ``J_real(pi) - J_train(pi)``, with
            ``J_train(pi) = sum_t sum_{s,a} q_t(s) pi_t(a|s) r_sim,t(s,a)``.
        theorem3_rhs: ``R sum_t B(eps + delta)_t + sum_t rho_t``.
    """

    eps: Array
    delta: Array
    rho: Array
    context_shift: Array
    bound: Array
    objective_bias: Array
    theorem3_rhs: Array


def unified_shift(
    real_mdp: TabularMDP, sim_mdp: TabularMDP, policy: Array, behaviour_policy: Array
) -> UnifiedShift:
    """Theorem 3's quantities for prefixes drawn from ``behaviour_policy`` and ``sim_mdp``.

    Static Context RL is ``behaviour_policy = pi_data, sim_mdp = real_mdp``; Interactive and
    Calibrated Interactive RL are ``behaviour_policy = policy`` with their simulator.
    The hybrid step at turn ``j`` changes both the action law and the user law; the triangle
    inequality splits its cost into ``eps_j + delta_j``.
    """
    _check_same_space(real_mdp, sim_mdp, ("real_mdp", "sim_mdp"))
    pi = check_policy(policy, real_mdp)
    beta = check_policy(behaviour_policy, real_mdp, "behaviour_policy")
    q = occupancy(sim_mdp, beta)
    d_real = occupancy(real_mdp, pi)
    eps = (q * total_variation(pi, beta)).sum(-1)
    delta = kernel_error(real_mdp, sim_mdp, q, pi)
    rho = reward_error(real_mdp, sim_mdp, q, pi)
    j_train = (q[..., :, :, None] * pi * sim_mdp.rewards).sum((-3, -2, -1))
    R = reward_span(real_mdp)
    return UnifiedShift(
        eps=eps,
        delta=delta,
        rho=rho,
        context_shift=total_variation(q, d_real),
        bound=compounding(eps + delta),
        objective_bias=expected_return(real_mdp, pi) - j_train,
        theorem3_rhs=theorem3_rhs(eps, delta, rho, R),
    )
