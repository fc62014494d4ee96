"""The ledger's verdict rules, one per kind of claim, as pure functions of the numbers that decide them.

Five verdicts (:data:`VERDICTS`):

* ``supported`` — the stated test reaches its bar in the claimed direction (an ordering after Holm
  inside its family; an equivalence by two one-sided tests; a one-sided bound by its interval);
* ``contradicted`` — the same test reaches its bar in the opposite direction (or, for an
  equivalence, the interval lies wholly outside the margin);
* ``not significant`` — the test was made and could have reached its bar, but did not;
* ``uninformative`` — the test could not have reached its bar for any outcome of the data that can
  still vary (the signs of the paired differences, given their sizes; for McNemar the split of the
  discordant pairs, given how many there are), even at the most lenient bar Holm can give it (the
  family's level, reached only when every other member is rejected);
* ``untested`` — no shipped result decides it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _stats

from shiftbounds.utils.stats import exact_proportion_ci, holm, mean_ci, sign_flip_p

VERDICTS = ("supported", "contradicted", "not significant", "uninformative", "untested")


@dataclass(frozen=True)
class Verdict:
    """What the files say of a claim: its ``verdict`` (one of :data:`VERDICTS`), the ``number``
    behind it (with its interval) and the ``family`` of the correction it passed."""

    verdict: str
    number: str
    family: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}; got {self.verdict!r}")


def smallest_sign_flip_p(d: Sequence[float]) -> float:
    """The smallest two-sided sign-flip p-value the paired differences ``d`` could give for any
    signs, their sizes fixed: that of ``|d|`` (every sign alike). ``2 / 2^n`` without zeros; each
    zero difference doubles it; 1 when every difference is 0."""
    d = np.asarray(d, dtype=float).ravel()
    zeros = int((d == 0).sum())
    return min(1.0, 2.0 ** (zeros + 1 - d.size))


def smallest_mcnemar_p(discordant: int) -> float:
    """The smallest two-sided exact McNemar p-value with ``discordant`` discordant pairs (all one way):
    ``min(1, 2 / 2^discordant)``; 1 without discordant pairs."""
    if discordant < 0:
        raise ValueError(f"discordant must be >= 0; got {discordant}")
    return 1.0 if discordant == 0 else min(1.0, 2.0 * 0.5 ** discordant)


def holm_bars(p_values: Sequence[float], alpha: float) -> list[float]:
    """The bar each p-value of a family meets in Holm's step-down procedure at family level ``alpha``:
    the ``k``-th smallest (from 0) is compared with ``alpha / (m - k)``; members after the first
    failure keep the bar they would have met next."""
    order = np.argsort(np.asarray(p_values, dtype=float), kind="stable")
    bars = [0.0] * len(order)
    for k, i in enumerate(order):
        bars[i] = alpha / (len(order) - k)
    return bars


def family_ordering(differences: dict[str, np.ndarray], alpha: float) -> dict[str, dict]:
    """Every member of a family of paired comparisons, decided by the exact sign-flip test with Holm
    at family level ``alpha``. ``differences`` maps ``"a - b"`` (or ``"where: a - b"``) to the
    per-replicate differences.

    Each member gets ``mean``, ``sd``, ``n``, ``p``, its Holm ``bar``, the ``low``/``high`` of the
    mean's t-interval at the level of that bar (``1 - bar``; ``constant`` when the differences do
    not vary, so no interval is shown), and its ``verdict``: the ordering ``"a > b"`` /
    ``"a < b"`` where Holm rejects, ``uninformative`` where even the family's level is out of reach,
    else ``not significant``."""
    names = list(differences)
    d = {k: np.asarray(v, dtype=float).ravel() for k, v in differences.items()}
    if not d or any(v.size < 2 for v in d.values()) or not 0 < alpha < 1:
        raise ValueError(f"a family needs members with >= 2 paired replicates and 0 < alpha < 1; got sizes "
                         f"{ {k: v.size for k, v in d.items()} }, alpha={alpha}")
    p = [sign_flip_p(d[k])[0] for k in names]
    rejected, bars = holm(p, alpha), holm_bars(p, alpha)
    out = {}
    for k, pk, rej, bar in zip(names, p, rejected, bars):
        x, (a, b) = d[k], k.rsplit(": ", 1)[-1].split(" - ")
        e = mean_ci(x, 1 - bar)
        if rej and x.mean() != 0:
            verdict = f"{a} > {b}" if x.mean() > 0 else f"{a} < {b}"
        else:
            verdict = "uninformative" if smallest_sign_flip_p(x) >= alpha else "not significant"
        out[k] = {"mean": float(x.mean()), "sd": float(x.std(ddof=1)), "n": int(x.size), "p": pk, "bar": bar,
                  "low": e.low, "high": e.high, "constant": bool(np.all(x == x[0])), "verdict": verdict}
    return out


def direction(verdicts: Sequence[str], a: str, b: str) -> str:
    """One claim over several members (tasks, runs): ``supported`` where every member's verdict is
    ``a > b``, ``contradicted`` where every one is ``a < b``, ``uninformative`` where every member is
    uninformative, else ``not significant``."""
    if all(v == f"{a} > {b}" for v in verdicts):
        return "supported"
    if all(v == f"{a} < {b}" for v in verdicts):
        return "contradicted"
    return "uninformative" if all(v == "uninformative" for v in verdicts) else "not significant"


def combine(verdicts: Sequence[str]) -> str:
    """One claim decided in several parts (settings, noise levels, families): the parts' verdict
    where they all agree, else ``not significant``."""
    if not verdicts:
        raise ValueError("combine needs at least one verdict")
    return verdicts[0] if len(set(verdicts)) == 1 else "not significant"


def equivalence(low: float, high: float, target: float, margin: float) -> str:
    """Two one-sided tests from an interval: ``supported`` where ``[low, high]`` lies inside
    ``[target - margin, target + margin]``, ``contradicted`` where it lies wholly outside it, else
    ``not significant`` (a wide interval decides nothing)."""
    if margin <= 0:
        raise ValueError(f"margin must be > 0; got {margin}")
    if target - margin <= low and high <= target + margin:
        return "supported"
    if high < target - margin or low > target + margin:
        return "contradicted"
    return "not significant"


def at_least(low: float, high: float, threshold: float) -> str:
    """A one-sided claim ``value >= threshold`` from an interval: ``supported`` where the interval
    lies above the threshold, ``contradicted`` where it lies below, else ``not significant``."""
    return "supported" if low >= threshold else "contradicted" if high < threshold else "not significant"


def within_factor(low: float, high: float, reference: float, factor: float) -> str:
    """An interval ``[low, high]`` (``inf``: censored above) against ``reference`` within a ratio
    ``factor``: ``supported`` where the interval lies in ``[reference / factor, reference * factor]``,
    ``contradicted`` where it lies wholly outside it, else ``not significant``. A censored upper
    end never supports."""
    if factor <= 1 or not reference > 0:
        raise ValueError(f"need factor > 1 and reference > 0; got {factor}, {reference}")
    return equivalence(np.log(low) if low > 0 else -np.inf, np.log(high), float(np.log(reference)), float(np.log(factor)))


def mcnemar_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1 without discordant pairs)."""
    n = only_a + only_b
    return 1.0 if n == 0 else min(1.0, float(2 * _stats.binom.cdf(min(only_a, only_b), n, 0.5)))


