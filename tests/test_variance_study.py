"""Variance components of a nested design: exact identities, recovery on simulated data, and the
entry point's smoke run."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import variance_study
from shiftbounds.dialogue.neural.variance import LEVELS, moments, nested_array, variance_components


def test_moments_put_a_pure_draw_effect_on_the_draws():
    """GIVEN differences that vary only between draws THEN the fit and RL components are exactly 0
    and the draw component is the variance of the draw means."""
    a = np.array([0.1, -0.2, 0.3, 0.05])
    y = np.broadcast_to(a[:, None, None], (4, 3, 2)).copy()
    est = moments(y)
    assert est[1] == pytest.approx(0.0, abs=1e-15) and est[2] == pytest.approx(0.0, abs=1e-15)
    assert est[0] == pytest.approx(a.var(ddof=1))


def test_moments_recover_known_components_and_resampling_covers_them():
    """Simulated nested data with components (0.04, 0.01, 0.0025): the estimates are within a few
    standard errors of the truth at 400 draws, and the shares' intervals cover the true shares."""
    rng = np.random.default_rng(0)
    a, b, n = 400, 3, 3
    true = np.array([0.04, 0.01, 0.0025])
    y = (rng.normal(0, true[0] ** 0.5, (a, 1, 1)) + rng.normal(0, true[1] ** 0.5, (a, b, 1))
         + rng.normal(0, true[2] ** 0.5, (a, b, n)))
    est = moments(y)
    np.testing.assert_allclose(est, true, rtol=0.25)
    rows = variance_components(y, rng=np.random.default_rng(1), n_boot=300)
    assert [r["level"] for r in rows] == list(LEVELS)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    for r, share in zip(rows, true / true.sum()):
        assert r["share_low"] <= share <= r["share_high"], r
    with pytest.raises(ValueError, match="at least 2 replicates"):
        moments(y[:, :1])


def test_nested_array_refuses_an_unbalanced_design():
    units = [{"draw": i, "fit": j, "rl_seed": k, "difference": float(i + j + k)} for i in range(2) for j in range(2) for k in range(2)]
    y = nested_array(units)
    assert y.shape == (2, 2, 2) and y[1, 0, 1] == 2.0
    with pytest.raises(ValueError, match="every \\(draw, fit, rl_seed\\) once"):
        nested_array(units[:-1])


def test_variance_study_smoke_runs_and_resumes_to_the_same_bytes(tmp_path):
    out = tmp_path / "variance"
    res = variance_study.main(["--preset", "smoke", "--out-dir", str(out), "--workers", "1"])
    assert len(res["units"]) == 8 and {u["fit"] for u in res["units"]} == {0, 1}
    for u in res["units"]:  # a unit pairs its fit's calibrated agent with the interactive agent of its draw and RL seed
        assert u["difference"] == pytest.approx(u["calibrated"] - u["interactive"])
    same_k = {(u["draw"], u["rl_seed"]): u["interactive"] for u in res["units"]}
    assert all(u["interactive"] == same_k[u["draw"], u["rl_seed"]] for u in res["units"])
    for name in ("units.csv", "components.csv", "variance.md", "results.json", "variance.png", "variance.pdf"):
        assert (out / name).exists(), name
    first = (out / "components.csv").read_bytes()
    variance_study.main(["--preset", "smoke", "--out-dir", str(out), "--workers", "1"])
    assert (out / "components.csv").read_bytes() == first
