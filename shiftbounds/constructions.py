"""Named MDP instances and random-instance generators (docs/theory.md §2 tightness, §6 test instances).

Every generator takes an explicit ``numpy.random.Generator`` (keyword ``rng``); nothing reads a
global random state, so one seed fans out reproducibly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from shiftbounds.tabular.mdp import TabularMDP, mixture_policy

KernelKind = Literal["dirichlet", "sparse", "deterministic"]
KERNEL_KINDS: tuple[str, ...] = ("dirichlet", "sparse", "deterministic")


@dataclass(frozen=True)
class Cliff:
    """The tightness family of Theorem 1 (docs/theory.md §2).

    State 0 = *good*, state 1 = *bad* (absorbing, reward 0). In *good* every action earns
    ``reward``; action 0 keeps the dialogue good, action 1 falls to *bad*. ``data_policy``
    always keeps; ``policy`` falls with probability ``eps``. Then ``eps_t = eps``,
    ``J_static = R H`` and ``J(pi) = R sum_t (1 - eps)^t``.
    """

    mdp: TabularMDP
    policy: np.ndarray
    data_policy: np.ndarray


def _check_prob(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1]; got {value!r}")


def _check_horizon(horizon: int) -> None:
    if int(horizon) != horizon or horizon < 1:
        raise ValueError(f"H must be a positive integer; got {horizon!r}")


def cliff(H: int, eps: float, reward: float = 1.0) -> Cliff:
    """The cliff of docs/theory.md §2 with horizon ``H`` and falling probability ``eps``."""
    _check_horizon(H)
    _check_prob("eps", eps)
    T = np.zeros((H, 2, 2, 2))
    T[:, 0, 0, 0] = 1.0  # keep
    T[:, 0, 1, 1] = 1.0  # fall
    T[:, 1, :, 1] = 1.0  # bad is absorbing
    r = np.zeros((H, 2, 2))
    r[:, 0, :] = reward
    mdp = TabularMDP(T, r, np.array([1.0, 0.0]))
    keep = np.zeros((H, 2, 2))
    keep[..., 0] = 1.0
    fall = np.zeros((H, 2, 2))
    fall[..., 1] = 1.0
    return Cliff(mdp=mdp, policy=mixture_policy(keep, fall, eps), data_policy=keep)


def simulator_cliff(H: int, delta: float, reward: float = 1.0) -> tuple[TabularMDP, TabularMDP, np.ndarray]:
    """Theorem 2's tightness family: ``(real_mdp, sim_mdp, policy)``.

    One action; in *good* the real user leaves (to the absorbing *bad*) with probability
    ``delta`` per turn, the simulator never does. So ``delta_t = delta``, ``J_sim = R H`` and
    ``J_real = R sum_t (1 - delta)^t``: the same closed form as :func:`cliff`.
    """
    _check_horizon(H)
    _check_prob("delta", delta)
    T_sim = np.zeros((H, 2, 1, 2))
    T_sim[:, 0, 0, 0] = 1.0
    T_sim[:, 1, 0, 1] = 1.0
    T_real = T_sim.copy()
    T_real[:, 0, 0, :] = [1.0 - delta, delta]
    r = np.zeros((H, 2, 1))
    r[:, 0, 0] = reward
    mu0 = np.array([1.0, 0.0])
    return TabularMDP(T_real, r, mu0), TabularMDP(T_sim, r, mu0), np.ones((H, 2, 1))


def random_distributions(
    shape: tuple[int, ...],
    n: int,
    *,
    rng: np.random.Generator,
    concentration: float = 1.0,
    kind: KernelKind = "dirichlet",
) -> np.ndarray:
    """Random probability vectors of length ``n``, array shape ``shape + (n,)``.

    ``kind``: ``"dirichlet"`` (symmetric Dirichlet with the given ``concentration``; 0.1 gives
    near-deterministic rows, 10 near-uniform ones), ``"sparse"`` (Dirichlet on a random support
    of about half the entries) or ``"deterministic"`` (one-hot rows).
    """
    if kind not in KERNEL_KINDS:
        raise ValueError(f"kind must be one of {KERNEL_KINDS}; got {kind!r}")
    if not concentration > 0:
        raise ValueError(f"concentration must be > 0; got {concentration!r}")
    if kind == "deterministic":
        idx = rng.integers(n, size=shape)
        return (idx[..., None] == np.arange(n)).astype(np.float64)
    p = rng.dirichlet(np.full(n, float(concentration)), size=shape)
    if kind == "sparse" and n > 1:
        mask = rng.random(shape + (n,)) < 0.5
        keep = np.argmax(p, axis=-1)  # never empty a row: keep its largest entry
        mask |= keep[..., None] == np.arange(n)
        p = np.where(mask, p, 0.0)
    p = p / p.sum(-1, keepdims=True)
    return p


def random_mdp(
    H: int,
    S: int,
    A: int,
    *,
    rng: np.random.Generator,
    concentration: float = 1.0,
    kind: KernelKind = "dirichlet",
    batch: tuple[int, ...] = (),
    reward_scale: float = 1.0,
) -> TabularMDP:
    """A batch of random MDPs: kernels from :func:`random_distributions`, rewards uniform on
    ``[0, reward_scale]``, a Dirichlet(1) initial law."""
    _check_horizon(H)
    T = random_distributions(batch + (H, S, A), S, rng=rng, concentration=concentration, kind=kind)
    r = reward_scale * rng.random(batch + (H, S, A))
    mu0 = random_distributions(batch, S, rng=rng)
    return TabularMDP(T, r, mu0)


def random_policy(
    H: int,
    S: int,
    A: int,
    *,
    rng: np.random.Generator,
    concentration: float = 1.0,
    kind: KernelKind = "dirichlet",
    batch: tuple[int, ...] = (),
) -> np.ndarray:
    """Random policies ``[*batch, H, S, A]`` (same kinds as :func:`random_distributions`)."""
    return random_distributions(batch + (H, S), A, rng=rng, concentration=concentration, kind=kind)


def perturbed_simulator(
    real: TabularMDP,
    weight: float,
    *,
    rng: np.random.Generator,
    concentration: float = 1.0,
    reward_noise: float = 0.0,
) -> TabularMDP:
    """A simulator ``(1 - weight) T_real + weight T_other`` with a random ``T_other`` and
    rewards ``r_real + reward_noise * U(-1, 1)``; same initial law as ``real``."""
    _check_prob("weight", weight)
    other = random_distributions(
        tuple(real.transitions.shape[:-1]), real.n_states, rng=rng, concentration=concentration
    )
    T = (1 - weight) * real.transitions + weight * other
    r = real.rewards + reward_noise * rng.uniform(-1, 1, size=real.rewards.shape)
    return TabularMDP(T, r, real.initial)


def absorbing_failure_mdp(
    H: int,
    S: int,
    A: int,
    *,
    rng: np.random.Generator,
    leave_probability: float = 1.0,
    concentration: float = 1.0,
    batch: tuple[int, ...] = (),
) -> tuple[TabularMDP, np.ndarray]:
    """A random dialogue MDP with an absorbing *user left* state (index ``S``, reward 0), and a
    data policy that never takes the last action, which makes the user leave with
    ``leave_probability``. Returns ``(mdp with S+1 states, data_policy)``.

    Random kernels mix fast, so a deviation on them is forgotten and gaps grow only linearly in
    ``H``; an absorbing failure never forgets, which is what makes compounding quadratic. This
    family is the random counterpart of :func:`cliff`.
    """
    _check_horizon(H)
    _check_prob("leave_probability", leave_probability)
    if A < 2:
        raise ValueError(f"absorbing_failure_mdp needs A >= 2 (one risky action); got A={A}")
    inner = random_distributions(batch + (H, S, A), S, rng=rng, concentration=concentration)
    T = np.zeros(batch + (H, S + 1, A, S + 1))
    T[..., :S, :, :S] = inner
    T[..., :S, A - 1, :S] *= 1 - leave_probability
    T[..., :S, A - 1, S] = leave_probability
    T[..., S, :, S] = 1.0
    r = np.zeros(batch + (H, S + 1, A))
    r[..., :S, :] = 0.5 + 0.5 * rng.random(batch + (H, S, A))
    mu0 = np.zeros(batch + (S + 1,))
    mu0[..., :S] = random_distributions(batch, S, rng=rng)
    data = random_distributions(batch + (H, S + 1), A - 1, rng=rng)
    data_policy = np.concatenate([data, np.zeros(batch + (H, S + 1, 1))], axis=-1)
    return TabularMDP(T, r, mu0), data_policy


def user_dropout(mdp: TabularMDP, delta: float | np.ndarray) -> TabularMDP:
    """The same dialogue with users who leave with probability ``delta`` at every turn.

    The last state of ``mdp`` must be absorbing (as in :func:`absorbing_failure_mdp`); every
    other ``(s, a)`` moves there with an extra probability ``delta``:
    ``T'(.|s,a) = (1 - delta) T(.|s,a) + delta * e_last``. With ``mdp`` as the simulator (users
    never drop out) and the result as the real user, ``delta_t = delta * (1 - d_t(last))``.
    ``delta`` is a scalar or an array of the batch shape (one rate per MDP).
    """
    d = np.asarray(delta, dtype=float)
    if np.any(d < 0) or np.any(d > 1):
        raise ValueError(f"delta must lie in [0, 1]; got {delta!r}")
    d = d[..., None, None, None]  # [..., 1(H), 1(S), 1(A)]
    T = np.array(mdp.transitions, dtype=float, copy=True)
    S = mdp.n_states
    if not np.allclose(T[..., S - 1, :, S - 1], 1.0):
        raise ValueError("user_dropout needs the last state to be absorbing (T[..., S-1, a, S-1] = 1)")
    T[..., : S - 1, :, :] *= (1 - d)[..., None]
    T[..., : S - 1, :, S - 1] += d
    return TabularMDP(T, mdp.rewards, mdp.initial)
