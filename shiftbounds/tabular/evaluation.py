"""Exact evaluation of finite-horizon MDPs: occupancies, values, returns, dynamic programming.

These are the only implementations of the forward recursion (occupancy measures) and the
backward recursion (policy evaluation and Bellman optimality) in the package; bounds, shift
measures, experiments and notebooks all call them (docs/theory.md §1, §4).

Each turn is one contraction with ``transitions[..., t, :, :, :]`` (see
:func:`shiftbounds.tabular.backend.push_forward`), so a batch of MDPs costs one
streaming pass over ``transitions`` per recursion, on NumPy or torch (CPU or CUDA) alike.
"""

from __future__ import annotations

import numpy as np

from shiftbounds.tabular import backend as B
from shiftbounds.tabular.backend import Array
from shiftbounds.tabular.mdp import TabularMDP, check_policy, greedy_policy


def turn_rewards(mdp: TabularMDP, policy: Array) -> Array:
    """``f_t(s) = sum_a pi_t(a|s) r_t(s, a)``; shape ``[..., H, S]`` (docs/theory.md §4)."""
    return (policy * mdp.rewards).sum(-1)


def occupancy(mdp: TabularMDP, policy: Array) -> Array:
    """State occupancy ``d_t^{pi,T}`` for ``t = 0..H-1``; shape ``[..., H, S]``.

    Recurrence (docs/theory.md §1): ``d_0 = mu0``,
    ``d_{t+1}(s') = sum_{s,a} d_t(s) pi_t(a|s) T_t(s'|s, a)``.
    """
    pi = check_policy(policy, mdp)
    d = mdp.initial
    out = [d]
    for t in range(mdp.horizon - 1):
        joint = d[..., :, None] * pi[..., t, :, :]  # [..., S, A]
        d = B.push_forward(joint, mdp.transitions[..., t, :, :, :])  # [..., S]
        out.append(d)
    return B.stack(out, -2)


CACHE_BYTES = 1 << 22  # 4 MiB: best of 0.5-4 MiB measured with benchmarks/tabular.py (per-call overhead vs cache)
"""Kernel bytes per chunk when a stationary batch is processed chunk by chunk."""


def _stationary_chunks(mdp: TabularMDP, policy: Array | None) -> list[tuple[TabularMDP, Array | None]] | None:
    """Split a batch of *stationary* NumPy MDPs into cache-sized chunks, or ``None``.

    A kernel passed as ``np.broadcast_to(T[..., None, :, :, :, :], (..., H, S, A, S))`` has
    stride 0 along the turn axis: every turn reads the same memory. Running all turns on a few
    MDPs at a time keeps that memory in cache, instead of streaming the whole batch each turn.
    Non-stationary kernels gain nothing from this (each turn's kernel is read once anyway).
    """
    T = mdp.transitions
    if B.is_torch(T) or T.ndim < 5 or T.strides[-4] != 0 or T.shape[0] < 2:
        return None
    per_mdp = T[0, 0].nbytes * max(1, int(np.prod(T.shape[1:-4])))
    size = max(1, CACHE_BYTES // per_mdp)
    n = mdp.batch_shape[0]
    if size >= n:
        return None

    def cut(x: Array, lo: int, hi: int, core: int) -> Array:
        return x[lo:hi] if x.ndim > core and x.shape[0] == n else x

    return [
        (
            TabularMDP._unchecked(cut(T, lo, lo + size, 4), cut(mdp.rewards, lo, lo + size, 3),
                                  cut(mdp.initial, lo, lo + size, 1)),
            None if policy is None else cut(policy, lo, lo + size, 3),
        )
        for lo in range(0, n, size)
    ]


def _backward(mdp: TabularMDP, policy: Array | None, in_cache: bool = False) -> tuple[Array, Array]:
    """Backward induction. With a policy: ``Q^pi`` and ``V^pi``; with ``None``: ``Q*`` and ``V*``.

    ``Q_t(s,a) = r_t(s,a) + sum_s' T_t(s'|s,a) V_{t+1}(s')``, ``V_H = 0``, and
    ``V_t(s) = sum_a pi_t(a|s) Q_t(s,a)`` (or ``max_a Q_t(s,a)``).
    Returns ``Q`` of shape ``[..., H, S, A]`` and ``V`` of shape ``[..., H+1, S]``.
    ``in_cache`` (set for cache-sized stationary chunks) contracts with BLAS ``matmul``, which
    beats ``einsum`` once the kernel sits in cache; streaming from memory, ``einsum`` wins.
    """
    chunks = _stationary_chunks(mdp, policy)
    if chunks is not None:
        parts = [_backward(m, p, in_cache=True) for m, p in chunks]
        return np.concatenate([q for q, _ in parts]), np.concatenate([v for _, v in parts])
    S, A = mdp.n_states, mdp.n_actions
    V = B.zeros_like(mdp.rewards[..., -1, :, 0])
    Qs, Vs = [], [V]
    for t in reversed(range(mdp.horizon)):
        T_t = mdp.transitions[..., t, :, :, :]
        if in_cache:
            flat = T_t.reshape(tuple(T_t.shape[:-3]) + (S * A, S))  # [..., S*A, S]
            cont = (flat @ V[..., :, None]).reshape(tuple(T_t.shape[:-3]) + (S, A))
        else:
            cont = B.expect_next(T_t, V)  # [..., S, A]
        Q = mdp.rewards[..., t, :, :] + cont
        V = B.amax(Q, -1) if policy is None else (policy[..., t, :, :] * Q).sum(-1)
        Qs.append(Q)
        Vs.append(V)
    return B.stack(Qs[::-1], -3), B.stack(Vs[::-1], -2)


def q_values(mdp: TabularMDP, policy: Array) -> Array:
    """``Q_t^pi(s, a)``, shape ``[..., H, S, A]`` (backward induction, docs/theory.md §4)."""
    return _backward(mdp, check_policy(policy, mdp))[0]


def v_values(mdp: TabularMDP, policy: Array) -> Array:
    """``V_t^pi(s)`` for ``t = 0..H``, shape ``[..., H+1, S]``; ``V_H = 0``."""
    return _backward(mdp, check_policy(policy, mdp))[1]


def expected_return(mdp: TabularMDP, policy: Array) -> Array:
    """``J_T(pi) = sum_t sum_{s,a} d_t^{pi,T}(s) pi_t(a|s) r_t(s,a)``; shape ``[...]`` (docs/theory.md §1)."""
    return (occupancy(mdp, policy) * turn_rewards(mdp, policy)).sum((-2, -1))


def static_context_return(mdp: TabularMDP, policy: Array, data_policy: Array) -> Array:
    """Static Context RL objective on logged contexts (docs/theory.md §2).

    ``J_static(pi) = sum_t sum_{s,a} d_t^{pi_data}(s) pi_t(a|s) r_t(s,a)``; shape ``[...]``.
    """
    pi = check_policy(policy, mdp)
    d_data = occupancy(mdp, check_policy(data_policy, mdp, "data_policy"))
    return (d_data * turn_rewards(mdp, pi)).sum((-2, -1))


def optimal_values(mdp: TabularMDP) -> tuple[Array, Array]:
    """``Q*`` (``[..., H, S, A]``) and ``V*`` (``[..., H+1, S]``) by Bellman optimality."""
    return _backward(mdp, None)


def optimal_policy(mdp: TabularMDP) -> Array:
    """A deterministic optimal policy ``[..., H, S, A]``; ties go to the lowest action index
    (see :func:`shiftbounds.tabular.mdp.greedy_policy`)."""
    return greedy_policy(optimal_values(mdp)[0])
