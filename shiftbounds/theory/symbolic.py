"""Closed forms derived with sympy (docs/theory.md §6), exposed as symbols and as NumPy callables.

Each closed form is *derived* here (by ``sympy.summation`` and ``sympy.series``), not typed in,
so a test comparing it with the numeric engine checks the derivation as well as the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import sympy as sp

eps, R, q = sp.symbols("epsilon R q", positive=True)
H, t, k = sp.symbols("H t k", integer=True, positive=True)


@dataclass(frozen=True)
class ClosedForm:
    """A derived expression, its free symbols in call order, and a vectorised NumPy callable."""

    expr: sp.Expr
    symbols: tuple[sp.Symbol, ...]
    fn: Callable

    def __call__(self, *args):
        return self.fn(*args)


def _closed(expr: sp.Expr, symbols: tuple[sp.Symbol, ...]) -> ClosedForm:
    return ClosedForm(expr, symbols, sp.lambdify(symbols, expr, "numpy"))


@cache
def compounding_sum() -> ClosedForm:
    """``sum_{t<H} sum_{k<t} eps = eps H (H-1) / 2`` (Theorem 1's last step), callable ``(eps, H)``."""
    inner = sp.summation(eps, (k, 0, t - 1))
    expr = sp.factor(sp.summation(inner, (t, 0, H - 1)))
    return _closed(expr, (eps, H))


@cache
def cliff_gap() -> ClosedForm:
    """The cliff's exact static-context gap ``R (H - sum_{t<H} (1-eps)^t)
    = R (H - (1 - (1-eps)^H) / eps)``, callable ``(R, eps, H)``."""
    geometric = sp.summation((1 - eps) ** t, (t, 0, H - 1))
    expr = sp.simplify(R * (H - geometric))
    return _closed(expr, (R, eps, H))


@cache
def cliff_gap_series(order: int = 3) -> ClosedForm:
    """Taylor series of :func:`cliff_gap` in ``eps`` up to ``eps**(order-1)``, callable ``(R, eps, H)``.

    To second order: ``R eps H(H-1)/2 - R eps^2 H(H-1)(H-2)/6 + O(eps^3 H^4)``; the leading term
    is Theorem 1's bound, so the gap/bound ratio is ``1 - eps (H-2)/3 + ...``.
    """
    expr = sp.series(cliff_gap().expr, eps, 0, order).removeO()
    return _closed(sp.factor(sp.expand(sp.expand_func(expr))), (R, eps, H))


@cache
def lock_reach_probability() -> ClosedForm:
    """Probability that a noisy-expert trajectory of the combination lock reaches level ``t``:
    ``q^t`` with ``q = 1 - eta + eta/A`` (docs/theory.md §5); callable ``(q, t)``."""
    return _closed(q**t, (q, t))
