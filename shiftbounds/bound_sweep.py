"""The bound check's instance families (``experiments.bound_check``): exact return gaps beside the
right-hand sides of Theorems 1-2 at one horizon, and the cliff's gap-to-bound ratio.

* ``cliff`` / ``sim-cliff`` (docs/theory.md §2 tightness): the gap is the bound to first order;
* ``absorbing`` / ``absorbing-sim``: random dialogue MDPs where a deviation (a risky action, a user
  who drops out) leads to an absorbing failure: quadratic, like the cliff;
* ``mixing`` / ``mixing-sim``: plain random kernels forget deviations, so the gap grows
  sub-quadratically (it can even cancel across turns) and the quadratic bound is loose there.
"""

from __future__ import annotations

import numpy as np

from shiftbounds import constructions as C
from shiftbounds.shift import policy_shift, simulator_shift
from shiftbounds.tabular import mixture_policy

FAMILIES = ("cliff", "sim-cliff", "absorbing", "absorbing-sim", "mixing", "mixing-sim")
QUADRATIC_FAMILIES = ("cliff", "sim-cliff", "absorbing", "absorbing-sim")


def gaps_and_bounds(family: str, H: int, eps: float, n: int, S: int, A: int, *,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Absolute return gaps and their bounds (Theorem 1 or 2 right-hand sides) of ``n`` instances of
    ``family`` at horizon ``H``, each with per-turn error ``eps`` times a draw from U(0.5, 1.5); ``S``
    and ``A`` size the random families."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")
    scale = rng.uniform(0.5, 1.5, size=n)  # per-instance error around eps
    if family in ("cliff", "sim-cliff"):
        gaps, bounds = np.empty(n), np.empty(n)
        for i in range(n):
            if family == "cliff":
                c = C.cliff(H, eps * scale[i])
                r = policy_shift(c.mdp, c.policy, c.data_policy)
                gaps[i], bounds[i] = abs(r.return_gap), r.theorem1_rhs
            else:
                real, sim, pi = C.simulator_cliff(H, eps * scale[i])
                r = simulator_shift(real, sim, pi)
                gaps[i], bounds[i] = abs(r.return_gap), r.theorem2_rhs
        return gaps, bounds
    w = (eps * scale)[:, None, None, None]
    if family == "absorbing":
        mdp, data = C.absorbing_failure_mdp(H, S, A, rng=rng, batch=(n,))
        risky = np.zeros_like(data)
        risky[..., -1] = 1.0
        r = policy_shift(mdp, mixture_policy(data, risky, w), data)
        return np.abs(r.return_gap), r.theorem1_rhs
    if family == "absorbing-sim":
        sim, data = C.absorbing_failure_mdp(H, S, A, rng=rng, batch=(n,))
        r = simulator_shift(C.user_dropout(sim, eps * scale), sim, data)
        return np.abs(r.return_gap), r.theorem2_rhs
    mdp = C.random_mdp(H, S, A, rng=rng, batch=(n,))
    data = C.random_policy(H, S, A, rng=rng, batch=(n,))
    if family == "mixing":
        other = C.random_policy(H, S, A, rng=rng, batch=(n,), kind="deterministic")
        r = policy_shift(mdp, mixture_policy(data, other, w), data)
        return np.abs(r.return_gap), r.theorem1_rhs
    # mixing-sim: the simulator errs by about eps per turn on every (s, a)
    other = C.random_distributions((n, H, S, A), S, rng=rng, kind="deterministic")
    T = (1 - w[..., None]) * mdp.transitions + w[..., None] * other
    r = simulator_shift(mdp, type(mdp)(T, mdp.rewards, mdp.initial), data)
    return np.abs(r.return_gap), r.theorem2_rhs


def cliff_ratios(eps_H: tuple[float, ...], H: int) -> list[dict]:
    """Gap / Theorem-1 bound on the cliff at horizon ``H`` for each ``eps * H``."""
    rows = []
    for eh in eps_H:
        c = C.cliff(H, eh / H)
        r = policy_shift(c.mdp, c.policy, c.data_policy)
        rows.append({"eps_H": eh, "H": H, "gap": abs(float(r.return_gap)), "bound": float(r.theorem1_rhs),
                     "ratio": abs(float(r.return_gap)) / float(r.theorem1_rhs)})
    return rows
