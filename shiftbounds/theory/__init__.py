"""The statements of docs/theory.md as code: bounds (right-hand sides), exact identities, sympy forms."""

from shiftbounds.theory.bounds import (
    compounding,
    corollary1_rhs,
    lemma1_rhs,
    lemma2_rhs,
    theorem1_crude_rhs,
    theorem1_rhs,
    theorem2_rhs,
    theorem3_rhs,
)
from shiftbounds.theory.identities import (
    Identity,
    performance_difference,
    simulation_lemma,
    static_bias,
)

__all__ = [
    "Identity",
    "compounding",
    "corollary1_rhs",
    "lemma1_rhs",
    "lemma2_rhs",
    "performance_difference",
    "simulation_lemma",
    "static_bias",
    "theorem1_crude_rhs",
    "theorem1_rhs",
    "theorem2_rhs",
    "theorem3_rhs",
]
