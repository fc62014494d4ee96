"""Exact engine throughput against a per-MDP Python loop, pymdptoolbox, and memory bandwidth.

``python -m benchmarks.tabular [--preset smoke|default] [--batch 256 --H 32 --S 64 --A 8]``

All timings are taken in one run on the same machine and reported as ratios (shared machines
make absolute seconds meaningless). What is compared:

* policy evaluation (occupancy + Q/V backward induction) of a batch of random MDPs with
  :mod:`shiftbounds.tabular` against a straightforward per-MDP loop over turns, states and
  actions written below (run on ``--loop-mdps`` MDPs and scaled per MDP);
* dynamic programming (``optimal_values``) against ``mdptoolbox.mdp.FiniteHorizon`` per solved
  MDP (stationary kernels, since pymdptoolbox supports only those; ours get them broadcast over
  turns, without copies);
* effective bandwidth of evaluation (bytes of ``transitions`` read per pass / time) against the
  machine's streaming read bandwidth (``sum`` over the same array, the best of
  ``--bandwidth-repeats`` passes, measured in the same run before and after the evaluations so
  that a machine whose speed drifts during the run shows it).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from benchmarks import best_time, write_report
from shiftbounds.constructions import random_policy
from shiftbounds.tabular import TabularMDP, occupancy, optimal_values, q_values
from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.seeding import numpy_rng


@dataclass(frozen=True)
class TabularBenchConfig:
    """Options of ``benchmarks.tabular``."""

    batch: int = field(default=256, metadata={"help": "number of MDPs evaluated at once"})
    H: int = field(default=32, metadata={"help": "horizon"})
    S: int = field(default=64, metadata={"help": "states"})
    A: int = field(default=8, metadata={"help": "actions"})
    loop_mdps: int = field(default=4, metadata={"help": "MDPs run through the Python loop (scaled per MDP)"})
    toolbox_mdps: int = field(default=32, metadata={"help": "MDPs solved by pymdptoolbox (scaled per MDP)"})
    repeats: int = field(default=3, metadata={"help": "timing repeats (best is kept)"})
    bandwidth_repeats: int = field(default=7, metadata={"help": "streaming-read repeats (best is kept)"})
    seed: int = field(default=0, metadata={"help": "seed of the random MDPs"})
    out_dir: str = field(default="results/benchmarks/tabular/default", metadata={"help": "results folder"})

    def __post_init__(self) -> None:
        if min(self.batch, self.H, self.S, self.A, self.loop_mdps, self.toolbox_mdps, self.repeats, self.bandwidth_repeats) < 1:
            raise ValueError(f"every size and repeat count must be >= 1; got {self}")


PRESETS = {
    "default": {},
    "smoke": {"batch": 8, "H": 4, "S": 8, "A": 3, "loop_mdps": 2, "toolbox_mdps": 2, "repeats": 1,
              "bandwidth_repeats": 2},
}


def loop_evaluate(T: np.ndarray, r: np.ndarray, mu: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The naive reference: occupancy and V of one MDP with explicit loops over t, s, a."""
    H, S, A, _ = T.shape
    d = np.zeros((H, S))
    d[0] = mu
    for t in range(H - 1):
        for s in range(S):
            for a in range(A):
                d[t + 1] += d[t, s] * pi[t, s, a] * T[t, s, a]
    V = np.zeros((H + 1, S))
    for t in reversed(range(H)):
        for s in range(S):
            for a in range(A):
                V[t, s] += pi[t, s, a] * (r[t, s, a] + T[t, s, a] @ V[t + 1])
    return d, V


def random_batch(rng: np.random.Generator, shape: tuple[int, ...], S: int) -> np.ndarray:
    """Random stochastic rows (uniform then normalised: fast for large benchmarks)."""
    x = rng.random(shape + (S,))
    x /= x.sum(-1, keepdims=True)
    return x


