"""Finite-horizon tabular MDPs and policies, validated at the boundary (docs/theory.md §1).

Index order everywhere: ``transitions[..., t, s, a, s']`` is the law of the context after turn
``t`` given context ``s`` and action ``a``; ``rewards[..., t, s, a]``; ``initial[..., s]``;
policies ``policy[..., t, s, a]``. Leading ``...`` dimensions are a batch of independent MDPs
(broadcast like NumPy). Arrays may be NumPy arrays or torch tensors (see
:mod:`shiftbounds.tabular.backend`); nothing is copied between libraries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shiftbounds.tabular import backend as B
from shiftbounds.tabular.backend import Array

PROB_ATOL = 1e-8
"""Tolerance on ``|sum(p) - 1|`` accepted for a probability vector."""


def _first_index(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _where(name: str, idx: tuple[int, ...], row: bool = False) -> str:
    """``name[i, j, ...]`` (with a trailing ``:`` for a whole row)."""
    parts = [str(i) for i in idx] + ([":"] if row else [])
    return f"{name}[{', '.join(parts)}]"


def _as_array(name: str, x: Array) -> Array:
    if B.is_torch(x):
        if not x.is_floating_point():
            x = x.double()
        return x
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array or torch tensor, got {type(x).__name__}") from exc
    return arr


def check_finite(name: str, x: Array) -> None:
    """Raise ``ValueError`` naming the first non-finite entry of ``x``."""
    xn = B.to_numpy(x)
    bad = ~np.isfinite(xn)
    if bad.any():
        idx = _first_index(bad)
        raise ValueError(f"{name} must be finite; {_where(name, idx)} = {float(xn[idx])}")


def check_distribution(name: str, x: Array, atol: float = PROB_ATOL) -> None:
    """Raise ``ValueError`` unless every vector ``x[..., :]`` is a probability distribution.

    The message names the array, the first offending index and its value (a negative entry) or
    the sum that is not 1 (within ``atol``).
    """
    check_finite(name, x)
    xn = B.to_numpy(x)
    neg = xn < 0
    if neg.any():
        idx = _first_index(neg)
        raise ValueError(f"{name} must be non-negative; {_where(name, idx)} = {float(xn[idx])}")
    sums = xn.sum(axis=-1)
    off = np.abs(sums - 1.0) > atol
    if off.any():
        idx = _first_index(off)
        raise ValueError(
            f"{_where(name, idx, row=True)} must sum to 1 (within {atol:g}); it sums to {float(sums[idx])!r}"
        )


@dataclass(frozen=True)
class TabularMDP:
    """A finite-horizon MDP (or a batch of them) with validated arrays.

    Attributes:
        transitions: ``[..., H, S, A, S]``; ``transitions[..., t, s, a, :]`` is ``T_t(.|s, a)``.
        rewards: ``[..., H, S, A]``; ``r_t(s, a)``.
        initial: ``[..., S]``; ``mu0``.

    Raises:
        ValueError: on inconsistent shapes, non-finite values, negative probabilities or rows
            that do not sum to one; the message names the array, index and value.
    """

    transitions: Array
    rewards: Array
    initial: Array

    def __post_init__(self) -> None:
        T = _as_array("transitions", self.transitions)
        r = _as_array("rewards", self.rewards)
        mu = _as_array("initial", self.initial)
        object.__setattr__(self, "transitions", T)
        object.__setattr__(self, "rewards", r)
        object.__setattr__(self, "initial", mu)
        if T.ndim < 4 or T.shape[-1] != T.shape[-3]:
            raise ValueError(
                f"transitions must have shape [..., H, S, A, S]; got {tuple(T.shape)}"
            )
        H, S, A = T.shape[-4], T.shape[-3], T.shape[-2]
        if min(H, S, A) < 1:
            raise ValueError(f"transitions needs H, S, A >= 1; got H={H}, S={S}, A={A}")
        if r.ndim < 3 or tuple(r.shape[-3:]) != (H, S, A):
            raise ValueError(
                f"rewards must have shape [..., H, S, A] = [..., {H}, {S}, {A}] to match "
                f"transitions; got {tuple(r.shape)}"
            )
        if mu.ndim < 1 or mu.shape[-1] != S:
            raise ValueError(f"initial must have shape [..., S] = [..., {S}]; got {tuple(mu.shape)}")
        try:
            np.broadcast_shapes(tuple(T.shape[:-4]), tuple(r.shape[:-3]), tuple(mu.shape[:-1]))
        except ValueError as exc:
            raise ValueError(
                "batch dimensions do not broadcast: transitions "
                f"{tuple(T.shape[:-4])}, rewards {tuple(r.shape[:-3])}, initial {tuple(mu.shape[:-1])}"
            ) from exc
        check_distribution("transitions", T)
        check_finite("rewards", r)
        check_distribution("initial", mu)

    @classmethod
    def _unchecked(cls, transitions: Array, rewards: Array, initial: Array) -> TabularMDP:
        """Build without validation: only for slices of an already validated MDP."""
        obj = object.__new__(cls)
        object.__setattr__(obj, "transitions", transitions)
        object.__setattr__(obj, "rewards", rewards)
        object.__setattr__(obj, "initial", initial)
        return obj

    @property
    def horizon(self) -> int:
        """``H``, the number of turns."""
        return int(self.transitions.shape[-4])

    @property
    def n_states(self) -> int:
        """``S``."""
        return int(self.transitions.shape[-3])

    @property
    def n_actions(self) -> int:
        """``A``."""
        return int(self.transitions.shape[-2])

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Broadcast batch shape of the three arrays (``()`` for a single MDP)."""
        return tuple(
            np.broadcast_shapes(
                tuple(self.transitions.shape[:-4]),
                tuple(self.rewards.shape[:-3]),
                tuple(self.initial.shape[:-1]),
            )
        )

    def with_rewards(self, rewards: Array) -> TabularMDP:
        """The same dynamics with other rewards (e.g. a simulator's own judged reward)."""
        return TabularMDP(self.transitions, rewards, self.initial)


