"""Property tests of every statement of docs/theory.md §2-4 on generated instances.

Inequalities: never violated beyond ``INEQUALITY_TOL``; ``target`` chases the smallest slack.
Identities: both sides agree to ``IDENTITY_TOL``. Degenerate anchors come from
:mod:`tests.strategies`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings, target
from hypothesis import strategies as st

from shiftbounds.constructions import cliff, perturbed_simulator, random_mdp, random_policy, simulator_cliff
from shiftbounds.shift import policy_shift, simulator_shift, total_variation, unified_shift
from shiftbounds.tabular import (
    TabularMDP,
    expected_return,
    greedy_policy,
    optimal_policy,
    reward_span,
    static_context_return,
)
from shiftbounds.theory import (
    compounding,
    corollary1_rhs,
    lemma1_rhs,
    lemma2_rhs,
    performance_difference,
    simulation_lemma,
    static_bias,
    theorem1_crude_rhs,
)
from tests.strategies import IDENTITY_TOL, INEQUALITY_TOL, instances, is_material, with_corners

SETTINGS = settings(max_examples=150, deadline=None)


def forward_occupancy(mdp, policy: np.ndarray) -> np.ndarray:
    """``d_t(s)`` ``[H, S]`` by an explicit loop over turns, states and actions (independent of the engine)."""
    H, S, A = mdp.horizon, mdp.n_states, mdp.n_actions
    d = np.zeros((H, S))
    d[0] = mdp.initial
    for t in range(H - 1):
        for s in range(S):
            for a in range(A):
                d[t + 1] += d[t, s] * policy[t, s, a] * mdp.transitions[t, s, a]
    return d


# ------------------------------------------------------------------ §1 the compounding operator
@given(st.lists(st.floats(0, 2, allow_nan=False), min_size=1, max_size=12))
def test_compounding_is_capped_exclusive_prefix_sum(x):
    b = compounding(np.array(x))
    assert b[0] == 0.0
    for t in range(1, len(x)):
        assert b[t] == pytest.approx(min(1.0, sum(x[:t])), abs=1e-12)
    assert (np.diff(b) >= -1e-15).all()


def test_compounding_numpy_equals_torch():
    x = np.random.default_rng(0).random((3, 7)) * 0.3
    np.testing.assert_allclose(compounding(torch.from_numpy(x)).numpy(), compounding(x), atol=1e-15)


# ------------------------------------------------------------------ §2 policy-induced shift
@SETTINGS
@given(instances())
@with_corners
def test_lemma1_Delta_below_compounded_eps(inst):
    ps = policy_shift(inst.mdp, inst.policy, inst.data_policy)
    slack = lemma1_rhs(ps.eps) - ps.Delta
    target(float(-slack.min()), label="lemma1 worst violation")
    assert (slack >= -INEQUALITY_TOL).all(), inst.label
    assert ps.Delta[0] <= INEQUALITY_TOL  # both start from mu0


@SETTINGS
@given(instances())
@with_corners
def test_theorem1_chain(inst):
    ps = policy_shift(inst.mdp, inst.policy, inst.data_policy)
    # the gap from occupancies propagated turn by turn here, not by the engine
    d_pi, d_data = forward_occupancy(inst.mdp, inst.policy), forward_occupancy(inst.mdp, inst.data_policy)
    r_pi = (inst.policy * inst.mdp.rewards).sum(-1)  # [H, S]
    gap = float(((d_pi - d_data) * r_pi).sum())
    assert abs(gap - ps.return_gap) < IDENTITY_TOL
    assert abs(expected_return(inst.mdp, inst.policy) - static_context_return(inst.mdp, inst.policy, inst.data_policy) - gap) < IDENTITY_TOL
    R = reward_span(inst.mdp)
    middle = R * ps.Delta.sum()
    target(float(abs(gap) - ps.theorem1_rhs), label="theorem1 worst violation")
    assert abs(gap) <= middle + INEQUALITY_TOL, inst.label
    assert middle <= ps.theorem1_rhs + INEQUALITY_TOL, inst.label
    crude = theorem1_crude_rhs(ps.eps.max(), inst.mdp.horizon, R)
    assert ps.theorem1_rhs <= crude + INEQUALITY_TOL, inst.label


@SETTINGS
@given(instances())
@with_corners
def test_corollary1_static_optimum_suboptimality(inst):
    mdp, data = inst.mdp, inst.data_policy
    pi_hat = greedy_policy(mdp.rewards)  # maximises J_static: it is linear in pi per context
    assert static_context_return(mdp, pi_hat, data) >= static_context_return(mdp, inst.policy, data) - INEQUALITY_TOL
    R = reward_span(mdp)
    eps_hat = policy_shift(mdp, pi_hat, data).eps
    for comparator in (optimal_policy(mdp), inst.policy):
        eps_star = policy_shift(mdp, comparator, data).eps
        lhs = expected_return(mdp, comparator) - expected_return(mdp, pi_hat)
        assert lhs <= corollary1_rhs(eps_star, eps_hat, R) + INEQUALITY_TOL, inst.label


@SETTINGS
@given(instances())
@with_corners
def test_eps_and_Delta_from_occupancies(inst):
    """``eps_t`` and ``Delta_t`` equal their definitions evaluated on occupancies propagated here
    (the equal-policy corner, where both vanish, is one of the pinned examples)."""
    ps = policy_shift(inst.mdp, inst.policy, inst.data_policy)
    d_pi, d_data = forward_occupancy(inst.mdp, inst.policy), forward_occupancy(inst.mdp, inst.data_policy)
    np.testing.assert_allclose(ps.Delta, 0.5 * np.abs(d_pi - d_data).sum(-1), atol=IDENTITY_TOL)
    tv = 0.5 * np.abs(inst.policy - inst.data_policy).sum(-1)  # [H, S]
    np.testing.assert_allclose(ps.eps, (d_data * tv).sum(-1), atol=IDENTITY_TOL)
    if np.array_equal(inst.policy, inst.data_policy):
        assert np.abs(ps.Delta).max() == 0.0 and abs(ps.return_gap) < IDENTITY_TOL


def test_most_drawn_instances_are_material_and_the_bounds_are_not_vacuous_there():
    """Coverage: at least half of the drawn instances are material (``H >= 3``, varying rewards,
    ``Delta_t`` and ``D_t`` above 1e-3 somewhere); on them every gap lies within its bound, and the
    bounds are not all loose: the distribution of ``|gap| / bound`` reaches past 0.1."""
    seen, ratios = [], {"theorem 1": [], "theorem 2": []}

    @settings(max_examples=120, deadline=None, database=None, derandomize=True)
    @given(instances())
    def record(inst):
        material = is_material(inst)
        seen.append(material)
        if material:
            ps = policy_shift(inst.mdp, inst.policy, inst.data_policy)
            ss = simulator_shift(inst.mdp, inst.sim, inst.policy)
            ratios["theorem 1"].append(abs(ps.return_gap) / ps.theorem1_rhs)
            ratios["theorem 2"].append(abs(ss.return_gap) / ss.theorem2_rhs)

    record()
    assert len(seen) >= 100 and np.mean(seen) >= 0.5, np.mean(seen)
    for name, r in ratios.items():
        r = np.array(r)
        assert (r <= 1 + 1e-9).all(), name
        assert np.quantile(r, 0.9) > 0.1, (name, np.quantile(r, [0.5, 0.9]))


# ------------------------------------------------------------------ §2 tightness (cliff)
@given(st.integers(1, 200), st.floats(0.0, 1.0))
def test_cliff_per_turn_quantities(H, eps):
    c = cliff(H, eps, reward=2.0)
    ps = policy_shift(c.mdp, c.policy, c.data_policy)
    np.testing.assert_allclose(ps.eps, eps, atol=1e-15)
    np.testing.assert_allclose(ps.Delta, 1 - (1 - eps) ** np.arange(H), atol=1e-12)
    assert static_context_return(c.mdp, c.policy, c.data_policy) == pytest.approx(2.0 * H, abs=1e-10)


@given(st.integers(2, 400), st.floats(1e-6, 1.0))
@example(H=2, eps=1.0)
@example(H=400, eps=1 / 400)
def test_cliff_ratio_at_least_half_when_eps_H_at_most_one(H, eps):
    if eps * H > 1:
        eps = 1.0 / H
    c = cliff(H, eps)
    ps = policy_shift(c.mdp, c.policy, c.data_policy)
    ratio = abs(ps.return_gap) / ps.theorem1_rhs
    target(-float(ratio), label="smallest cliff ratio")
    assert 0.5 <= ratio <= 1 + INEQUALITY_TOL
    # second-order series: ratio >= 1 - eps (H - 2) / 3
    assert ratio >= 1 - eps * (H - 2) / 3 - INEQUALITY_TOL


def test_cliff_ratio_tends_to_one():
    ratios = []
    for eps_H in (0.5, 0.1, 0.01, 0.001):
        H = 50
        c = cliff(H, eps_H / H)
        ps = policy_shift(c.mdp, c.policy, c.data_policy)
        ratios.append(abs(ps.return_gap) / ps.theorem1_rhs)
    assert all(a < b for a, b in zip(ratios, ratios[1:]))
    assert ratios[1] > 0.95 and 1 - ratios[-1] < 1e-3


def test_simulator_cliff_matches_policy_cliff():
    real, sim, pi = simulator_cliff(30, 0.01)
    ss = simulator_shift(real, sim, pi)
    c = cliff(30, 0.01)
    ps = policy_shift(c.mdp, c.policy, c.data_policy)
    np.testing.assert_allclose(ss.delta, 0.01, atol=1e-15)
    assert ss.return_gap == pytest.approx(ps.return_gap, abs=1e-12)
    assert ss.theorem2_rhs == pytest.approx(ps.theorem1_rhs, abs=1e-12)


# ------------------------------------------------------------------ §3 simulator-induced shift
@SETTINGS
@given(instances())
@with_corners
def test_lemma2_and_theorem2(inst):
    ss = simulator_shift(inst.mdp, inst.sim, inst.policy)
    target(float((ss.D - lemma2_rhs(ss.delta)).max()), label="lemma2 worst violation")
    assert (ss.D <= lemma2_rhs(ss.delta) + INEQUALITY_TOL).all(), inst.label
    R = reward_span(inst.mdp)
    assert abs(ss.return_gap) <= (R * ss.D + ss.rho).sum() + INEQUALITY_TOL, inst.label
    assert abs(ss.return_gap) <= ss.theorem2_rhs + INEQUALITY_TOL, inst.label


@SETTINGS
@given(instances())
@with_corners
def test_theorem3_unified(inst):
    for beta in (inst.data_policy, inst.policy):
        us = unified_shift(inst.mdp, inst.sim, inst.policy, beta)
        assert (us.context_shift <= us.bound + INEQUALITY_TOL).all(), inst.label
        assert abs(us.objective_bias) <= us.theorem3_rhs + INEQUALITY_TOL, inst.label


@SETTINGS
@given(instances())
@with_corners
def test_theorem3_specialises_to_theorems_1_and_2(inst):
    mdp = inst.mdp
    static = unified_shift(mdp, mdp, inst.policy, inst.data_policy)
    ps = policy_shift(mdp, inst.policy, inst.data_policy)
    np.testing.assert_allclose(static.eps, ps.eps, atol=1e-14)
    np.testing.assert_allclose(static.context_shift, ps.Delta, atol=1e-14)
    np.testing.assert_allclose(static.delta, 0.0, atol=1e-14)
    assert static.objective_bias == pytest.approx(ps.return_gap, abs=IDENTITY_TOL)
    interactive = unified_shift(mdp, inst.sim, inst.policy, inst.policy)
    ss = simulator_shift(mdp, inst.sim, inst.policy)
    np.testing.assert_allclose(interactive.eps, 0.0, atol=1e-14)
    np.testing.assert_allclose(interactive.delta, ss.delta, atol=1e-14)
    np.testing.assert_allclose(interactive.context_shift, ss.D, atol=1e-14)
    assert interactive.objective_bias == pytest.approx(ss.return_gap, abs=IDENTITY_TOL)
    # interactive training against the real user has no bias at all (docs/theory.md §2, last line)
    assert abs(unified_shift(mdp, mdp, inst.policy, inst.policy).objective_bias) < IDENTITY_TOL


# ------------------------------------------------------------------ §4 identities
@SETTINGS
@given(instances())
@with_corners
def test_exact_identities(inst):
    for ident in (
        performance_difference(inst.mdp, inst.policy, inst.data_policy),
        simulation_lemma(inst.mdp, inst.sim, inst.policy),
        static_bias(inst.mdp, inst.policy, inst.data_policy),
    ):
        assert abs(ident.lhs - ident.rhs) < IDENTITY_TOL, inst.label


def test_simulation_lemma_with_different_initial_laws():
    rng = np.random.default_rng(3)
    real = random_mdp(4, 3, 2, rng=rng)
    other = random_mdp(4, 3, 2, rng=rng)
    pi = random_policy(4, 3, 2, rng=rng)
    ident = simulation_lemma(real, other, pi)
    assert abs(ident.lhs - ident.rhs) < IDENTITY_TOL


# ------------------------------------------------------------------ batching and torch
def test_shift_measures_batched_equal_loop_and_torch():
    rng = np.random.default_rng(4)
    mdp = random_mdp(5, 4, 3, rng=rng, batch=(6,))
    sim = perturbed_simulator(mdp, 0.3, rng=rng, reward_noise=0.2)
    pi = random_policy(5, 4, 3, rng=rng, batch=(6,))
    data = random_policy(5, 4, 3, rng=rng, batch=(6,))
    ps, ss = policy_shift(mdp, pi, data), simulator_shift(mdp, sim, pi)
    t = lambda m: TabularMDP(*(torch.from_numpy(np.ascontiguousarray(x)) for x in (m.transitions, m.rewards, m.initial)))
    ps_t = policy_shift(t(mdp), torch.from_numpy(pi), torch.from_numpy(data))
    ss_t = simulator_shift(t(mdp), t(sim), torch.from_numpy(pi))
    for field in ("eps", "Delta", "bound", "return_gap", "theorem1_rhs"):
        np.testing.assert_allclose(getattr(ps_t, field).numpy(), getattr(ps, field), atol=1e-12)
    for field in ("delta", "D", "rho", "bound", "return_gap", "theorem2_rhs"):
        np.testing.assert_allclose(getattr(ss_t, field).numpy(), getattr(ss, field), atol=1e-12)
    for i in range(6):
        one = lambda m: TabularMDP(m.transitions[i], m.rewards[i], m.initial[i])
        p1 = policy_shift(one(mdp), pi[i], data[i])
        s1 = simulator_shift(one(mdp), one(sim), pi[i])
        np.testing.assert_allclose(p1.Delta, ps.Delta[i], atol=1e-14)
        np.testing.assert_allclose(s1.D, ss.D[i], atol=1e-14)
        assert p1.theorem1_rhs == pytest.approx(ps.theorem1_rhs[i], abs=1e-14)


def test_total_variation_endpoints():
    assert total_variation(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == 1.0
    assert total_variation(np.array([0.3, 0.7]), np.array([0.3, 0.7])) == 0.0


def test_shift_rejects_mismatched_models():
    rng = np.random.default_rng(5)
    with pytest.raises(ValueError, match=r"real_mdp has \(H, S, A\) = \(3, 2, 2\) but sim_mdp has \(3, 3, 2\)"):
        simulator_shift(random_mdp(3, 2, 2, rng=rng), random_mdp(3, 3, 2, rng=rng), np.full((3, 2, 2), 0.5))
