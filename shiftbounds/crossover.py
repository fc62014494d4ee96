"""The crossover horizon ``H*`` beyond which behaviour cloning needs more data than an online learner.

With a noisy expert, BC's sample complexity on the combination lock grows like ``q^{-H}``
(``q = 1 - eta + eta / A``) and NAIL's polynomially in ``H`` (docs/theory.md §5), so BC can be
cheaper on short horizons and is dearer from some ``H*(eta)`` on. Two readings of ``H*``:

* **predicted**: fit ``log n = a + b H`` to BC's and ``log n = c + d log H`` to the online learner's
  medians on short horizons, and solve ``a + b H = c + d log H`` (:func:`predicted_crossover`);
* **measured**: the smallest grid horizon from which BC's median stays above the online learner's
  on the rest of the grid, interpolated linearly in ``log`` medians (:func:`measured_crossover`).

``H* = inf`` means no crossover (censored at the grid's end, or never under the fit); a crossover
at or before the first horizon is returned as that horizon. All functions are pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import brentq


def _log_fit(x: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    x, n = np.asarray(x, float), np.asarray(n, float)
    if x.size < 2 or not np.all(np.isfinite(n)) or np.any(n <= 0):
        raise ValueError(f"need >= 2 finite positive counts to fit; got {n.tolist()}")
    slope, intercept = np.polyfit(x, np.log(n), 1)
    return float(intercept), float(slope)


def fit_exponential(H: Sequence[float], n: Sequence[float]) -> tuple[float, float]:
    """``(a, b)`` of the least-squares fit ``log n = a + b H``."""
    return _log_fit(np.asarray(H, float), np.asarray(n, float))


def fit_power(H: Sequence[float], n: Sequence[float]) -> tuple[float, float]:
    """``(c, d)`` of the least-squares fit ``log n = c + d log H``."""
    return _log_fit(np.log(np.asarray(H, float)), np.asarray(n, float))


def fit_exponential_at_rate(H: Sequence[float], n: Sequence[float], rate: float) -> tuple[float, float]:
    """``(a, rate)``: the least-squares intercept of ``log n = a + rate H`` with the rate fixed
    (e.g. at the theory's ``-log q``)."""
    H, n = np.asarray(H, float), np.asarray(n, float)
    if H.size < 1 or not np.all(np.isfinite(n)) or np.any(n <= 0):
        raise ValueError(f"need finite positive counts to fit; got {n.tolist()}")
    return float(np.mean(np.log(n) - rate * H)), float(rate)


def predicted_crossover(bc: tuple[float, float], online: tuple[float, float], *, h_min: float = 1.0,
                        h_max: float = 1e6) -> float:
    """The smallest ``H >= h_min`` from which ``a + b H > c + d log H`` holds for every larger
    ``H`` up to ``h_max``, for ``bc = (a, b)`` and ``online = (c, d)``; ``inf`` if it fails at
    ``h_max`` (no crossover under the fits), ``h_min`` if it holds from the start."""
    (a, b), (c, d) = bc, online

    def gap(h: float) -> float:
        return a + b * h - c - d * np.log(h)

    # gap' = b - d / H vanishes only at H = d / b, so gap is monotone between grid points once that
    # point is on the grid: every sign change (and a tangent touch) is then seen by the grid.
    grid = np.geomspace(h_min, h_max, 4001)
    if b != 0 and h_min < d / b < h_max:
        grid = np.sort(np.append(grid, d / b))
    below = np.flatnonzero(gap(grid) <= 0)
    if below.size == 0:
        return float(h_min)
    i = int(below[-1])
    if i == grid.size - 1:
        return float("inf")
    return float(brentq(gap, grid[i], grid[i + 1], xtol=1e-9))


def measured_crossover(H: Sequence[float], log_ratio: Sequence[float]) -> float:
    """The smallest horizon from which ``log_ratio = log median_BC - log median_online`` stays
    ``> 0`` on the rest of the grid ``H`` (increasing), linearly interpolated between the last
    grid point where it is ``<= 0`` and the next; ``+inf`` / ``-inf`` entries (one side over its
    budget) are kept, ``nan`` entries (both over budget, or neither run) are dropped. Returns
    ``inf`` when the last horizon is not a crossover (censored: ``H* > max H``) and ``H[0]`` when
    every horizon is."""
    H, r = np.asarray(H, float), np.asarray(log_ratio, float)
    if H.shape != r.shape or H.size == 0 or np.any(np.diff(H) <= 0):
        raise ValueError(f"need increasing horizons and one log ratio per horizon; got {H.tolist()} and {r.tolist()}")
    keep = ~np.isnan(r)
    H, r = H[keep], r[keep]
    if H.size == 0:
        return float("nan")
    below = np.flatnonzero(r <= 0)
    if below.size == 0:
        return float(H[0])
    i = int(below[-1])
    if i == H.size - 1:
        return float("inf")
    lo, hi = r[i], r[i + 1]
    if not np.isfinite(lo):
        return float(H[i])
    if not np.isfinite(hi):
        return float(H[i + 1])
    return float(H[i] + (H[i + 1] - H[i]) * (-lo) / (hi - lo))


def log_median_ratio(bc: np.ndarray, online: np.ndarray) -> float:
    """``log median(bc) - log median(online)`` with censored (``inf``) counts: ``+inf`` when only
    BC's median is censored, ``-inf`` when only the online learner's is, ``nan`` when both are."""
    mb, mo = float(np.median(bc)), float(np.median(online))
    if np.isinf(mb) and np.isinf(mo):
        return float("nan")
    if np.isinf(mb):
        return float("inf")
    if np.isinf(mo):
        return float("-inf")
    return float(np.log(mb) - np.log(mo))


def median_ci(values: np.ndarray, n_boot: int, *, rng: np.random.Generator, level: float = 0.95) -> tuple[float, float, float]:
    """Median of ``values`` (``inf`` = over budget) with a percentile-bootstrap interval; the
    interval's ends are order statistics of the resampled medians, so an ``inf`` end means that
    the median is censored in at least that share of resamples."""
    values = np.asarray(values, float)
    boots = np.median(rng.choice(values, size=(n_boot, values.size)), axis=1)
    return float(np.median(values)), *quantile_interval(boots, level)


def quantile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap ``samples`` that may hold ``inf`` (``nan`` dropped),
    taken as order statistics (no interpolation with an infinite neighbour)."""
    s = np.asarray(samples, float)
    s = s[~np.isnan(s)]
    if s.size == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2
    return float(np.quantile(s, tail, method="lower")), float(np.quantile(s, 1 - tail, method="higher"))


def growth_slope(H: np.ndarray, per_seed: Sequence[np.ndarray], log_x: bool, n_boot: int, *,
                 rng: np.random.Generator) -> tuple[float, float, float] | None:
    """Slope of ``log median(n)`` against ``H`` (or ``log H``) with a bootstrap interval over seeds
    (resamples with a censored median dropped); ``None`` when a median is censored at some ``H``."""
    x = np.log(H) if log_x else np.asarray(H, float)

    def fit(samples) -> float:
        med = np.array([np.median(s) for s in samples])
        if not np.isfinite(med).all():
            return np.nan
        return float(np.polyfit(x, np.log(med), 1)[0])

    point = fit(per_seed)
    if not np.isfinite(point):
        return None
    boots = np.array([fit([rng.choice(s, size=s.size) for s in per_seed]) for _ in range(n_boot)])
    return point, *quantile_interval(boots[np.isfinite(boots)])


def _predict(H: np.ndarray, bc_med: np.ndarray, online_med: np.ndarray, rate: float | None) -> float:
    if not (np.isfinite(bc_med).all() and np.isfinite(online_med).all()):
        return float("nan")
    bc = fit_exponential(H, bc_med) if rate is None else fit_exponential_at_rate(H, bc_med, rate)
    return predicted_crossover(bc, fit_power(H, online_med), h_min=float(H[0]))


def crossover_estimates(H: Sequence[int], bc: Sequence[np.ndarray], online: Sequence[np.ndarray], *, fit_max_h: int,
                        n_boot: int, rng: np.random.Generator, rate: float | None = None) -> dict:
    """Predicted and measured ``H*`` with percentile-bootstrap intervals over seeds.

    ``bc[i]`` and ``online[i]`` hold per-seed counts at horizon ``H[i]`` (``inf``: over budget),
    paired by seed (seed ``k`` of both is the same instance), so each resample draws one set of
    seed indices per horizon for both. The prediction fits the horizons ``<= fit_max_h`` only
    (with BC's rate fitted, and, when ``rate`` is given, with BC's rate fixed at it); the
    measurement reads the whole grid. A prediction needs finite medians on every fitted horizon,
    else it is ``nan`` (not estimable).

    Returns:
        ``{"predicted": (point, low, high), "predicted_at_rate": (...) or None,
        "measured": (...), "measured_censored_share": share of resamples with no crossover}``.
    """
    H = np.asarray(H, float)
    if len(bc) != H.size or len(online) != H.size:
        raise ValueError(f"need one array of counts per horizon for BC and the online learner; got {len(bc)}, {len(online)} for {H.size} horizons")
    fit = H <= fit_max_h
    if fit.sum() < 2:
        raise ValueError(f"fit_max_h={fit_max_h} leaves {int(fit.sum())} horizons to fit in {H.tolist()}; need >= 2")
    bc = [np.asarray(v, float) for v in bc]
    online = [np.asarray(v, float) for v in online]

    def estimate(idx: list[np.ndarray]) -> tuple[float, float, float]:
        b = [v[i] for v, i in zip(bc, idx)]
        o = [v[i] for v, i in zip(online, idx)]
        bm = np.array([np.median(v) for v in b])
        om = np.array([np.median(v) for v in o])
        measured = measured_crossover(H, [log_median_ratio(x, y) for x, y in zip(b, o)])
        at_rate = _predict(H[fit], bm[fit], om[fit], rate) if rate is not None else float("nan")
        return _predict(H[fit], bm[fit], om[fit], None), at_rate, measured

    point = estimate([np.arange(v.size) for v in bc])
    boots = np.array([estimate([rng.integers(0, v.size, v.size) for v in bc]) for _ in range(n_boot)])
    out = {key: (point[j], *quantile_interval(boots[:, j])) for j, key in enumerate(("predicted", "predicted_at_rate", "measured"))}
    if rate is None:
        out["predicted_at_rate"] = None
    out["measured_censored_share"] = float(np.isinf(boots[:, 2]).mean())
    return out
