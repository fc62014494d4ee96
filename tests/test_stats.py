"""Paired tests that fit small samples: the sign-flip p against brute force, McNemar and
Clopper-Pearson against scipy, zero-variance differences reported as what they are, and the
seed count a comparison needs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, ttest_1samp

from shiftbounds.utils import stats
from shiftbounds.utils.stats import (
    exact_proportion_ci,
    mcnemar_exact,
    mcnemar_power,
    paired_difference,
    plateau_step,
    seeds_for_mcnemar,
    seeds_for_power,
    sign_flip_p,
)


def _brute_sign_flip(d: np.ndarray) -> float:
    obs = abs(d.sum())
    tol = 1e-9 * np.abs(d).sum()
    flips = [abs(np.dot(s, d)) >= obs - tol for s in itertools.product((1.0, -1.0), repeat=d.size)]
    return float(np.mean(flips))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_subnormal=False), min_size=2, max_size=9))
@example([0.0, 0.0])  # no difference at all: p = 1
@example([0.25, 0.25, 0.25])  # constant non-zero: p = 2 / 2^3, not 0
@example([0.3, -0.3, 0.3, -0.3])  # symmetric: p = 1
def test_sign_flip_p_equals_the_enumeration_of_sign_vectors(d):
    d = np.array(d)
    p, method = sign_flip_p(d)
    assert method == "exact sign-flip"
    assert p == pytest.approx(_brute_sign_flip(d), abs=1e-12)
    assert 2 / 2 ** d.size - 1e-12 <= p <= 1.0  # the identity and its mirror are always as extreme
    if np.all(d == d[0]) and d[0] != 0:
        assert p == pytest.approx(2 / 2 ** d.size)


def test_sign_flip_monte_carlo_matches_the_exact_value_within_its_error(monkeypatch):
    d = np.random.default_rng(3).normal(0.3, 1.0, size=12)
    exact, _ = sign_flip_p(d)
    monkeypatch.setattr(stats, "EXACT_SIGN_FLIP_MAX_N", 4)
    mc, method = sign_flip_p(d, draws=40_000, seed=1)
    assert method == "sign-flip, 40000 Monte Carlo draws"
    assert abs(mc - exact) < 4 * np.sqrt(exact * (1 - exact) / 40_000) + 1e-4
    assert sign_flip_p(d, draws=40_000, seed=1) == (mc, method)  # same seed, same p
    strong, _ = sign_flip_p(np.full(30, 0.5), draws=999, seed=0)  # exact p = 2 / 2^30
    assert strong == pytest.approx(1 / 1000)  # never 0: (1 + hits) / (1 + draws)
    with pytest.raises(ValueError, match="finite"):
        sign_flip_p(np.array([np.nan, 1.0]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1)), min_size=2, max_size=12))
@example([(0.5, 0.5), (0.25, 0.25)])  # all differences 0
@example([(0.75, 0.5), (0.5, 0.25)])  # a constant non-zero difference: flagged, p_t None, never p = 0
def test_paired_difference_rests_on_the_sign_flip_p_and_reports_the_t_test_beside(pairs):
    x, y = (np.array(v) for v in zip(*pairs))
    d = paired_difference(x, y, ("a", "b"))
    diff = x - y
    assert d["p"] == pytest.approx(_brute_sign_flip(diff), abs=1e-12) and d["p"] > 0
    if d["constant"]:
        assert np.all(diff == diff[0]) and d["p_t"] is None
    elif diff.std(ddof=1) > 0:
        assert d["p_t"] == pytest.approx(ttest_1samp(diff, 0.0).pvalue, rel=1e-9, abs=1e-12)
    expected = "not significant" if d["p"] >= 0.05 or diff.mean() == 0 else ("a > b" if diff.mean() > 0 else "a < b")
    assert d["verdict"] == expected and d["n"] == len(pairs)
    assert d["low"] <= d["mean"] <= d["high"]
    with pytest.raises(ValueError, match="size >= 2"):
        paired_difference(x[:1], y[:1])


def test_five_seeds_can_never_be_significant_by_sign_flip_and_twenty_can():
    assert paired_difference(np.full(5, 0.9), np.full(5, 0.1))["verdict"] == "not significant"  # p = 0.0625
    twenty = paired_difference(np.linspace(0.5, 0.6, 20), np.linspace(0.4, 0.45, 20), ("a", "b"))
    assert twenty["verdict"] == "a > b" and twenty["p"] == pytest.approx(2 / 2 ** 20)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
@example((0, 10))
@example((10, 10))
def test_clopper_pearson_matches_scipy_and_stays_in_the_unit_interval(kn):
    k, n = kn
    e = exact_proportion_ci(k, n)
    ref = binomtest(k, n).proportion_ci(method="exact")
    assert e.low == pytest.approx(ref.low, abs=1e-10) and e.high == pytest.approx(ref.high, abs=1e-10)
    assert 0.0 <= e.low <= e.value <= e.high <= 1.0
    with pytest.raises(ValueError, match="successes"):
        exact_proportion_ci(n + 1, n)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
@example((0, 1))
@example((1, 1))
@example((1656, 1656))  # a share of 1 over many trials: the upper bound rounded to 1 + 2e-16 before it was clipped
@example((0, 1656))
def test_wilson_matches_scipy_and_stays_in_the_unit_interval(kn):
    k, n = kn
    e = stats.proportion_ci(k, n)
    ref = binomtest(k, n).proportion_ci(method="wilson")
    assert e.low == pytest.approx(ref.low, abs=1e-10) and e.high == pytest.approx(ref.high, abs=1e-10)
    assert 0.0 <= e.low <= e.value <= e.high <= 1.0
    assert (e.low == 0.0) == (k == 0) and (e.high == 1.0) == (k == n)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=30))
@example([(True, True), (False, False)])  # no discordant pair: p = 1
@example([(True, False)] * 6)  # six discordant pairs one way: p = 2 / 64
def test_mcnemar_exact_equals_the_binomial_test_on_discordant_pairs(pairs):
    x, y = (list(v) for v in zip(*pairs))
    r = mcnemar_exact(x, y, ("a", "b"))
    b, c = r["only_x"], r["only_y"]
    assert b == sum(i and not j for i, j in pairs) and c == sum(j and not i for i, j in pairs)
    assert r["p"] == (1.0 if b + c == 0 else pytest.approx(binomtest(b, b + c, 0.5).pvalue, abs=1e-12))
    assert r["verdict"] == ("not significant" if r["p"] >= 0.05 else "a > b" if b > c else "a < b")


def test_seeds_for_power_matches_a_simulated_t_test():
    assert seeds_for_power(1.0, 1.0) == 10  # Cohen's d = 1, alpha 0.05, power 0.8: the textbook 10
    n = seeds_for_power(0.02, 0.024, family=20)
    assert seeds_for_power(0.02, 0.024) < n < seeds_for_power(0.02, 0.012, family=20)
    rng = np.random.default_rng(0)
    d = rng.normal(0.024, 0.02, size=(4000, n))
    t = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(n))
    from scipy.stats import t as tdist

    power = np.mean(np.abs(t) > tdist.ppf(1 - 0.05 / 20 / 2, n - 1))
    assert power >= 0.8 - 3 * np.sqrt(0.16 / 4000)
    with pytest.raises(ValueError, match="sd > 0"):
        seeds_for_power(0.0, 0.1)


def test_plateau_step_finds_the_first_point_after_the_last_excursion():
    steps = [0, 50, 100, 150, 200, 250, 300]
    assert plateau_step(steps, [0.1, 0.3, 0.5, 0.52, 0.49, 0.51, 0.5], tol=0.03, tail=3) == 100
    assert plateau_step(steps, [0.1, 0.5, 0.5, 0.2, 0.5, 0.5, 0.5], tol=0.03, tail=3) == 200  # a late dip resets it
    assert plateau_step(steps, [0.5] * 7, tol=0.0, tail=3) == 0
    assert plateau_step(steps[:3], [0.1, 0.2, 0.3], tol=0.03, tail=3) is None
    with pytest.raises(ValueError, match="equal-length"):
        plateau_step(steps, [0.1], tol=0.1)


def test_ratio_of_means_ci_is_paired_and_bounded():
    """GIVEN per-seed numerators and denominators WHEN the ratio of their means is estimated THEN the
    point is the ratio, the paired bootstrap interval contains it, a numerator that is a fixed
    multiple of the denominator gives a zero-width interval (the pairing cancels the noise), and a
    zero-mean denominator gives nan."""
    rng = np.random.default_rng(0)
    den = rng.normal(1.0, 0.3, 12)
    num = 0.4 * den + rng.normal(0, 0.05, 12)
    e = stats.ratio_of_means_ci(num, den, rng=np.random.default_rng(1))
    assert e.value == pytest.approx(num.mean() / den.mean()) and e.low <= e.value <= e.high
    fixed = stats.ratio_of_means_ci(0.4 * den, den, rng=np.random.default_rng(1))
    assert fixed.low == pytest.approx(0.4) and fixed.high == pytest.approx(0.4)
    assert np.isnan(stats.ratio_of_means_ci(num, np.array([1.0, -1.0] * 6), rng=np.random.default_rng(1)).value)
    with pytest.raises(ValueError, match="paired samples"):
        stats.ratio_of_means_ci(num, den[:5], rng=rng)


def test_awr_weights():
    import torch

    from shiftbounds.losses import awr_weights

    w = awr_weights(torch.tensor([0.0, 1.0, 10.0]), torch.tensor(0.0), 0.5)
    assert torch.allclose(w, torch.tensor([1.0, float(np.exp(2.0)), 20.0]))
    with pytest.raises(ValueError, match="scale > 0"):
        awr_weights(torch.zeros(2), torch.tensor(0.0), 0.0)


def test_mcnemar_power_matches_its_closed_form_and_simulation():
    """With discordance in one direction only, a pair set rejects iff it has at least
    ``log2(2 / alpha)`` discordant pairs: the power is a binomial tail. In general it matches the
    rejection rate of :func:`mcnemar_exact` on simulated seeds."""
    from scipy import stats as st

    n, p10, alpha = 20, 0.3, 0.05
    d_min = int(np.ceil(np.log2(2 / alpha) + 1e-12))  # 2 * 0.5**d < alpha
    assert mcnemar_power(n, p10, 0.0, alpha=alpha) == pytest.approx(st.binom.sf(d_min - 1, n, p10))
    rng = np.random.default_rng(0)
    n, p10, p01 = 15, 0.35, 0.1
    draws = rng.choice(3, size=(4000, n), p=[p10, p01, 1 - p10 - p01])
    x, y = draws == 0, draws == 1  # x alone solves / y alone solves / concordant (both fail)
    rate = np.mean([mcnemar_exact(a, b, alpha=alpha)["p"] < alpha for a, b in zip(x, y)])
    assert mcnemar_power(n, p10, p01, alpha=alpha) == pytest.approx(rate, abs=0.025)
    assert mcnemar_power(n, 0.0, 0.0) == 0.0


def test_seeds_for_mcnemar_reaches_the_power_and_grows_with_discordance():
    n = seeds_for_mcnemar(0.3, 0.4, alpha=0.025)
    assert all(mcnemar_power(n + k, 0.35, 0.05, alpha=0.025) >= 0.8 for k in range(5))
    assert not all(mcnemar_power(n - 1 + k, 0.35, 0.05, alpha=0.025) >= 0.8 for k in range(5))  # the smallest such n
    assert seeds_for_mcnemar(0.3, 0.3) < seeds_for_mcnemar(0.3, 0.5) < seeds_for_mcnemar(0.3, 0.5, alpha=0.01)
    with pytest.raises(ValueError, match="difference <= discordance"):
        seeds_for_mcnemar(0.4, 0.3)
