"""The exact identities of docs/theory.md §4, each returned as both sides.

The left-hand sides use the backward recursion (``J = sum_s mu0(s) V_0(s)``) and the right-hand
sides the forward one (occupancies), so equality to 1e-10 checks the two recursions against
each other as well as the identity.
"""

from __future__ import annotations

from dataclasses import dataclass

from shiftbounds.tabular.backend import Array
from shiftbounds.tabular.evaluation import occupancy, q_values, turn_rewards, v_values
from shiftbounds.tabular.mdp import TabularMDP, check_policy


@dataclass(frozen=True)
class Identity:
    """Both sides of an exact identity, arrays of the batch shape."""

    lhs: Array
    rhs: Array


def _value_return(mdp: TabularMDP, policy: Array) -> Array:
    return (mdp.initial * v_values(mdp, policy)[..., 0, :]).sum(-1)


def performance_difference(mdp: TabularMDP, policy: Array, other: Array) -> Identity:
    """``J(pi) - J(pi') = sum_t E_{s~d_t^pi}[ sum_a pi_t(a|s) Q_t^{pi'}(s,a) - V_t^{pi'}(s) ]``.

    Proof sketch: telescope ``V^{pi'}`` along trajectories of ``pi``
    (Kakade & Langford 2002, finite-horizon form).
    """
    pi = check_policy(policy, mdp)
    pi2 = check_policy(other, mdp, "other")
    q2 = q_values(mdp, pi2)
    v2 = v_values(mdp, pi2)[..., :-1, :]
    advantage = (pi * q2).sum(-1) - v2  # [..., H, S]
    rhs = (occupancy(mdp, pi) * advantage).sum((-2, -1))
    return Identity(lhs=_value_return(mdp, pi) - _value_return(mdp, pi2), rhs=rhs)


def simulation_lemma(real_mdp: TabularMDP, sim_mdp: TabularMDP, policy: Array) -> Identity:
    """``J_real(pi) - J_sim(pi) = sum_t E_{(s,a)~d_t^{pi,sim} x pi}[(r_real - r_sim)(s,a)
    + sum_s' (T_real - T_sim)(s'|s,a) V_{t+1}^{pi,real}(s')]``
    ``+ sum_s (mu0_real - mu0_sim)(s) V_0^{pi,real}(s)`` (the last term vanishes when both
    models open the dialogue alike, as in docs/theory.md §4).

    Proof sketch: telescope ``V^{pi,real}`` along simulator trajectories.
    """
    pi = check_policy(policy, real_mdp)
    v_real = v_values(real_mdp, pi)  # [..., H+1, S]
    d_sim = occupancy(sim_mdp, pi)
    dT = real_mdp.transitions - sim_mdp.transitions  # [..., H, S, A, S]
    next_value = (dT * v_real[..., 1:, None, None, :]).sum(-1)  # [..., H, S, A]
    integrand = (real_mdp.rewards - sim_mdp.rewards) + next_value
    rhs = (d_sim[..., :, :, None] * pi * integrand).sum((-3, -2, -1))
    rhs = rhs + ((real_mdp.initial - sim_mdp.initial) * v_real[..., 0, :]).sum(-1)
    return Identity(lhs=_value_return(real_mdp, pi) - _value_return(sim_mdp, pi), rhs=rhs)


def static_bias(mdp: TabularMDP, policy: Array, data_policy: Array) -> Identity:
    """``J(pi) - J_static(pi) = sum_t sum_s (d_t^pi - d_t^{pi_data})(s) f_t(s)``,
    ``f_t(s) = sum_a pi_t(a|s) r_t(s,a)`` (docs/theory.md §4)."""
    pi = check_policy(policy, mdp)
    d_data = occupancy(mdp, data_policy)
    f = turn_rewards(mdp, pi)
    lhs = _value_return(mdp, pi) - (d_data * f).sum((-2, -1))
    rhs = ((occupancy(mdp, pi) - d_data) * f).sum((-2, -1))
    return Identity(lhs=lhs, rhs=rhs)
