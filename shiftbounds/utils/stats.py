"""Statistics for reported numbers: confidence intervals (t, Wilson, Clopper-Pearson), log-log
slopes with bootstrap CIs, paired tests that fit small samples (exact sign-flip, exact McNemar),
Holm's correction over a family, and the number of seeds a comparison needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize as _optimize
from scipy import stats as _stats
from scipy.stats import rankdata


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


def ratio_of_means_ci(num: np.ndarray, den: np.ndarray, *, rng: np.random.Generator, n_boot: int = 4000,
                      level: float = 0.95) -> Estimate:
    """``mean(num) / mean(den)`` over paired samples (e.g. per-seed differences) with a paired
    percentile bootstrap interval (the same resampled indices for both). Bootstrap draws whose
    denominator mean is 0 count as infinite; ``nan`` when the denominator's mean is 0."""
    num, den = np.asarray(num, float).ravel(), np.asarray(den, float).ravel()
    if num.shape != den.shape or num.size < 2:
        raise ValueError(f"need paired samples of the same length >= 2; got {num.size} and {den.size}")
    if den.mean() == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), level)
    idx = rng.integers(num.size, size=(n_boot, num.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        b = num[idx].mean(1) / den[idx].mean(1)
    b = np.where(np.isnan(b), np.inf, b)
    lo, hi = np.quantile(b, [0.5 - level / 2, 0.5 + level / 2])
    return Estimate(float(num.mean() / den.mean()), float(lo), float(hi), level)


def proportion_ci(successes: int, n: int, level: float = 0.95) -> Estimate:
    """Wilson score interval for a proportion ``successes / n``."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0; got successes={successes}, n={n}")
    z = float(_stats.norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at k = 0 (k = n) the lower (upper) bound is 0 (1) exactly, which rounding would miss by an ulp
    low = 0.0 if successes == 0 else float(centre - half)
    high = 1.0 if successes == n else float(centre + half)
    return Estimate(p, low, high, level)


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


EXACT_SIGN_FLIP_MAX_N = 20
"""Up to this many pairs :func:`sign_flip_p` enumerates all ``2^n`` sign vectors (exact); beyond,
it draws ``draws`` random ones (Monte Carlo)."""


def sign_flip_p(d: np.ndarray, *, draws: int = 100_000, seed: int = 0) -> tuple[float, str]:
    """Two-sided paired permutation (sign-flip) p-value of ``mean(d) = 0``, and how it was computed.

    Under the null the sign of each paired difference is a fair coin, so the p-value is the share of
    the ``2^n`` sign vectors ``s`` with ``|sum(s * d)| >= |sum(d)|`` (up to rounding). Exact for
    ``n <=`` :data:`EXACT_SIGN_FLIP_MAX_N`; beyond, ``(1 + hits) / (1 + draws)`` over ``draws``
    random sign vectors from a generator seeded by ``seed`` (a valid p-value, the same on every
    call). The smallest exact p is ``2 / 2^n``: 0.0625 for 5 pairs, about 2e-6 for 20. All
    differences 0 give p = 1; a constant non-zero difference gives ``2 / 2^n``, not 0.

    Returns:
        ``(p, method)``; ``method`` is ``"exact sign-flip"`` or ``"sign-flip, N Monte Carlo draws"``.
    """
    d = np.asarray(d, dtype=float).ravel()
    if d.size < 1 or not np.isfinite(d).all():
        raise ValueError(f"sign_flip_p needs finite paired differences; got {d!r}")
    if draws < 1:
        raise ValueError(f"draws must be >= 1; got {draws}")
    observed = abs(d.sum())
    tol = 1e-9 * np.abs(d).sum()  # sums equal up to rounding (relative) count as "at least as extreme"
    if d.size <= EXACT_SIGN_FLIP_MAX_N:
        hits, total = 0, 2 ** d.size
        bits = np.arange(d.size)
        for start in range(0, total, 2 ** 16):
            codes = np.arange(start, min(total, start + 2 ** 16))
            signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)  # [chunk, n]
            hits += int((np.abs(signs @ d) >= observed - tol).sum())
        return hits / total, "exact sign-flip"
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, draws, 2 ** 14):
        signs = rng.choice([-1.0, 1.0], size=(min(draws, start + 2 ** 14) - start, d.size))
        hits += int((np.abs(signs @ d) >= observed - tol).sum())
    return (1 + hits) / (1 + draws), f"sign-flip, {draws} Monte Carlo draws"


def paired_difference(x: np.ndarray, y: np.ndarray, names: tuple[str, str] = ("x", "y"), level: float = 0.95) -> dict:
    """Paired differences ``x - y`` (e.g. per seed): their mean with a Student-t interval, the
    exact (or Monte Carlo) sign-flip p-value :func:`sign_flip_p` that the verdict rests on, and the
    t-test's ``p_t`` beside it.

    The verdict names an ordering (``"x > y"`` / ``"x < y"``, by the sign of the mean) only when
    ``p < 1 - level``; else ``"not significant"``. Differences that are all equal (no spread) are
    flagged ``constant``: the t statistic is undefined there, so ``p_t`` is ``None``, never 0, and
    the permutation p is what it is (``2 / 2^n`` for a constant non-zero difference).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"paired differences need two equal-length samples of size >= 2; got {x.shape} and {y.shape}")
    d = x - y
    e = mean_ci(d, level)
    constant = bool(np.all(d == d[0]))
    sd = d.std(ddof=1)
    p_t = None if constant or sd == 0 else float(2 * _stats.t.sf(abs(d.mean() / (sd / np.sqrt(d.size))), d.size - 1))
    p, method = sign_flip_p(d)
    a, b = names
    verdict = "not significant" if p >= 1 - level or d.mean() == 0 else f"{a} > {b}" if d.mean() > 0 else f"{a} < {b}"
    return {"difference": f"{a} - {b}", "mean": e.value, "low": e.low, "high": e.high, "sd": float(sd), "n": int(x.size),
            "p": p, "p_method": method, "p_t": p_t, "constant": constant, "verdict": verdict}


def exact_proportion_ci(successes: int, n: int, level: float = 0.95) -> Estimate:
    """Clopper-Pearson (exact binomial) interval for ``successes / n``: never leaves ``[0, 1]`` and
    covers at least ``level`` for every true rate (conservative)."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0; got successes={successes}, n={n}")
    a = 1 - level
    low = 0.0 if successes == 0 else float(_stats.beta.ppf(a / 2, successes, n - successes + 1))
    high = 1.0 if successes == n else float(_stats.beta.ppf(1 - a / 2, successes + 1, n - successes))
    return Estimate(successes / n, low, high, level)


def mcnemar_exact(x: Sequence[bool], y: Sequence[bool], names: tuple[str, str] = ("x", "y"), alpha: float = 0.05) -> dict:
    """McNemar's exact test for paired binary outcomes (e.g. "solved" per seed for two methods that
    share each seed's start): of the discordant pairs, ``b`` have only ``x`` succeed and ``c`` only
    ``y``; under the null ``b ~ Binomial(b + c, 1/2)``. Two-sided ``p = min(1, 2 P(B <= min(b, c)))``
    (1 without discordant pairs). The verdict names an ordering only when ``p < alpha``."""
    x, y = np.asarray(x, dtype=bool).ravel(), np.asarray(y, dtype=bool).ravel()
    if x.shape != y.shape or x.size < 1:
        raise ValueError(f"McNemar's test needs two equal-length non-empty binary samples; got {x.shape} and {y.shape}")
    b, c = int((x & ~y).sum()), int((~x & y).sum())
    p = 1.0 if b + c == 0 else min(1.0, float(2 * _stats.binom.cdf(min(b, c), b + c, 0.5)))
    a_name, b_name = names
    verdict = "not significant" if p >= alpha else f"{a_name} > {b_name}" if b > c else f"{a_name} < {b_name}"
    return {"difference": f"{a_name} - {b_name}", "mean": float(x.mean() - y.mean()), "only_x": b, "only_y": c,
            "n": int(x.size), "p": p, "p_method": "exact McNemar", "verdict": verdict}


def mcnemar_power(n: int, p_only_x: float, p_only_y: float, *, alpha: float = 0.05) -> float:
    """The exact power of :func:`mcnemar_exact` at level ``alpha`` with ``n`` pairs, where a pair is
    discordant in ``x``'s favour with probability ``p_only_x`` and in ``y``'s with ``p_only_y``:
    ``sum_d P(D = d) P(p(B, d) < alpha | d)`` with ``D ~ Binomial(n, p_only_x + p_only_y)`` and
    ``B | d ~ Binomial(d, p_only_x / (p_only_x + p_only_y))``."""
    if n < 1 or p_only_x < 0 or p_only_y < 0 or p_only_x + p_only_y > 1:
        raise ValueError(f"need n >= 1 and discordance probabilities >= 0 summing to <= 1; got {n}, {p_only_x}, {p_only_y}")
    disc = p_only_x + p_only_y
    if disc == 0:
        return 0.0
    q = p_only_x / disc
    total = 0.0
    for d in range(1, n + 1):
        b = np.arange(d + 1)
        p = np.minimum(1.0, 2 * _stats.binom.cdf(np.minimum(b, d - b), d, 0.5))
        total += _stats.binom.pmf(d, n, disc) * _stats.binom.pmf(b[p < alpha], d, q).sum()
    return float(total)


def seeds_for_mcnemar(difference: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8,
                      max_n: int = 2000) -> int:
    """The fewest pairs at which :func:`mcnemar_power` reaches ``power`` for a solve-rate
    ``difference`` (``p_only_x - p_only_y``) at a ``discordance`` rate (``p_only_x + p_only_y``);
    the exact test's power is not monotone in ``n``, so the count returned is the smallest from
    which it stays at or above ``power`` for the next four ``n`` too."""
    if not 0 < difference <= discordance <= 1:
        raise ValueError(f"need 0 < difference <= discordance <= 1; got {difference}, {discordance}")
    hi, lo = (discordance + difference) / 2, (discordance - difference) / 2
    for n in range(1, max_n + 1):
        if all(mcnemar_power(n + k, hi, lo, alpha=alpha) >= power for k in range(5)):
            return n
    raise ValueError(f"power {power} is not reached within {max_n} pairs")


def seeds_for_power(sd: float, delta: float, *, alpha: float = 0.05, power: float = 0.8, family: int = 1,
                    max_n: int = 10_000) -> int:
    """Smallest number of paired seeds at which a two-sided one-sample t-test at level
    ``alpha / family`` (Bonferroni: the worst step of Holm's correction over ``family`` comparisons)
    detects a true mean difference ``delta`` with paired standard deviation ``sd`` with probability
    at least ``power`` (noncentral t). The sign-flip test has about the same power from ten pairs on."""
    if sd <= 0 or delta == 0 or not 0 < alpha < 1 or not 0 < power < 1 or family < 1:
        raise ValueError(f"need sd > 0, delta != 0, alpha and power in (0, 1), family >= 1; got {sd}, {delta}, {alpha}, {power}, {family}")
    level = alpha / family
    for n in range(2, max_n + 1):  # kept as shipped: a nan lower tail counts as power not reached (overstates n; see CHANGELOG)
        crit = _stats.t.ppf(1 - level / 2, n - 1)
        nc = abs(delta) / sd * np.sqrt(n)
        if _stats.nct.sf(crit, n - 1, nc) + _stats.nct.cdf(-crit, n - 1, nc) >= power:
            return n
    raise ValueError(f"more than {max_n} seeds needed for delta={delta}, sd={sd}")


def _t_power(delta: float, sd: float, n: int, level: float) -> float:
    crit = _stats.t.ppf(1 - level / 2, n - 1)
    nc = abs(delta) / sd * np.sqrt(n)
    lower = float(_stats.nct.cdf(-crit, n - 1, nc))  # the wrong-sign tail: scipy gives nan where it is below 1e-15
    return float(_stats.nct.sf(crit, n - 1, nc)) + (0.0 if np.isnan(lower) else lower)


def minimum_detectable_effect(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true mean difference that a two-sided paired t-test at level ``alpha`` over ``n``
    pairs with standard deviation ``sd`` detects with probability ``power`` (noncentral t, the
    inverse of :func:`seeds_for_power`); 0 when ``sd`` is 0."""
    if n < 2 or sd < 0 or not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"need n >= 2, sd >= 0, alpha and power in (0, 1); got n={n}, sd={sd}, alpha={alpha}, power={power}")
    if sd == 0:
        return 0.0
    high = sd
    while _t_power(high, sd, n, alpha) < power:
        high *= 2
    return float(_optimize.brentq(lambda d: _t_power(d, sd, n, alpha) - power, 0.0, high, xtol=1e-12 * sd))


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
    """A series' mean over its first and last quarter (at least one value each), the rise of its
    least-squares line over the whole series (0 for a single value) and that rise's 95 % interval
    (``rise_low``, ``rise_high``: the slope's t-interval from the residuals, independent errors
    assumed; ``None`` below three values)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 1:
        raise ValueError(f"trend needs a non-empty 1-d series; got shape {v.shape}")
    q = max(1, v.size // 4)
    out = {"steps": int(v.size), "first_quarter": float(v[:q].mean()), "last_quarter": float(v[-q:].mean()),
           "fitted_rise": 0.0, "rise_low": None, "rise_high": None}
    if v.size > 1:
        x = np.arange(v.size, dtype=float)
        slope, intercept = np.polyfit(x, v, 1)
        out["fitted_rise"] = float(slope * (v.size - 1))
        if v.size > 2:
            resid = v - (slope * x + intercept)
            se = np.sqrt(resid @ resid / (v.size - 2) / ((x - x.mean()) @ (x - x.mean())))
            half = float(_stats.t.ppf(0.975, v.size - 2) * se * (v.size - 1))
            out["rise_low"], out["rise_high"] = out["fitted_rise"] - half, out["fitted_rise"] + half
    return out


def plateau_step(steps: Sequence[int], values: Sequence[float], *, tol: float, tail: int = 3) -> int | None:
    """The first step from which every later value of a learning curve stays within ``tol`` of the
    curve's final level (the mean of its last ``tail`` points); ``None`` for a curve shorter than
    ``tail + 1`` points. A stated plateau criterion for choosing a training budget: a curve whose
    plateau step is its last point is still moving at the end."""
    s, v = np.asarray(steps), np.asarray(values, dtype=float)
    if s.shape != v.shape or s.ndim != 1 or tol < 0 or tail < 1:
        raise ValueError(f"plateau_step needs equal-length 1-d steps and values, tol >= 0, tail >= 1; got {s.shape}, {v.shape}, {tol}, {tail}")
    if v.size < tail + 1:
        return None
    final = v[-tail:].mean()
    inside = np.abs(v - final) <= tol
    outside = np.flatnonzero(~inside)
    first = 0 if outside.size == 0 else int(outside[-1]) + 1
    return int(s[min(first, s.size - 1)])


def paired_trend(steps: Sequence[int], outcomes: np.ndarray) -> dict:
    """The rise of a learning curve measured on the same units at every checkpoint (e.g. one
    evaluation goal's success at each of ``steps``): ``outcomes`` has one row per step and one
    column per unit. The fitted rise is the least-squares slope of each unit's outcomes on the step
    times the span of the steps, averaged over the units (the slope of the mean curve, by linearity);
    its 95 % t-interval (``rise_low``, ``rise_high``) is over the units, so it reads the
    goal-to-goal spread, not the noise of one checkpoint. ``first`` / ``last``: the mean outcome at
    the first and last step."""
    s = np.asarray(steps, dtype=float)
    y = np.asarray(outcomes, dtype=float)
    if s.ndim != 1 or s.size < 2 or y.ndim != 2 or y.shape[0] != s.size or y.shape[1] < 2 or np.any(np.diff(s) <= 0):
        raise ValueError(f"paired_trend needs >= 2 increasing steps and outcomes of shape (steps, units >= 2); "
                         f"got steps {s.tolist()} and outcomes of shape {y.shape}")
    x = s - s.mean()
    rises = (x @ (y - y.mean(axis=0))) / (x @ x) * (s[-1] - s[0])  # one per unit
    e = mean_ci(rises)
    return {"checkpoints": int(s.size), "units": int(y.shape[1]), "first": float(y[0].mean()), "last": float(y[-1].mean()),
            "fitted_rise": e.value, "rise_low": e.low, "rise_high": e.high}


def crossed_bootstrap_ci(x: np.ndarray, *, rng: np.random.Generator, n_boot: int = 4000, level: float = 0.95) -> Estimate:
    """The mean of ``x`` (fits x units, shape ``(K, G)``: e.g. K calibrations each scored on the same
    G goals) with a percentile interval from the crossed two-level bootstrap: each draw resamples the
    K rows and, independently, the G columns, so the interval carries both the fits' and the units'
    variation. With K = 1 it is the ordinary bootstrap over units; with few rows the row resampling
    takes few distinct values (K = 3: 10 multisets), which widens, never narrows, the interval."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2 or not np.isfinite(x).all():
        raise ValueError(f"need a finite (fits, units) array with at least 2 units; got shape {x.shape}")
    K, G = x.shape
    rows, cols = rng.integers(K, size=(n_boot, K)), rng.integers(G, size=(n_boot, G))
    b = np.array([x[np.ix_(r, c)].mean() for r, c in zip(rows, cols)])
    lo, hi = np.quantile(b, [0.5 - level / 2, 0.5 + level / 2])
    return Estimate(float(x.mean()), float(lo), float(hi), level)
