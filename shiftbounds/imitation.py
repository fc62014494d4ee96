"""Noisy experts, the combination lock, and imitation learners on tabular MDPs (docs/theory.md §5).

The learner competes with a clean expert ``pi*`` but only sees the noisy expert
``pi*_eta = (1 - eta) pi* + eta nu``: offline as ``n`` trajectories of ``pi*_eta`` (LogLossBC),
online as one sampled label of ``pi*_eta`` at every context its own rollout visits. Learners:

=============  ==========================================  =====================================
learner        rollouts that choose the queried contexts   fit
=============  ==========================================  =====================================
``bc``         none: ``n`` trajectories of ``pi*_eta``      maximum likelihood (LogLossBC)
``dagger``     ``beta_i pi*_eta + (1-beta_i)`` greedy       maximum likelihood on aggregated data
``opd``        the student sampled at temperature 1        maximum likelihood on its labels
``nail``       the student as deployed: greedy             maximum likelihood on its labels
=============  ==========================================  =====================================

The student is tabular (one categorical distribution per turn and context). Over that
unrestricted class the forward KL, the reverse KL and any mixture to the (smoothed) empirical
label distribution have the *same* minimiser, the label distribution itself, so the tabular study
has one OPD and one NAIL learner, not one per divergence (``tests/test_losses.py`` checks that
common minimiser by gradient descent on the pure losses); the divergences differ under function
approximation (``experiments.modadd``). What separates the
learners on tabular MDPs is where the queried contexts come from, and whether the student fitted
is the plain distribution or the *noised student* ``(1 - eta) pi_hat + eta nu`` (the known-noise form
of the paper's Theorem 2), which removes the noise from the student's own sampled rollouts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from shiftbounds.constructions import random_mdp
from shiftbounds.tabular import TabularMDP, expected_return, greedy_policy, mixture_policy, optimal_policy

LEARNERS = ("bc", "dagger", "opd", "nail")


def noisy_expert(expert: np.ndarray, eta: float, noise: np.ndarray | None = None) -> np.ndarray:
    """``pi*_eta = (1 - eta) pi* + eta nu``; ``nu`` uniform over actions unless given. Shape ``[..., H, S, A]``."""
    if noise is None:
        noise = np.full_like(expert, 1.0 / expert.shape[-1])
    return mixture_policy(expert, noise, eta)


@dataclass(frozen=True)
class CombinationLock:
    """The canonical hard instance (docs/theory.md §5).

    States ``0..H-1`` are the lock's levels (level ``t`` is visited at turn ``t``), state ``H`` is
    the absorbing failure. At level ``t`` action ``secret[t]`` advances, any other fails; the last
    correct action earns reward 1. ``expert`` is the clean expert ``pi*`` (``secret`` at each level).
    """

    mdp: TabularMDP
    expert: np.ndarray
    secret: np.ndarray

    @property
    def horizon(self) -> int:
        return self.mdp.horizon


def combination_lock(H: int, A: int, *, rng: np.random.Generator) -> CombinationLock:
    """A lock with ``H`` levels, ``A`` actions and a uniformly random secret action per level."""
    if H < 1 or A < 2:
        raise ValueError(f"a lock needs H >= 1 and A >= 2; got H={H}, A={A}")
    secret = rng.integers(A, size=H)
    S = H + 1
    T = np.zeros((H, S, A, S))
    T[:, :, :, H] = 1.0  # default: fail (and the failure state is absorbing)
    r = np.zeros((H, S, A))
    for t in range(H):
        if t + 1 < H:
            T[t, t, secret[t], H] = 0.0
            T[t, t, secret[t], t + 1] = 1.0
        else:
            r[t, t, secret[t]] = 1.0
    mu0 = np.zeros(S)
    mu0[0] = 1.0
    expert = np.zeros((H, S, A))
    expert[:, :, 0] = 1.0
    expert[np.arange(H), np.arange(H), :] = 0.0
    expert[np.arange(H), np.arange(H), secret] = 1.0
    return CombinationLock(TabularMDP(T, r, mu0), expert, secret)


def lock_continue_probability(eta: float, A: int) -> float:
    """``q = 1 - eta + eta / A``: the noisy expert's chance to take the correct action at a level."""
    return 1.0 - eta + eta / A


def lock_reach_probabilities(H: int, A: int, eta: float) -> np.ndarray:
    """``P(a noisy-expert trajectory reaches level t) = q^t`` for ``t = 0..H-1``."""
    return lock_continue_probability(eta, A) ** np.arange(H)


