r"""Shared hypothesis strategies for the theorem tests (docs/theory.md §6, "What verified means").

Each strategy draws *sizes and a seed* and builds the arrays with an explicit
``numpy.random.Generator`` from :mod:`shiftbounds.constructions`: hypothesis shrinks the sizes
and the seed, never floats inside kernels, and no strategy touches a global random state.

Drawn sizes are ``H, S, A >= 2`` (where shift can happen at all); the degenerate corners
(``H = 1``, ``S = 1``, ``A = 1``, a policy equal to the data policy, a simulator equal to the real
MDP) are not left to chance but pinned by :func:`with_corners`, which adds them to a test as
``@example``\ s. Anchors mixed into the draws: deterministic and sparse kernels, Dirichlet
concentrations from 0.1 (near-deterministic) to 10 (near-uniform), zero and constant rewards, and
policies that mix the data policy with weight 0, 1 or a tiny value. Most draws are *material*
(:func:`is_material`: the bounds say something there); every draw records ``event``\ s (sizes,
whether ``Delta_t`` and ``D_t`` are non-zero, materiality) for ``pytest
--hypothesis-show-statistics``, and a test checks that at least half the draws are material.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import event, example
from hypothesis import strategies as st

from shiftbounds.constructions import KERNEL_KINDS, perturbed_simulator, random_mdp, random_policy
from shiftbounds.shift import policy_shift, simulator_shift
from shiftbounds.tabular import TabularMDP, mixture_policy

EPS64 = float(np.finfo(np.float64).eps)
MAX_H, MAX_S, MAX_A = 6, 5, 4
"""The largest instance :func:`instances` draws by default."""
IDENTITY_TOL = 64 * (MAX_H * MAX_S * MAX_A * MAX_S) * MAX_H * EPS64
"""Allowed |lhs - rhs| for an exact identity (docs/theory.md §6), from the rounding of the longest
sum in the recursions: at most ``H S A S`` terms per sum, values up to ``H`` (returns), each addition
off by at most ``EPS64`` relative, times a safety factor of 64 (about 5e-11)."""
INEQUALITY_TOL = 4 * IDENTITY_TOL
"""Slack allowed on an inequality: a few identities' rounding (both sides are computed sums)."""

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


def build_instance(H: int, S: int, A: int, seed: int, kind: str = "dirichlet", conc: float = 1.0,
                   reward_mode: str = "uniform", policy_mode: str = "random", weight: float = 0.5,
                   sim_weight: float = 0.5, sim_reward_noise: float = 0.1) -> Instance:
    """The :class:`Instance` of these settings (all randomness from ``seed``)."""
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


CORNERS = (
    build_instance(1, 3, 2, 1),  # one turn: no shift can build up
    build_instance(4, 1, 3, 2),  # one state: every occupancy is the same
    build_instance(4, 3, 1, 3),  # one action: every policy is the data policy
    build_instance(1, 1, 1, 4, reward_mode="constant"),
    build_instance(4, 3, 2, 5, policy_mode="equal"),  # the policy is the data policy
    build_instance(4, 3, 2, 6, sim_weight=0.0, sim_reward_noise=0.0),  # the simulator is exact
    build_instance(3, 2, 2, 7, kind="deterministic", conc=0.1, reward_mode="zero", policy_mode="deterministic"),
)
"""Degenerate instances every property test also runs on (see :func:`with_corners`)."""


def with_corners(test):
    """Decorate a ``@given(instances())`` test so that it also runs on every :data:`CORNERS` instance."""
    for inst in CORNERS:
        test = example(inst)(test)
    return test


MATERIAL_SHIFT = 1e-3
"""A shift counts as material above this (far above rounding; the tiny-mixture anchors stay below)."""


def is_material(inst: Instance) -> bool:
    """An instance on which the return-gap bounds say something: ``H >= 3``, rewards that vary,
    and both ``Delta_t`` and ``D_t`` above :data:`MATERIAL_SHIFT` at some turn (with zero or constant
    rewards every gap is 0 and every bound holds trivially)."""
    if inst.mdp.horizon < 3 or np.ptp(np.asarray(inst.mdp.rewards)) == 0:
        return False
    Delta = policy_shift(inst.mdp, inst.policy, inst.data_policy).Delta
    D = simulator_shift(inst.mdp, inst.sim, inst.policy).D
    return bool(Delta.max() > MATERIAL_SHIFT and D.max() > MATERIAL_SHIFT)


def has_shift(inst: Instance) -> tuple[bool, bool]:
    """Whether ``Delta_t`` (policy vs data) and ``D_t`` (real vs simulator) are non-zero at some turn."""
    Delta = policy_shift(inst.mdp, inst.policy, inst.data_policy).Delta
    D = simulator_shift(inst.mdp, inst.sim, inst.policy).D
    return bool(Delta.max() > IDENTITY_TOL), bool(D.max() > IDENTITY_TOL)


@st.composite
def instances(draw, max_horizon: int = MAX_H, max_states: int = MAX_S, max_actions: int = MAX_A) -> Instance:
    """An :class:`Instance` with ``H, S, A >= 2``. Three draws in four aim at material instances
    (:func:`is_material`: ``H >= 3``, varying rewards, mixture weights of at least 0.05); the
    fourth mixes in the anchors listed in the module docstring (zero and constant rewards, weights
    0 and 1e-6, ``H = 2``)."""
    aim = draw(st.sampled_from(("material", "material", "material", "anchors")))
    material = aim == "material"
    H = draw(st.integers(3 if material and max_horizon >= 3 else 2, max_horizon))
    S = draw(st.integers(2, max_states))
    A = draw(st.integers(2, max_actions))
    weights = tuple(w for w in MIX_WEIGHTS if w >= 0.05) if material else MIX_WEIGHTS
    inst = build_instance(
        H, S, A, draw(st.integers(0, 2**32 - 1)),
        kind=draw(st.sampled_from(KERNEL_KINDS)),
        conc=draw(st.sampled_from(CONCENTRATIONS)),
        reward_mode=draw(st.sampled_from(("uniform", "signed") if material else ("uniform", "zero", "constant", "signed"))),
        policy_mode=draw(st.sampled_from(("mixed", "random", "deterministic"))),
        weight=draw(st.sampled_from(weights)),
        sim_weight=draw(st.sampled_from(weights)),
        sim_reward_noise=draw(st.sampled_from((0.0, 0.1, 1.0))),
    )
    Delta, D = has_shift(inst)
    event(f"H={H} S={S} A={A}")
    event(f"Delta non-zero: {Delta}")
    event(f"D non-zero: {D}")
    event(f"material: {is_material(inst)}")
    return inst