def check_policy(policy: Array, mdp: TabularMDP, name: str = "policy") -> Array:
    """Validate ``policy[..., t, s, a]`` against ``mdp`` and return it as an array.

    Raises:
        ValueError: shape ``[..., H, S, A]`` mismatch, or a row that is not a distribution.
    """
    pi = _as_array(name, policy)
    want = (mdp.horizon, mdp.n_states, mdp.n_actions)
    if pi.ndim < 3 or tuple(pi.shape[-3:]) != want:
        raise ValueError(f"{name} must have shape [..., H, S, A] = [..., {want[0]}, {want[1]}, {want[2]}]; got {tuple(pi.shape)}")
    check_distribution(name, pi)
    return pi


def uniform_policy(horizon: int, n_states: int, n_actions: int) -> np.ndarray:
    """``pi_t(a|s) = 1/A`` for all ``t, s, a``; shape ``[H, S, A]``."""
    return np.full((horizon, n_states, n_actions), 1.0 / n_actions)


def deterministic_policy(actions: Array, n_actions: int) -> Array:
    """One-hot policy from integer ``actions[..., t, s]``; shape ``[..., H, S, A]``."""
    if B.is_torch(actions):
        return B.torch.nn.functional.one_hot(actions.long(), n_actions).double()
    actions = np.asarray(actions)
    if actions.size and (actions.min() < 0 or actions.max() >= n_actions):
        raise ValueError(f"actions must lie in [0, {n_actions}); got range [{actions.min()}, {actions.max()}]")
    return (actions[..., None] == np.arange(n_actions)).astype(np.float64)


def softmax_policy(logits: Array, temperature: float = 1.0) -> Array:
    """``pi_t(a|s) = softmax(logits[..., t, s, :] / temperature)``; ``temperature > 0``."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature!r}")
    z = logits / temperature
    z = z - B.amax(z, -1)[..., None]
    e = z.exp() if B.is_torch(z) else np.exp(z)
    return e / e.sum(-1)[..., None]


def mixture_policy(policy: Array, other: Array, weight: float | Array) -> Array:
    """``(1 - weight) * policy + weight * other``, e.g. a noisy expert ``(1-eta) pi* + eta nu``.

    ``weight`` is a scalar in ``[0, 1]`` or an array broadcastable to ``[..., H, S, 1]``.
    """
    w = B.to_numpy(weight) if not np.isscalar(weight) else np.asarray(weight)
    if np.any(w < 0) or np.any(w > 1):
        raise ValueError(f"weight must lie in [0, 1]; got {weight!r}")
    return (1 - weight) * policy + weight * other


def greedy_policy(q: Array, rtol: float = 1e-12) -> Array:
    """Deterministic policy choosing, at each ``(t, s)``, the lowest-index action whose value is
    within ``rtol * max(1, |max q|)`` of the maximum: ties (up to rounding) are broken towards
    the first action, so equal MDPs give equal policies whatever the float noise."""
    top = B.amax(q, -1)[..., None]
    near = q >= top - rtol * (1.0 + abs(top))
    idx = B.argmax(near.to(q.dtype) if B.is_torch(near) else near.astype(np.int8), -1)
    return B.one_hot(idx, q.shape[-1], q)


def reward_span(mdp: TabularMDP) -> Array:
    """``R = max r - min r`` over ``(t, s, a)`` for each MDP of the batch (docs/theory.md §1)."""
    return B.amax(mdp.rewards, (-3, -2, -1)) - B.amin(mdp.rewards, (-3, -2, -1))
