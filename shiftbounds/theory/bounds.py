"""Right-hand sides of Lemmas 1-2, Theorems 1-3 and Corollary 1 (docs/theory.md §2-3).

Pure functions of per-turn arrays (last axis = turn ``t``), NumPy or torch. The quantities they
take (``eps``, ``delta``, ``rho``, ``R``) are computed exactly by :mod:`shiftbounds.shift`.

Proof sketch shared by all of them (docs/theory.md §2): build hybrid processes ``Q_j`` that follow the
training-time law before turn ``j`` and the deployment law from ``j`` on. Consecutive hybrids
differ in the law of one turn only, taken at a context drawn from the training-time occupancy,
so by the data-processing inequality their turn-``t`` context laws are within the per-turn error
of turn ``j``. A telescoping sum over ``j < t`` and ``TV <= 1`` give ``B(x)_t``. Returns then
differ by at most ``R * TV`` per turn, because expectations of a function with range ``R`` do.
"""

from __future__ import annotations

from shiftbounds.tabular import backend as B
from shiftbounds.tabular.backend import Array


def compounding(x: Array) -> Array:
    """The compounding operator ``B(x)_t = min(1, sum_{k<t} x_k)`` along the last axis (docs/theory.md §1)."""
    return B.minimum(B.exclusive_cumsum(x), 1.0)


def lemma1_rhs(eps: Array) -> Array:
    """Lemma 1: ``Delta_t <= B(eps)_t``; returns ``B(eps)`` (per turn)."""
    return compounding(eps)


def lemma2_rhs(delta: Array) -> Array:
    """Lemma 2: ``D_t <= B(delta)_t``; returns ``B(delta)`` (per turn)."""
    return compounding(delta)


def theorem1_rhs(eps: Array, reward_span: Array) -> Array:
    """Theorem 1: ``|J(pi) - J_static(pi)| <= R sum_t B(eps)_t``; returns the right-hand side."""
    return reward_span * compounding(eps).sum(-1)


def theorem1_crude_rhs(eps_max: Array, horizon: int, reward_span: Array) -> Array:
    """Theorem 1's last step: ``R * eps_max * H (H - 1) / 2`` (valid for any ``eps_t <= eps_max``)."""
    return reward_span * eps_max * horizon * (horizon - 1) / 2


def corollary1_rhs(eps_comparator: Array, eps_static_optimum: Array, reward_span: Array) -> Array:
    """Corollary 1: ``J(pi*) - J(pi_hat) <= R sum_t [B(eps(pi*))_t + B(eps(pi_hat))_t]`` when
    ``pi_hat`` maximises ``J_static``. Proof: add and subtract ``J_static`` of both policies;
    ``J_static(pi*) - J_static(pi_hat) <= 0`` and Theorem 1 bounds the other two differences."""
    return reward_span * (compounding(eps_comparator) + compounding(eps_static_optimum)).sum(-1)


def theorem2_rhs(delta: Array, rho: Array, reward_span: Array) -> Array:
    """Theorem 2: ``|J_real(pi) - J_sim(pi)| <= R sum_t B(delta)_t + sum_t rho_t``.

    ``R`` is the span of the real reward: the proof splits the gap into
    ``E_{d_real} f_real - E_{d_sim} f_real`` (at most ``R D_t``) and
    ``E_{d_sim} (f_real - f_sim)`` (at most ``rho_t``)."""
    return reward_span * compounding(delta).sum(-1) + rho.sum(-1)


def theorem3_rhs(eps: Array, delta: Array, rho: Array, reward_span: Array) -> Array:
    """Theorem 3 (unified): objective bias ``<= R sum_t B(eps + delta)_t + sum_t rho_t``,
    with ``eps``, ``delta``, ``rho`` measured on the training contexts ``q_t = d_t^{beta,T_sim}``."""
    return reward_span * compounding(eps + delta).sum(-1) + rho.sum(-1)