# ----------------------------------------------------------------------------- fitting
def fit_plain(counts: np.ndarray, smoothing: float = 0.1) -> np.ndarray:
    """The student ``(N + smoothing) / (sum_a N + A smoothing)`` per context: the common minimiser of
    forward, reverse and mixed KL to the smoothed label distribution (uniform where no labels)."""
    A = counts.shape[-1]
    return (counts + smoothing) / (counts.sum(-1, keepdims=True) + A * smoothing)


def fit_noised(counts: np.ndarray, eta: float, smoothing: float = 0.1) -> np.ndarray:
    """The noised-student fit: ``q`` such that ``(1 - eta) q + eta / A`` is the maximum-likelihood
    mixture for the labels (known noise ``eta``, uniform ``nu``).

    KKT conditions give water-filling: ``q_a = max(p_a / mu - c, 0)`` with ``c = eta / (A (1 - eta))``
    and ``mu`` chosen so that ``q`` sums to 1, where ``p`` is the smoothed label distribution.
    The noise is thereby removed from the student: with ``eta = 0`` this is :func:`fit_plain`.
    """
    if not 0 <= eta < 1:
        raise ValueError(f"eta must lie in [0, 1); got {eta!r}")
    p = fit_plain(counts, smoothing)
    if eta == 0:
        return p
    A = p.shape[-1]
    c = eta / (A * (1 - eta))
    # water-filling over the sorted entries: with k entries active, 1/mu = (1 + k c) / (sum of top k)
    ps = -np.sort(-p, axis=-1)
    top = np.cumsum(ps, axis=-1)
    k = np.arange(1, A + 1)
    inv_mu = (1 + k * c) / top
    active = ps * inv_mu - c > 0
    k_star = active.sum(-1, keepdims=True)  # number of active entries (>= 1: the largest always is)
    inv = np.take_along_axis(inv_mu, k_star - 1, axis=-1)
    q = np.maximum(p * inv - c, 0.0)
    return q / q.sum(-1, keepdims=True)


# ----------------------------------------------------------------------------- DAgger schedules
@dataclass(frozen=True)
class LinearBetaSchedule:
    """``beta_i = max(0, 1 - i / rampdown_rounds)``: the expert's share of the rollouts in round ``i``."""

    rampdown_rounds: int = 10

    def __post_init__(self) -> None:
        if self.rampdown_rounds < 1:
            raise ValueError(f"rampdown_rounds must be >= 1; got {self.rampdown_rounds}")

    def __call__(self, round_index: int) -> float:
        if round_index < 0:
            raise ValueError(f"round_index must be >= 0; got {round_index}")
        return max(0.0, 1.0 - round_index / self.rampdown_rounds)


@dataclass(frozen=True)
class ConstantBetaSchedule:
    """``beta_i = beta`` for every round."""

    beta: float = 0.5

    def __post_init__(self) -> None:
        if not 0 <= self.beta <= 1:
            raise ValueError(f"beta must lie in [0, 1]; got {self.beta}")

    def __call__(self, round_index: int) -> float:
        return self.beta


# ----------------------------------------------------------------------------- rollouts
def draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: per row of the cumulative probabilities ``cdf [..., K]`` the first index
    whose cumulative mass exceeds ``u [...] * total`` (never an index of zero mass)."""
    k = (cdf <= (u * cdf[..., -1])[..., None]).sum(-1)
    return np.minimum(k, cdf.shape[-1] - 1)


@dataclass(frozen=True)
class Sampler:
    """The cumulative distributions of one MDP, computed once for many :meth:`rollout` calls."""

    initial_cdf: np.ndarray
    transition_cdf: np.ndarray

    @classmethod
    def of(cls, mdp: TabularMDP) -> Sampler:
        return cls(np.cumsum(mdp.initial), np.cumsum(mdp.transitions, axis=-1))

    def rollout(self, policy: np.ndarray, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One trajectory of ``policy [H, S, A]``: visited contexts and actions, ``[H]`` each, driven
        by ``2 H`` uniforms (per turn one for the action, one for the next context)."""
        H, A = policy.shape[0], policy.shape[-1]
        S = self.initial_cdf.shape[0]
        u = rng.random((H, 2))
        policy_cdf = np.cumsum(policy, axis=-1)
        states = np.empty(H, dtype=np.int64)
        actions = np.empty(H, dtype=np.int64)
        s = _first_above(self.initial_cdf, u[0, 1], S)
        for t in range(H):
            a = _first_above(policy_cdf[t, s], u[t, 0], A)
            states[t], actions[t] = s, a
            if t + 1 < H:
                s = _first_above(self.transition_cdf[t, s, a], u[t + 1, 1], S)
        return states, actions