def main(argv: list[str] | None = None) -> dict:
    a = parse_config(TabularBenchConfig, __doc__, PRESETS, argv, name="benchmarks.tabular")
    B_, H, S, A = a.batch, a.H, a.S, a.A
    rng = numpy_rng(a.seed, "mdps")
    print(f"building {B_} random MDPs H={H} S={S} A={A} ({B_ * H * S * A * S * 8 / 1e9:.2f} GB of transitions) ...")
    T = random_batch(rng, (B_, H, S, A), S)
    r = rng.random((B_, H, S, A))
    mu = random_batch(rng, (B_,), S)
    pi = random_policy(H, S, A, rng=rng, batch=(B_,))
    mdp = TabularMDP(T, r, mu)
    rows = []

    # --- streaming read bandwidth of this machine, same run (before the evaluations)
    read_before = T.nbytes / best_time(lambda: T.sum(), a.bandwidth_repeats)

    # --- evaluation: ours (batched) vs naive loop (per MDP)
    t_occ = best_time(lambda: occupancy(mdp, pi), a.repeats)
    t_q = best_time(lambda: q_values(mdp, pi), a.repeats)
    t_ours = (t_occ + t_q) / B_
    n_loop = min(a.loop_mdps, B_)
    t_loop = best_time(lambda: [loop_evaluate(T[i], r[i], mu[i], pi[i]) for i in range(n_loop)], 1) / n_loop
    d_ref, V_ref = loop_evaluate(T[0], r[0], mu[0], pi[0])
    assert np.allclose(occupancy(mdp, pi)[0], d_ref) and np.allclose((q_values(mdp, pi)[0] * pi[0]).sum(-1), V_ref[:-1])
    eff_bw = 2 * T.nbytes / (t_occ + t_q)  # each recursion reads every transition once
    tm = TabularMDP(*(torch.from_numpy(x) for x in (T, r, mu)))  # zero-copy views
    tp = torch.from_numpy(pi)
    t_torch = best_time(lambda: occupancy(tm, tp), a.repeats) + best_time(lambda: q_values(tm, tp), a.repeats)
    eff_bw_torch = 2 * T.nbytes / t_torch
    rows.append({"task": "evaluation per MDP (NumPy)", "ours_ms": t_ours * 1e3, "reference_ms": t_loop * 1e3,
                 "speed_up": t_loop / t_ours, "reference": "python loop"})
    rows.append({"task": "evaluation per MDP (torch CPU)", "ours_ms": t_torch / B_ * 1e3, "reference_ms": t_loop * 1e3,
                 "speed_up": t_loop / (t_torch / B_), "reference": "python loop"})

    # --- DP: ours vs pymdptoolbox, stationary kernels
    Ts = random_batch(rng, (B_, 1, S, A), S)
    rs = rng.random((B_, 1, S, A))
    stat = TabularMDP(np.broadcast_to(Ts, (B_, H, S, A, S)), np.broadcast_to(rs, (B_, H, S, A)), mu)
    t_dp = best_time(lambda: optimal_values(stat), a.repeats) / B_
    try:
        import mdptoolbox.mdp as mdpt

        n_tb = min(a.toolbox_mdps, B_)

        def toolbox():
            for i in range(n_tb):
                # it warns (print and warnings) that a discount of 1 may not converge: true, and
                # irrelevant to a finite horizon
                with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fh = mdpt.FiniteHorizon(np.ascontiguousarray(Ts[i, 0].transpose(1, 0, 2)), rs[i, 0], 1.0, H)
                    fh.run()
            return fh
        t_tb = best_time(toolbox, a.repeats) / n_tb
        fh = toolbox()
        assert np.allclose(fh.V[:, 0], optimal_values(stat)[1][n_tb - 1, 0]), "pymdptoolbox disagrees with the engine"
        rows.append({"task": "DP per MDP", "ours_ms": t_dp * 1e3, "reference_ms": t_tb * 1e3, "speed_up": t_tb / t_dp,
                     "reference": "pymdptoolbox FiniteHorizon"})
    except ImportError:
        print("pymdptoolbox not installed (pip install -e .[bench]); skipping that comparison")

    read_after = T.nbytes / best_time(lambda: T.sum(), a.bandwidth_repeats)
    read_bw = max(read_before, read_after)
    notes = (f"Streaming read bandwidth (best of {a.bandwidth_repeats} passes of `T.sum()` over {T.nbytes / 1e9:.2f} GB): "
             f"{read_before / 1e9:.2f} GB/s before the evaluations, {read_after / 1e9:.2f} GB/s after. Evaluation "
             f"effective bandwidth: {eff_bw / 1e9:.2f} GB/s = {eff_bw / read_bw:.0%} of the faster read (NumPy), "
             f"{eff_bw_torch / 1e9:.2f} GB/s = {eff_bw_torch / read_bw:.0%} (torch CPU).")
    return write_report(a.out_dir, asdict(a), f"benchmarks.tabular: batch {B_}, H={H}, S={S}, A={A}", rows, notes)


if __name__ == "__main__":
    main()