def mcnemar_verdict(only_a: int, only_b: int, bar: float, alpha: float) -> str:
    """An exact McNemar test's verdict at its Holm ``bar`` with family level ``alpha``: ``">"`` /
    ``"<"`` by the discordant counts where ``p < bar``, ``uninformative`` where even ``alpha`` is out
    of reach with this many discordant pairs, else ``not significant``."""
    n = only_a + only_b
    if mcnemar_p(only_a, only_b) < bar:
        return ">" if only_a > only_b else "<"
    return "uninformative" if smallest_mcnemar_p(n) >= alpha else "not significant"


def upper_rate_bound(successes: int, n: int, alpha: float) -> float:
    """The exact one-sided (Clopper-Pearson) upper confidence bound at level ``1 - alpha`` of a rate
    with ``successes`` of ``n`` (1 when every trial succeeds)."""
    if not 0 <= successes <= n or n < 1 or not 0 < alpha < 1:
        raise ValueError(f"need 0 <= successes <= n, n >= 1 and 0 < alpha < 1; got {successes}, {n}, {alpha}")
    return 1.0 if successes == n else float(_stats.beta.ppf(1 - alpha, successes + 1, n - successes))


def show_mean(row: dict, digits: int = 3) -> str:
    """``mean [low, high]`` of a :func:`family_ordering` member, or ``mean (constant over the n
    replicates)`` where the differences do not vary: never a zero-width interval."""
    m = f"{row['mean']:+.{digits}f}"
    if row["constant"]:
        return f"{m} (constant over the {row['n']} replicates)"
    return f"{m} [{row['low']:+.{digits}f}, {row['high']:+.{digits}f}]"


def show_rate(successes: int, n: int) -> str:
    """A rate with its exact Clopper-Pearson 95 % interval (never outside [0, 1])."""
    e = exact_proportion_ci(successes, n)
    return f"{successes}/{n} = {e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"
