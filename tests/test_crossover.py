"""The crossover horizon H*: the fits, the predicted root, the measured crossing on a grid, and the
bootstrap with censored (over-budget) counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shiftbounds.crossover import (
    crossover_estimates,
    fit_exponential,
    fit_exponential_at_rate,
    fit_power,
    growth_slope,
    log_median_ratio,
    measured_crossover,
    median_ci,
    predicted_crossover,
    quantile_interval,
)


@settings(max_examples=60, deadline=None)
@given(h_star=st.floats(2.0, 1000.0), b=st.floats(0.01, 2.0), d=st.floats(0.1, 4.0), c=st.floats(-3.0, 3.0))
@example(h_star=2.0, b=0.01, d=0.01 * 2.0 + 1e-3, c=0.0)  # the slopes nearly equal at the root
@example(h_star=2.0, b=2.0, d=3.99609375, c=0.0)  # a dip below zero narrower than the grid's spacing
def test_predicted_crossover_is_the_upper_root(h_star, b, d, c):
    """GIVEN BC's line a + b H through NAIL's c + d log H at H* with BC the steeper there WHEN the
    crossover is predicted THEN it is H* to rounding (the upper root of a convex difference)."""
    if b * h_star <= d:  # at H* BC must be the steeper curve for H* to be the crossing into BC > NAIL
        d = 0.5 * b * h_star
    a = c + d * np.log(h_star) - b * h_star
    assert predicted_crossover((a, b), (c, d)) == pytest.approx(h_star, rel=1e-6)


def test_predicted_crossover_corners():
    assert predicted_crossover((0.0, -0.1), (0.0, 1.0)) == np.inf  # BC shrinking: never dearer
    assert predicted_crossover((5.0, 0.1), (0.0, 1.0), h_min=4.0) == 4.0  # dearer from the start
    assert predicted_crossover((0.0, 0.0), (-1.0, 0.0)) == 1.0  # constant gap in BC's disfavour


def test_fits_recover_exact_laws():
    H = np.array([4.0, 8.0, 16.0])
    assert fit_exponential(H, 3.0 * np.exp(0.25 * H)) == pytest.approx((np.log(3.0), 0.25))
    assert fit_power(H, 2.0 * H**1.5) == pytest.approx((np.log(2.0), 1.5))
    assert fit_exponential_at_rate(H, 3.0 * np.exp(0.25 * H), 0.25) == pytest.approx((np.log(3.0), 0.25))
    with pytest.raises(ValueError, match="finite positive counts"):
        fit_exponential(H, [1.0, np.inf, 3.0])


@pytest.mark.parametrize("ratio, want", [
    ([-1.0, -0.5, 0.5, 1.0], 10.0),                 # interpolated between 8 and 12
    ([-1.0, 1.0, -1.0, 1.0], 14.0),                 # the last entry into BC > online counts
    ([-1.0, -1.0, -1.0, -1.0], np.inf),             # censored: H* > 16
    ([0.5, 1.0, 2.0, 3.0], 4.0),                    # from the first horizon
    ([-1.0, -1.0, np.inf, np.inf], 12.0),           # BC over budget from 12
    ([-np.inf, 1.0, 2.0, 2.0], 4.0),                # online over budget at 4 only
    ([-1.0, np.nan, 1.0, 1.0], 8.0),                # both over budget at 8: dropped, (4, 12) interpolated
])
def test_measured_crossover(ratio, want):
    assert measured_crossover([4, 8, 12, 16], ratio) == pytest.approx(want)


def test_measured_crossover_rejects_bad_grids():
    with pytest.raises(ValueError, match="increasing horizons"):
        measured_crossover([8, 4], [0.0, 1.0])
    assert np.isnan(measured_crossover([4, 8], [np.nan, np.nan]))


def test_log_median_ratio_with_censoring():
    assert log_median_ratio(np.array([2.0, 4.0, 8.0]), np.array([1.0, 2.0, 4.0])) == pytest.approx(np.log(2.0))
    assert log_median_ratio(np.array([np.inf] * 3), np.array([1.0] * 3)) == np.inf
    assert log_median_ratio(np.array([1.0] * 3), np.array([np.inf] * 3)) == -np.inf
    assert np.isnan(log_median_ratio(np.array([np.inf] * 3), np.array([np.inf] * 3)))


def test_quantile_interval_keeps_infinite_ends():
    s = np.array([1.0, 2.0, 3.0] + [np.inf] * 7)
    assert quantile_interval(s) == (1.0, np.inf)
    assert all(np.isnan(quantile_interval(np.array([np.nan]))))
    med, lo, hi = median_ci(np.array([5.0] * 6), 50, rng=np.random.default_rng(0))
    assert (med, lo, hi) == (5.0, 5.0, 5.0)


def test_growth_slope_is_exact_without_spread_and_none_when_censored():
    H = np.array([4, 8, 12])
    exact = [np.full(5, 2.0 * np.exp(0.3 * h)) for h in H]
    slope, lo, hi = growth_slope(H, exact, False, 20, rng=np.random.default_rng(0))
    assert slope == pytest.approx(0.3) and lo == pytest.approx(0.3) and hi == pytest.approx(0.3)
    assert growth_slope(H, exact[:2] + [np.full(5, np.inf)], False, 20, rng=np.random.default_rng(0)) is None


def test_crossover_estimates_on_exact_laws():
    """GIVEN seeds that all need exactly 0.5 e^{0.2 H} (BC) and 3 H (online) episodes WHEN H* is
    estimated THEN the prediction from H <= 16 is the analytic root, the measurement the grid's
    linear interpolation of the log ratio, and every bootstrap interval is that point."""
    H = np.array([4, 8, 16, 32, 48])
    bc = [np.full(6, 0.5 * np.exp(0.2 * h)) for h in H]
    online = [np.full(6, 3.0 * h) for h in H]
    est = crossover_estimates(H, bc, online, fit_max_h=16, n_boot=30, rng=np.random.default_rng(0), rate=0.2)
    root = predicted_crossover((np.log(0.5), 0.2), (np.log(3.0), 1.0))
    assert est["predicted"] == pytest.approx((root, root, root), rel=1e-6)
    assert est["predicted_at_rate"] == pytest.approx((root, root, root), rel=1e-6)
    r = np.log(0.5) + 0.2 * H - np.log(3.0 * H)
    assert est["measured"] == pytest.approx((measured_crossover(H, r),) * 3)
    assert 16 < est["measured"][0] < 32 and est["measured_censored_share"] == 0.0


def test_crossover_estimates_censored_and_bad_input():
    H = [4, 8, 16]
    cheap = [np.full(4, 2.0)] * 3
    est = crossover_estimates(H, cheap, [np.full(4, 10.0)] * 3, fit_max_h=8, n_boot=10, rng=np.random.default_rng(0))
    assert est["measured"][0] == np.inf and est["measured_censored_share"] == 1.0 and est["predicted_at_rate"] is None
    over = [np.full(4, 2.0), np.full(4, np.inf), np.full(4, np.inf)]
    est = crossover_estimates(H, over, [np.full(4, 10.0)] * 3, fit_max_h=8, n_boot=10, rng=np.random.default_rng(0))
    assert np.isnan(est["predicted"][0]) and est["measured"][0] == 8.0
    with pytest.raises(ValueError, match="fit_max_h=4 leaves 1 horizons"):
        crossover_estimates(H, cheap, cheap, fit_max_h=4, n_boot=10, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="one array of counts per horizon"):
        crossover_estimates(H, cheap[:2], cheap, fit_max_h=8, n_boot=10, rng=np.random.default_rng(0))
