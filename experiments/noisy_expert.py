"""Offline behaviour cloning versus on-policy distillation with a noisy expert: the crossover
horizon ``H*(eta)`` (docs/theory.md §5).

``python -m experiments.noisy_expert [--preset smoke|default|random] [options]``

For the combination lock (and, with ``--families lock,random``, random tabular MDPs), over a grid
of horizons ``H`` and noise levels ``eta``, it measures per seed the number of trajectories (BC)
or episodes (online learners) needed until the greedy student is within ``--target`` of the clean
expert, and reports the median with a bootstrap CI over seeds and the share of seeds that finished
within ``--budget``. Once a method's median is over the budget at some ``H``, its larger horizons
are not run and count as over the budget (sample complexity grows with ``H`` on these families);
the tables mark them ``run = False``.

The theory says BC's count grows like ``q^{-H}`` (``q = 1 - eta + eta/A`` on the lock) and NAIL's
polynomially, so BC is dearer than NAIL from a crossover horizon ``H*(eta)`` on
(``shiftbounds.crossover``). Fixed before the run, in the config: the horizons ``<= --fit-max-h``
are fitted (BC's exponential rate, NAIL's power law; and BC at the theory's rate ``-log q``) to
predict ``H*``; the whole grid measures it. A crossover beyond the grid is reported as censored
(``H* > max H``), never forced.

Methods: ``bc``, ``dagger``, ``opd``, ``opd-noised``, ``nail``, ``nail-noised``
(``shiftbounds.imitation``; ``-noised`` fits the noised student). One OPD and one NAIL learner:
over tabular students the forward, reverse and mixed divergences have the same minimiser, so
rows per divergence would be copies. The (family, eta, method) chains run on ``--workers``
processes; each finished chain is saved and skipped on a rerun with the same options.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TextIO

from shiftbounds.figures import plot_noisy_expert
from shiftbounds.noisy_expert import METHODS, NoisyExpertConfig, analyse, crossover_md, run_chain
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json
from shiftbounds.utils.workers import default_workers, run_jobs

PRESETS = {
    "default": {},
    "random": {"families": ("lock", "random"), "etas": (0.0, 0.1, 0.2, 0.3), "horizons": (4, 8, 12, 16, 20),
               "methods": tuple(METHODS), "out_dir": "results/noisy_expert/random"},
    "smoke": {"horizons": (4, 6, 8, 12), "fit_max_h": 6, "etas": (0.1, 0.3), "methods": ("bc", "opd", "nail"), "seeds": 4,
              "budget": 256, "n_boot": 100, "workers": 1},
}


def run(cfg: NoisyExpertConfig, stream: TextIO | None = None) -> dict:
    """Run (resuming finished chains), write every output, return the results dict."""
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    workers = cfg.workers or default_workers()
    keys = [(f, e, m) for f in cfg.families for e in cfg.etas for m in cfg.methods]
    t0 = time.perf_counter()
    done = run_jobs(run_chain, [(cfg, *k) for k in keys], workers, label=f"noisy_expert chains on {workers} workers")
    seconds = time.perf_counter() - t0
    results = {"config": asdict(replace(cfg, workers=0)), **analyse(cfg, dict(zip(keys, done)))}
    write_json(out / "results.json", results)
    write_json(out / "timings.json", {"wall_seconds": seconds, "workers": workers})
    write_csv(out / "sample_complexity.csv", results["rows"])
    write_csv(out / "growth.csv", results["growth"])
    write_csv(out / "crossover.csv", results["crossover"])
    md = (f"# Noisy expert: episodes to reach the target, and the crossover horizon H*\n\n"
          f"Target: suboptimality <= {cfg.target} x (J(pi*) - J(uniform)); budget {cfg.budget}; {cfg.seeds} seeds; "
          "median with 95 % bootstrap CI over seeds. Every learner is checked after every trajectory or episode. "
          "After a median over the budget, larger horizons of that method are not run (`run = False`) and count as over budget.\n\n"
          f"## Crossover horizon H* (BC needs more than the online learner from H* on)\n\nPredicted from the horizons <= "
          f"{cfg.fit_max_h} (BC: log n linear in H; online: log n linear in log H), measured on the whole grid "
          f"{list(cfg.horizons)}; 95 % bootstrap intervals over seeds; `> {max(cfg.horizons)}`: no crossover on the grid; `never`: none under the fits.\n\n"
          + crossover_md(cfg, results["crossover"]) + "\n## Growth rates\n\n" + markdown_table(results["growth"])
          + "\n## Episodes per horizon\n\n" + markdown_table(results["rows"]))
    atomic_write_text(out / "results.md", md)
    plot_noisy_expert(results, out / "noisy_expert")
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(NoisyExpertConfig, __doc__, PRESETS, argv, name="experiments.noisy_expert")
    results = exit_on_stale(run, cfg)
    print(crossover_md(cfg, results["crossover"]))
    print(f"wrote {cfg.out_dir}/results.md, sample_complexity.csv, growth.csv, crossover.csv, results.json, noisy_expert.png/pdf")
    return results


if __name__ == "__main__":
    main()
