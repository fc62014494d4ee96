"""The statements of docs/theory.md as code: bounds (right-hand sides), exact identities, sympy forms,
and the names of paper 1's three paradigms (:data:`PARADIGMS`), which every trainer of the package takes."""

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

PARADIGMS = ("static", "interactive", "calibrated")
"""Static Context RL (logged contexts), Interactive RL (a prompted simulator), Calibrated Interactive RL
(a simulator fitted to the logs): the one spelling of the paradigms on every path."""

__all__ = [
    "PARADIGMS",
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