def _first_above(cdf: np.ndarray, u: float, k: int) -> int:
    return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), k - 1)


def rollout(mdp: TabularMDP, policy: np.ndarray, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One trajectory of ``policy [H, S, A]`` (see :meth:`Sampler.rollout`)."""
    return Sampler.of(mdp).rollout(policy, rng=rng)


def query(policy: np.ndarray, states: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
    """One action of ``policy [H, S, A]`` at each visited context ``states [H]`` (the expert's labels)."""
    H = len(states)
    return draw(np.cumsum(policy[np.arange(H), states], axis=-1), rng.random(H))


@dataclass(frozen=True)
class LearnerConfig:
    """Options of a tabular noisy-expert learner.

    Attributes:
        learner: one of :data:`LEARNERS`.
        noised_student: fit ``(1 - eta) pi_hat + eta nu`` to the labels instead of ``pi_hat``.
        smoothing: add-``smoothing`` label counts (uniform where nothing was queried).
        beta_schedule: DAgger's expert share per round.
    """

    learner: str = "nail"
    noised_student: bool = False
    smoothing: float = 0.1
    beta_schedule: Callable[[int], float] = LinearBetaSchedule(10)

    def __post_init__(self) -> None:
        if self.learner not in LEARNERS:
            raise ValueError(f"learner must be one of {LEARNERS}; got {self.learner!r}")
        if self.smoothing <= 0:
            raise ValueError(f"smoothing must be > 0; got {self.smoothing}")


@dataclass(frozen=True)
class SampleComplexity:
    """Budget a learner needed to reach the target suboptimality.

    Attributes:
        episodes: trajectories (BC) or episodes (online) used; ``inf`` if the budget ran out.
        queries: expert actions consumed (``H`` per trajectory or episode).
        suboptimality: ``J(pi*) - J(student)`` at the end.
    """

    episodes: float
    queries: float
    suboptimality: float


def _student(cfg: LearnerConfig, counts: np.ndarray, eta: float) -> np.ndarray:
    return fit_noised(counts, eta, cfg.smoothing) if cfg.noised_student else fit_plain(counts, cfg.smoothing)


def sample_complexity(mdp: TabularMDP, expert: np.ndarray, eta: float, cfg: LearnerConfig, *,
                      target: float, budget: int, rng: np.random.Generator) -> SampleComplexity:
    """Run ``cfg.learner`` until the greedy student is within ``target`` of ``J(pi*)`` or the
    budget of episodes is spent. Every learner is checked after every episode (BC on nested data:
    one stream of noisy-expert trajectories), so no method's count is rounded up; the return is
    recomputed only when the greedy student changes."""
    H, S, A = mdp.horizon, mdp.n_states, mdp.n_actions
    J_star = float(expected_return(mdp, expert))
    noisy = noisy_expert(expert, eta)
    counts = np.zeros((H, S, A))
    t_idx = np.arange(H)

    sampler = Sampler.of(mdp)
    student = _student(cfg, counts, eta)
    greedy = greedy_policy(student)
    last_greedy, gap = None, J_star
    for episode in range(1, budget + 1):
        if cfg.learner == "bc":
            s, labels = sampler.rollout(noisy, rng=rng)
        else:  # the student and its greedy policy are those of the counts so far
            if cfg.learner == "nail":
                behaviour = greedy
            elif cfg.learner == "opd":
                behaviour = student
            else:
                behaviour = mixture_policy(greedy, noisy, cfg.beta_schedule(episode - 1))
            s, _ = sampler.rollout(behaviour, rng=rng)
            labels = query(noisy, s, rng=rng)
        counts[t_idx, s, labels] += 1
        student = _student(cfg, counts, eta)
        greedy = greedy_policy(student)
        if last_greedy is None or not np.array_equal(greedy, last_greedy):  # evaluate only on change
            gap = J_star - float(expected_return(mdp, greedy))
            last_greedy = greedy
        if gap <= target:
            return SampleComplexity(episode, episode * H, gap)
    return SampleComplexity(float("inf"), float("inf"), gap)


def random_expert_instance(H: int, S: int, A: int, *, rng: np.random.Generator) -> tuple[TabularMDP, np.ndarray]:
    """A random MDP (Dirichlet(1) kernels, uniform rewards) and its deterministic optimal policy as ``pi*``."""
    mdp = random_mdp(H, S, A, rng=rng)
    return mdp, optimal_policy(mdp)
