"""sympy closed forms (docs/theory.md §6) against the numeric engine."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from shiftbounds.constructions import cliff
from shiftbounds.shift import policy_shift
from shiftbounds.theory import symbolic
from shiftbounds.theory.bounds import compounding


def test_compounding_sum_closed_form_is_derived():
    assert sp.simplify(symbolic.compounding_sum().expr - symbolic.eps * symbolic.H * (symbolic.H - 1) / 2) == 0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.floats(0.0, 1.0))
def test_compounding_sum_equals_numeric(H, eps):
    numeric = float(sum(t * eps for t in range(H)))  # sum_t sum_{k<t} eps, uncapped
    assert symbolic.compounding_sum()(eps, H) == pytest.approx(numeric, rel=1e-12, abs=1e-12)
    if eps * (H - 1) <= 1:  # below the cap, B(eps) sums to the closed form
        assert float(compounding(np.full(H, eps)).sum()) == pytest.approx(symbolic.compounding_sum()(eps, H), abs=1e-10)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.floats(1e-4, 1.0), st.floats(0.1, 5.0))
def test_cliff_gap_closed_form_equals_engine(H, eps, R):
    c = cliff(H, eps, reward=R)
    gap = -float(policy_shift(c.mdp, c.policy, c.data_policy).return_gap)
    assert symbolic.cliff_gap()(R, eps, H) == pytest.approx(gap, abs=1e-10 * max(1.0, H * R))


def test_cliff_series_leading_term_is_theorem1_bound():
    series = symbolic.cliff_gap_series().expr
    leading = sp.limit(series / symbolic.eps, symbolic.eps, 0)
    assert sp.simplify(leading - symbolic.R * symbolic.H * (symbolic.H - 1) / 2) == 0
    # second-order term: -R eps^2 H (H-1)(H-2)/6
    second = sp.expand(series).coeff(symbolic.eps, 2)
    assert sp.simplify(second + symbolic.R * symbolic.H * (symbolic.H - 1) * (symbolic.H - 2) / 6) == 0


@pytest.mark.parametrize("H, eps", [(10, 1e-3), (100, 1e-5), (40, 2e-4)])
def test_cliff_series_error_is_third_order(H, eps):
    exact = symbolic.cliff_gap()(1.0, eps, H)
    approx = symbolic.cliff_gap_series()(1.0, eps, H)
    assert abs(exact - approx) <= (eps * H) ** 3 * H


def test_lock_reach_probability():
    assert symbolic.lock_reach_probability()(0.775, 3) == pytest.approx(0.775**3)
