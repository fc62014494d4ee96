"""The exact engine against brute force, batching, torch, and its own validation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings

from shiftbounds.constructions import random_mdp, random_policy
from shiftbounds.tabular import (
    TabularMDP,
    deterministic_policy,
    expected_return,
    greedy_policy,
    mixture_policy,
    occupancy,
    optimal_policy,
    optimal_values,
    q_values,
    reward_span,
    softmax_policy,
    static_context_return,
    turn_rewards,
    uniform_policy,
    v_values,
)
from tests.strategies import IDENTITY_TOL, instances, with_corners


def brute_force(mdp: TabularMDP, policy: np.ndarray) -> tuple[np.ndarray, float]:
    """Occupancy ``[H, S]`` and return by enumerating every trajectory (tiny MDPs only)."""
    H, S, A = mdp.horizon, mdp.n_states, mdp.n_actions
    d = np.zeros((H, S))
    J = 0.0
    for traj in itertools.product(range(S), range(A), repeat=H):
        states, actions = traj[0::2], traj[1::2]
        p = mdp.initial[states[0]]
        ret = 0.0
        for t in range(H):
            p *= policy[t, states[t], actions[t]]
            if t + 1 < H:
                p *= mdp.transitions[t, states[t], actions[t], states[t + 1]]
            ret += mdp.rewards[t, states[t], actions[t]]
        if p == 0.0:
            continue
        for t in range(H):
            d[t, states[t]] += p
        J += p * ret
    return d / 1.0, J


@settings(max_examples=40, deadline=None)
@given(instances(max_horizon=4, max_states=3, max_actions=2))
@with_corners
def test_occupancy_and_return_equal_trajectory_enumeration(inst):
    d_bf, J_bf = brute_force(inst.mdp, inst.policy)
    np.testing.assert_allclose(occupancy(inst.mdp, inst.policy), d_bf, atol=IDENTITY_TOL)
    assert abs(expected_return(inst.mdp, inst.policy) - J_bf) < IDENTITY_TOL


@settings(max_examples=40, deadline=None)
@given(instances())
@with_corners
def test_return_from_values_equals_return_from_occupancy(inst):
    V = v_values(inst.mdp, inst.policy)
    assert abs((inst.mdp.initial * V[0]).sum() - expected_return(inst.mdp, inst.policy)) < IDENTITY_TOL
    np.testing.assert_array_equal(V[-1], 0.0)
    Q = q_values(inst.mdp, inst.policy)
    np.testing.assert_allclose((inst.policy * Q).sum(-1), V[:-1], atol=IDENTITY_TOL)


@settings(max_examples=40, deadline=None)
@given(instances())
@with_corners
def test_occupancy_rows_are_distributions(inst):
    d = occupancy(inst.mdp, inst.policy)
    assert (d >= -1e-15).all()
    np.testing.assert_allclose(d.sum(-1), 1.0, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(instances(max_horizon=4, max_states=3, max_actions=3))
@with_corners
def test_optimal_policy_beats_every_deterministic_policy(inst):
    mdp = inst.mdp
    H, S, A = mdp.horizon, mdp.n_states, mdp.n_actions
    J_star = expected_return(mdp, optimal_policy(mdp))
    assert abs(J_star - (mdp.initial * optimal_values(mdp)[1][0]).sum()) < IDENTITY_TOL
    rng = np.random.default_rng(0)
    for _ in range(20):
        pi = random_policy(H, S, A, rng=rng, kind="deterministic")
        assert expected_return(mdp, pi) <= J_star + 1e-10
    assert expected_return(mdp, inst.policy) <= J_star + 1e-10


def test_optimal_policy_breaks_ties_towards_first_action():
    mdp = TabularMDP(np.ones((2, 1, 3, 1)), np.zeros((2, 1, 3)), np.ones(1))
    pi = optimal_policy(mdp)
    np.testing.assert_array_equal(pi[..., 0], 1.0)
    q = np.array([1.0, 1.0 + 1e-15, 0.5])
    np.testing.assert_array_equal(greedy_policy(q), [1.0, 0.0, 0.0])


def test_batched_equals_per_instance_loop():
    rng = np.random.default_rng(1)
    mdp = random_mdp(5, 4, 3, rng=rng, batch=(3, 2))
    pi = random_policy(5, 4, 3, rng=rng, batch=(3, 2))
    data = random_policy(5, 4, 3, rng=rng)  # broadcast over the batch
    J = expected_return(mdp, pi)
    Js = static_context_return(mdp, pi, data)
    pi_star = optimal_policy(mdp)
    assert J.shape == (3, 2)
    for i, j in itertools.product(range(3), range(2)):
        one = TabularMDP(mdp.transitions[i, j], mdp.rewards[i, j], mdp.initial[i, j])
        assert abs(J[i, j] - expected_return(one, pi[i, j])) < 1e-12
        assert abs(Js[i, j] - static_context_return(one, pi[i, j], data)) < 1e-12
        np.testing.assert_array_equal(pi_star[i, j], optimal_policy(one))
        np.testing.assert_allclose(q_values(mdp, pi)[i, j], q_values(one, pi[i, j]), atol=1e-12)


def test_numpy_equals_torch():
    rng = np.random.default_rng(2)
    mdp = random_mdp(6, 5, 3, rng=rng, batch=(4,))
    pi = random_policy(6, 5, 3, rng=rng, batch=(4,))
    tm = TabularMDP(*(torch.from_numpy(x) for x in (mdp.transitions, mdp.rewards, mdp.initial)))
    tp = torch.from_numpy(pi)
    for fn in (occupancy, q_values, v_values, expected_return):
        np.testing.assert_allclose(fn(tm, tp).numpy(), fn(mdp, pi), atol=1e-12)
    np.testing.assert_array_equal(optimal_policy(tm).numpy(), optimal_policy(mdp))
    np.testing.assert_allclose(reward_span(tm).numpy(), reward_span(mdp))


def test_policy_helpers():
    assert uniform_policy(2, 3, 4).shape == (2, 3, 4)
    pi = deterministic_policy(np.array([[0, 2]]), 3)
    np.testing.assert_array_equal(pi, [[[1, 0, 0], [0, 0, 1]]])
    sm = softmax_policy(np.array([0.0, np.log(3.0)]))
    np.testing.assert_allclose(sm, [0.25, 0.75])
    np.testing.assert_allclose(mixture_policy(np.array([1.0, 0.0]), np.array([0.5, 0.5]), 0.2), [0.9, 0.1])
    np.testing.assert_allclose(turn_rewards(TabularMDP(np.ones((1, 1, 2, 1)), np.array([[[1.0, 3.0]]]), [1.0]), sm[None, None]), [[2.5]])


# ----------------------------------------------------------------------------- bad input
def _good():
    return np.full((2, 2, 2, 2), 0.5), np.zeros((2, 2, 2)), np.array([0.5, 0.5])


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda T, r, mu: (T[..., :1], r, mu), r"transitions must have shape \[\.\.\., H, S, A, S\]"),
        (lambda T, r, mu: (T, r[..., :1], mu), r"rewards must have shape"),
        (lambda T, r, mu: (T, r, mu[:1]), r"initial must have shape"),
        (lambda T, r, mu: (T, r[None].repeat(3, 0), mu[None].repeat(2, 0)), r"batch dimensions do not broadcast"),
        (lambda T, r, mu: (_neg(T), r, mu), r"transitions must be non-negative; transitions\[0, 0, 0, 1\]"),
        (lambda T, r, mu: (_off(T), r, mu), r"transitions\[1, 0, 1, :\] must sum to 1"),
        (lambda T, r, mu: (T, _nan(r), mu), r"rewards must be finite; rewards\[0, 1, 0\] = nan"),
        (lambda T, r, mu: (T, r, np.array([0.7, 0.7])), r"initial\[:\] must sum to 1 .* 1\.4"),
    ],
    ids=["T-shape", "r-shape", "mu-shape", "batch", "negative", "row-sum", "nan-reward", "initial-sum"],
)
def test_validation_names_array_index_and_value(mutate, match):
    with pytest.raises(ValueError, match=match):
        TabularMDP(*mutate(*_good()))


def _neg(T):
    T = T.copy()
    T[0, 0, 0] = [1.5, -0.5]
    return T


def _off(T):
    T = T.copy()
    T[1, 0, 1] = [0.5, 0.6]
    return T


def _nan(r):
    r = r.copy()
    r[0, 1, 0] = np.nan
    return r


def test_policy_validation_names_problem():
    mdp = TabularMDP(*_good())
    with pytest.raises(ValueError, match=r"policy must have shape \[\.\.\., H, S, A\] = \[\.\.\., 2, 2, 2\]"):
        expected_return(mdp, np.full((2, 2, 3), 1 / 3))
    with pytest.raises(ValueError, match=r"data_policy\[0, 1, :\] must sum to 1"):
        bad = np.full((2, 2, 2), 0.5)
        bad[0, 1] = [0.9, 0.9]
        static_context_return(mdp, np.full((2, 2, 2), 0.5), bad)
    with pytest.raises(ValueError, match=r"actions must lie in \[0, 3\)"):
        deterministic_policy(np.array([[3]]), 3)
    with pytest.raises(ValueError, match=r"temperature must be > 0; got 0"):
        softmax_policy(np.zeros(3), temperature=0)
    with pytest.raises(ValueError, match=r"weight must lie in \[0, 1\]; got 1.5"):
        mixture_policy(np.ones(1), np.ones(1), 1.5)


def test_stationary_broadcast_chunks_equal_full_kernel(monkeypatch):
    """GIVEN a batch of stationary kernels passed as a stride-0 broadcast view
    WHEN DP runs chunk by chunk (forced by a tiny cache budget)
    THEN Q*, V* and Q^pi equal those of the materialised kernel."""
    import shiftbounds.tabular.evaluation as E

    monkeypatch.setattr(E, "CACHE_BYTES", 1)
    rng = np.random.default_rng(7)
    base = random_mdp(1, 4, 3, rng=rng, batch=(5,))
    H = 6
    T = np.broadcast_to(base.transitions, (5, H, 4, 3, 4))
    r = np.broadcast_to(base.rewards, (5, H, 4, 3))
    view, full = TabularMDP(T, r, base.initial), TabularMDP(T.copy(), r.copy(), base.initial)
    assert E._stationary_chunks(view, None) is not None and E._stationary_chunks(full, None) is None
    for a, b in zip(optimal_values(view), optimal_values(full)):
        np.testing.assert_allclose(a, b, atol=1e-13)
    pi = random_policy(H, 4, 3, rng=rng, batch=(5,))
    np.testing.assert_allclose(q_values(view, pi), q_values(full, pi), atol=1e-13)
