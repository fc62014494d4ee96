"""Statistics for reported numbers: confidence intervals and log-log slopes with bootstrap CIs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _stats


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a two-sided confidence interval ``[low, high]`` at ``level``."""

    value: float
    low: float
    high: float
    level: float = 0.95

    def contains(self, x: float) -> bool:
        """True when ``low <= x <= high``."""
        return self.low <= x <= self.high

    def __str__(self) -> str:
        return f"{self.value:.4g} [{self.low:.4g}, {self.high:.4g}]"


def mean_ci(x: np.ndarray, level: float = 0.95) -> Estimate:
    """Mean with a Student-t interval (zero width for a single sample or constant data)."""
    x = np.asarray(x, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("mean_ci needs at least one value")
    m = float(x.mean())
    if x.size == 1 or np.all(x == x[0]):
        return Estimate(m, m, m, level)
    half = float(_stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return Estimate(m, m - half, m + half, level)


def proportion_ci(successes: int, n: int, level: float = 0.95) -> Estimate:
    """Wilson score interval for a proportion ``successes / n``."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0; got successes={successes}, n={n}")
    z = float(_stats.norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Estimate(p, float(centre - half), float(centre + half), level)


def _bootstrap_slope(u: np.ndarray, v: np.ndarray, n_boot: int, level: float, *,
                     rng: np.random.Generator) -> Estimate:
    """Least-squares slope of ``v`` on ``u``; percentile bootstrap resampling within each
    distinct ``u`` (stratified, so every horizon stays represented)."""
    if np.unique(u).size < 2:
        raise ValueError("a slope needs at least two distinct x values")
    slope = float(np.polyfit(u, v, 1)[0])
    groups = [np.flatnonzero(u == value) for value in np.unique(u)]
    boots = np.empty(n_boot)
    for b in range(n_boot):
        idx = np.concatenate([g[rng.integers(g.size, size=g.size)] for g in groups])
        boots[b] = np.polyfit(u[idx], v[idx], 1)[0]
    lo, hi = np.quantile(boots, [0.5 - level / 2, 0.5 + level / 2])
    return Estimate(slope, float(lo), float(hi), level)


def _pair(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"x and y need the same length >= 2; got {x.size} and {y.size}")
    return x, y


def loglog_slope(x: np.ndarray, y: np.ndarray, *, rng: np.random.Generator, n_boot: int = 2000,
                 level: float = 0.95) -> Estimate:
    """Slope of ``log y`` on ``log x`` (a polynomial growth order) with a bootstrap CI.

    Raises:
        ValueError: a non-positive ``x`` or ``y`` (a log-log slope needs positive values).
    """
    x, y = _pair(x, y)
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError(f"loglog_slope needs positive x and y; got min x {x.min():.3g}, min y {y.min():.3g}")
    return _bootstrap_slope(np.log(x), np.log(y), n_boot, level, rng=rng)


def linear_slope(x: np.ndarray, y: np.ndarray, *, rng: np.random.Generator, n_boot: int = 2000,
                 level: float = 0.95) -> Estimate:
    """Slope of ``y`` on ``x`` with a bootstrap CI (e.g. ``log n`` against ``H``: an exponential rate)."""
    x, y = _pair(x, y)
    return _bootstrap_slope(x, y, n_boot, level, rng=rng)


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with tied scores counted half); needs both classes."""
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels).astype(bool)
    pos, neg = scores[labels], scores[~labels]
    if pos.size == 0 or neg.size == 0:
        raise ValueError(f"AUC needs both classes; got {pos.size} positives and {neg.size} negatives")
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([pos, neg]))
    return float((ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2) / (pos.size * neg.size))


def auc_ci(auc: float, n_pos: int, n_neg: int, level: float = 0.95) -> Estimate:
    """Normal interval for an AUC from ``n_pos`` positives and ``n_neg`` negatives, with the
    Hanley-McNeil (1982) standard error; clipped to ``[0, 1]``."""
    if not 0.0 <= auc <= 1.0 or n_pos < 1 or n_neg < 1:
        raise ValueError(f"need 0 <= auc <= 1 and both counts >= 1; got auc={auc}, n_pos={n_pos}, n_neg={n_neg}")
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc * auc) + (n_neg - 1) * (q2 - auc * auc)) / (n_pos * n_neg)
    half = float(_stats.norm.ppf(0.5 + level / 2) * np.sqrt(max(var, 0.0)))
    return Estimate(auc, max(0.0, auc - half), min(1.0, auc + half), level)


def paired_difference(x: np.ndarray, y: np.ndarray, names: tuple[str, str] = ("x", "y"), level: float = 0.95) -> dict:
    """Mean of the paired differences ``x - y`` (e.g. per seed) with a t-interval, the two-sided
    one-sample t-test's ``p`` (below ``1 - level`` exactly when the interval excludes 0; 1 for
    differences all 0, 0 for a constant non-zero difference) and the ordering it supports:
    ``"x > y"`` / ``"x < y"`` when the interval excludes 0, else ``"not significant"``."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"paired differences need two equal-length samples of size >= 2; got {x.shape} and {y.shape}")
    d = x - y
    e = mean_ci(d, level)
    sd = d.std(ddof=1)
    if sd == 0:  # equal differences (or spread below float resolution)
        p = 1.0 if d.mean() == 0 else 0.0
    else:
        p = float(2 * _stats.t.sf(abs(d.mean() / (sd / np.sqrt(d.size))), d.size - 1))
    a, b = names
    verdict = f"{a} > {b}" if e.low > 0 else f"{a} < {b}" if e.high < 0 else "not significant"
    return {"difference": f"{a} - {b}", "mean": e.value, "low": e.low, "high": e.high, "n": int(x.size), "p": p,
            "verdict": verdict}


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down test of a family of hypotheses: which are rejected with family-wise error at
    most ``alpha``. The ``k``-th smallest p-value (from 0) is compared with ``alpha / (m - k)``; the
    first that fails stops the rejections."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or np.any((p < 0) | (p > 1)) or not 0 < alpha < 1:
        raise ValueError(f"holm needs p-values in [0, 1] and 0 < alpha < 1; got {p_values!r}, alpha={alpha}")
    rejected = [False] * p.size
    for k, i in enumerate(np.argsort(p, kind="stable")):
        if p[i] >= alpha / (p.size - k):
            break
        rejected[i] = True
    return rejected


def holm_verdicts(rows: Sequence[dict], alpha: float = 0.05) -> list[str]:
    """The verdicts of a family of :func:`paired_difference` rows that survive :func:`holm`'s
    correction over the family: a row's own ordering where its hypothesis is rejected, else
    ``"not significant"``."""
    return [r["verdict"] if kept else "not significant" for r, kept in zip(rows, holm([r["p"] for r in rows], alpha))]


def trend(values: Sequence[float]) -> dict:
    """A series' mean over its first and last quarter (at least one value each) and the rise of its
    least-squares line over the whole series (0 for a single value)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 1:
        raise ValueError(f"trend needs a non-empty 1-d series; got shape {v.shape}")
    q = max(1, v.size // 4)
    rise = float(np.polyfit(np.arange(v.size), v, 1)[0] * (v.size - 1)) if v.size > 1 else 0.0
    return {"steps": int(v.size), "first_quarter": float(v[:q].mean()), "last_quarter": float(v[-q:].mean()), "fitted_rise": rise}
