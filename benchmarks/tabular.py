"""Exact engine throughput against a per-MDP Python loop, pymdptoolbox, and memory bandwidth.

``python -m benchmarks.tabular [--batch 256 --H 32 --S 64 --A 8]``

All timings are taken in one run on the same machine and reported as ratios (shared machines
make absolute seconds meaningless). What is compared:

* policy evaluation (occupancy + Q/V backward induction) of a batch of random MDPs with
  :mod:`shiftbounds.tabular` against a straightforward per-MDP loop over turns, states and
  actions written below (run on ``--loop-mdps`` MDPs and scaled per MDP);
* dynamic programming (``optimal_values``) against ``mdptoolbox.mdp.FiniteHorizon`` per solved
  MDP (stationary kernels, since pymdptoolbox supports only those; ours get them broadcast over
  turns, without copies);
* effective bandwidth of evaluation (bytes of ``transitions`` read per pass / time) against the
  machine's streaming read bandwidth (``sum`` over an array as large, measured in the same run).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

import numpy as np

from shiftbounds.constructions import random_policy
from shiftbounds.tabular import TabularMDP, occupancy, optimal_values, q_values


def best_time(fn, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls (seconds)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=256, help="number of MDPs evaluated at once")
    p.add_argument("--H", type=int, default=32, help="horizon")
    p.add_argument("--S", type=int, default=64, help="states")
    p.add_argument("--A", type=int, default=8, help="actions")
    p.add_argument("--loop-mdps", type=int, default=4, help="MDPs run through the Python loop (scaled per MDP)")
    p.add_argument("--toolbox-mdps", type=int, default=32, help="MDPs solved by pymdptoolbox (scaled per MDP)")
    p.add_argument("--repeats", type=int, default=3, help="timing repeats (best is kept)")
    p.add_argument("--seed", type=int, default=0, help="seed")
    a = p.parse_args(argv)
    B_, H, S, A = a.batch, a.H, a.S, a.A
    rng = np.random.default_rng(a.seed)
    print(f"building {B_} random MDPs H={H} S={S} A={A} ({B_ * H * S * A * S * 8 / 1e9:.2f} GB of transitions) ...")
    T = random_batch(rng, (B_, H, S, A), S)
    r = rng.random((B_, H, S, A))
    mu = random_batch(rng, (B_,), S)
    pi = random_policy(H, S, A, rng=rng, batch=(B_,))
    mdp = TabularMDP(T, r, mu)
    rows = []

    # --- streaming read bandwidth of this machine, same run
    t_read = best_time(lambda: T.sum(), a.repeats)
    read_bw = T.nbytes / t_read

    # --- evaluation: ours (batched) vs naive loop (per MDP)
    t_occ = best_time(lambda: occupancy(mdp, pi), a.repeats)
    t_q = best_time(lambda: q_values(mdp, pi), a.repeats)
    t_ours = (t_occ + t_q) / B_
    n_loop = min(a.loop_mdps, B_)
    t_loop = best_time(lambda: [loop_evaluate(T[i], r[i], mu[i], pi[i]) for i in range(n_loop)], 1) / n_loop
    d_ref, V_ref = loop_evaluate(T[0], r[0], mu[0], pi[0])
    assert np.allclose(occupancy(mdp, pi)[0], d_ref) and np.allclose(q_values(mdp, pi)[0].__mul__(pi[0]).sum(-1), V_ref[:-1])
    eff_bw = 2 * T.nbytes / (t_occ + t_q)  # each recursion reads every transition once
    import torch

    tm = TabularMDP(*(torch.from_numpy(x) for x in (T, r, mu)))  # zero-copy views
    tp = torch.from_numpy(pi)
    t_torch = best_time(lambda: occupancy(tm, tp), a.repeats) + best_time(lambda: q_values(tm, tp), a.repeats)
    eff_bw_torch = 2 * T.nbytes / t_torch
    rows.append(("evaluation per MDP", t_ours, t_loop, "python loop"))
    rows.append(("evaluation (torch CPU)", t_torch / B_, t_loop, "python loop"))

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
                fh = mdpt.FiniteHorizon(np.ascontiguousarray(Ts[i, 0].transpose(1, 0, 2)), rs[i, 0], 1.0, H)
                with contextlib.redirect_stdout(io.StringIO()):  # it warns that discount 1 may not converge
                    fh.run()
            return fh
        t_tb = best_time(toolbox, a.repeats) / n_tb
        fh = toolbox()
        assert np.allclose(fh.V[:, 0], optimal_values(stat)[1][n_tb - 1, 0]), "pymdptoolbox disagrees with the engine"
        rows.append(("DP per MDP", t_dp, t_tb, "pymdptoolbox FiniteHorizon"))
    except ImportError:
        print("pymdptoolbox not installed (pip install -e .[bench]); skipping that comparison")

    print(f"\n{'task':22s} {'ours (ms)':>10s} {'reference (ms)':>15s} {'speed-up':>9s}  reference")
    for name, ours, ref, what in rows:
        print(f"{name:22s} {ours * 1e3:10.3f} {ref * 1e3:15.3f} {ref / ours:8.1f}x  {what}")
    print(f"\nstreaming read bandwidth (T.sum): {read_bw / 1e9:.2f} GB/s")
    print(f"evaluation effective bandwidth:   {eff_bw / 1e9:.2f} GB/s = {eff_bw / read_bw:.0%} of streaming read (NumPy)")
    print(f"                                  {eff_bw_torch / 1e9:.2f} GB/s = {eff_bw_torch / read_bw:.0%} (torch CPU)")


if __name__ == "__main__":
    main()
