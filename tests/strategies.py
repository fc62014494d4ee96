"""Shared hypothesis strategies for the theorem tests (docs/theory.md §6, "What verified means").

Each strategy draws *sizes and a seed* and builds the arrays with an explicit
``numpy.random.Generator`` from :mod:`shiftbounds.constructions`: hypothesis shrinks the sizes
and the seed, never floats inside kernels, and no strategy touches a global random state.

Anchors mixed in on purpose: ``H = 1``, ``S = 1``, ``A = 1``, deterministic and sparse kernels,
Dirichlet concentrations from 0.1 (near-deterministic) to 10 (near-uniform), zero and constant
rewards, a policy equal to the data policy, and policies that mix the data policy with weight
0, 1 or a tiny value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from shiftbounds.constructions import KERNEL_KINDS, perturbed_simulator, random_mdp, random_policy
from shiftbounds.tabular import TabularMDP, mixture_policy

EPS64 = float(np.finfo(np.float64).eps)
INEQUALITY_TOL = 1e-9
"""Slack allowed on an inequality (docs/theory.md §6): ~1e6 ulps, far above rounding at these sizes."""
IDENTITY_TOL = 1e-10
"""Allowed |lhs - rhs| for an exact identity (docs/theory.md §6)."""

CONCENTRATIONS = (0.1, 0.3, 1.0, 3.0, 10.0)
MIX_WEIGHTS = (0.0, 1e-6, 0.05, 0.5, 1.0)


@dataclass(frozen=True)
class Instance:
    """An MDP with a data policy, a policy and a simulator of the same shape."""

    mdp: TabularMDP
    sim: TabularMDP
    policy: np.ndarray
    data_policy: np.ndarray
    label: str


def _rewards(rng: np.random.Generator, shape: tuple[int, ...], mode: str) -> np.ndarray:
    if mode == "zero":
        return np.zeros(shape)
    if mode == "constant":
        return np.full(shape, 0.7)
    if mode == "signed":
        return rng.uniform(-2.0, 3.0, size=shape)
    return rng.random(shape)


@st.composite
def instances(draw, max_horizon: int = 6, max_states: int = 5, max_actions: int = 4) -> Instance:
    """An :class:`Instance` with the anchors listed in the module docstring."""
    H = draw(st.one_of(st.just(1), st.integers(1, max_horizon)))
    S = draw(st.one_of(st.just(1), st.integers(1, max_states)))
    A = draw(st.one_of(st.just(1), st.integers(1, max_actions)))
    seed = draw(st.integers(0, 2**32 - 1))
    kind = draw(st.sampled_from(KERNEL_KINDS))
    conc = draw(st.sampled_from(CONCENTRATIONS))
    reward_mode = draw(st.sampled_from(("uniform", "zero", "constant", "signed")))
    policy_mode = draw(st.sampled_from(("equal", "mixed", "random", "deterministic")))
    weight = draw(st.sampled_from(MIX_WEIGHTS))
    sim_weight = draw(st.sampled_from(MIX_WEIGHTS))
    sim_reward_noise = draw(st.sampled_from((0.0, 0.1, 1.0)))

    rng = np.random.default_rng(seed)
    base = random_mdp(H, S, A, rng=rng, concentration=conc, kind=kind)
    mdp = base.with_rewards(_rewards(rng, (H, S, A), reward_mode))
    data = random_policy(H, S, A, rng=rng, concentration=conc)
    if policy_mode == "equal":
        pi = data.copy()
    elif policy_mode == "deterministic":
        pi = random_policy(H, S, A, rng=rng, kind="deterministic")
    else:
        other = random_policy(H, S, A, rng=rng, concentration=conc, kind=kind)
        pi = mixture_policy(data, other, weight) if policy_mode == "mixed" else other
    sim = perturbed_simulator(mdp, sim_weight, rng=rng, concentration=conc, reward_noise=sim_reward_noise)
    label = f"H={H} S={S} A={A} kind={kind} c={conc} r={reward_mode} pi={policy_mode}/{weight} sim={sim_weight}"
    return Instance(mdp=mdp, sim=sim, policy=pi, data_policy=data, label=label)
