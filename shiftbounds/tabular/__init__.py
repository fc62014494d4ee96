"""The exact engine: finite-horizon tabular MDPs, occupancies, values, returns and DP.

See docs/theory.md §1 for the notation; :mod:`shiftbounds.shift` builds the shift measures on top.
"""

from shiftbounds.tabular.evaluation import (
    expected_return,
    occupancy,
    optimal_policy,
    optimal_values,
    q_values,
    static_context_return,
    turn_rewards,
    v_values,
)
from shiftbounds.tabular.mdp import (
    TabularMDP,
    check_distribution,
    check_policy,
    deterministic_policy,
    greedy_policy,
    mixture_policy,
    reward_span,
    softmax_policy,
    uniform_policy,
)

__all__ = [
    "TabularMDP",
    "check_distribution",
    "check_policy",
    "deterministic_policy",
    "expected_return",
    "greedy_policy",
    "mixture_policy",
    "occupancy",
    "optimal_policy",
    "optimal_values",
    "q_values",
    "reward_span",
    "softmax_policy",
    "static_context_return",
    "turn_rewards",
    "uniform_policy",
    "v_values",
]
