"""Offline behaviour cloning versus on-policy distillation with a noisy expert (docs/theory.md §5).

``python -m experiments.noisy_expert [--preset smoke|default] [options]``

For the combination lock and random tabular MDPs, over a grid of horizons ``H`` and noise levels
``eta``, it measures per seed the number of trajectories (BC) or episodes (online learners) needed
until the greedy student is within ``--target`` of the clean expert, and reports the median with
a bootstrap CI over seeds, the share of seeds that finished within ``--budget``, and growth rates:

* BC: slope of ``log n`` against ``H`` (theory on the lock: ``-log q``, ``q = 1 - eta + eta/A``);
* online learners: slope of ``log n`` against ``log H`` (polynomial order).

Methods: ``bc``, ``dagger``, ``opd``, ``opd-noised``, ``nail``, ``nail-noised``
(``shiftbounds.imitation``; ``-noised`` fits the noised student). One OPD and one NAIL learner:
over tabular students the forward, reverse and mixed divergences have the same minimiser, so
rows per divergence would be copies.
Finished (family, H, eta) blocks are saved and skipped on a rerun with the same options.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from shiftbounds.figures import plot_noisy_expert
from shiftbounds.imitation import (
    LearnerConfig,
    combination_lock,
    lock_continue_probability,
    random_expert_instance,
    sample_complexity,
)
from shiftbounds.tabular import expected_return, uniform_policy
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stages import StageCache

METHODS = {
    "bc": LearnerConfig("bc"),
    "dagger": LearnerConfig("dagger"),
    "opd": LearnerConfig("opd"),
    "opd-noised": LearnerConfig("opd", noised_student=True),
    "nail": LearnerConfig("nail"),
    "nail-noised": LearnerConfig("nail", noised_student=True),
}
FAMILIES = ("lock", "random")
FORMAT_VERSION = 1


@dataclass(frozen=True)
class NoisyExpertConfig:
    """Options of ``experiments.noisy_expert``."""

    families: tuple[str, ...] = field(default=FAMILIES, metadata={"help": f"instance families, from {FAMILIES}"})
    horizons: tuple[int, ...] = field(default=(4, 8, 12, 16, 20), metadata={"help": "horizons H"})
    etas: tuple[float, ...] = field(default=(0.0, 0.1, 0.2, 0.3), metadata={"help": "expert noise levels eta"})
    methods: tuple[str, ...] = field(default=tuple(METHODS), metadata={"help": f"learners, from {tuple(METHODS)}"})
    n_actions: int = field(default=4, metadata={"help": "A (actions per context)"})
    n_states: int = field(default=8, metadata={"help": "S of the random family"})
    target: float = field(default=0.1, metadata={"help": "suboptimality target, as a fraction of J(pi*) - J(uniform)"})
    budget: int = field(default=4096, metadata={"help": "most trajectories / episodes per run"})
    seeds: int = field(default=20, metadata={"help": "seeds per cell"})
    n_boot: int = field(default=1000, metadata={"help": "bootstrap resamples for CIs"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="results/noisy_expert/default", metadata={"help": "folder for the results", "resume": False})

    def __post_init__(self) -> None:
        bad = [m for m in self.methods if m not in METHODS] + [f for f in self.families if f not in FAMILIES]
        if bad or not self.methods or not self.families:
            raise ValueError(f"unknown --methods/--families {bad}; choose from {tuple(METHODS)} and {FAMILIES}")
        if len(self.horizons) < 2 or min(self.horizons) < 1:
            raise ValueError(f"--horizons needs >= 2 values >= 1; got {self.horizons}")
        if any(not 0 <= e < 1 for e in self.etas) or not self.etas:
            raise ValueError(f"--etas must lie in [0, 1); got {self.etas}")
        if not 0 < self.target < 1:
            raise ValueError(f"--target must lie in (0, 1); got {self.target}")
        if self.budget < 1 or self.seeds < 2 or self.n_actions < 2:
            raise ValueError(f"need --budget >= 1, --seeds >= 2, --n-actions >= 2; got {self.budget}, {self.seeds}, {self.n_actions}")


PRESETS = {
    "default": {},
    "smoke": {"horizons": (4, 8), "etas": (0.0, 0.3), "methods": ("bc", "nail", "opd"), "seeds": 4,
              "budget": 256, "n_boot": 100},
}


def instance(family: str, H: int, cfg: NoisyExpertConfig, *, rng: np.random.Generator):
    """``(mdp, expert, absolute target)`` for one seed."""
    if family == "lock":
        lock = combination_lock(H, cfg.n_actions, rng=rng)
        mdp, expert = lock.mdp, lock.expert
    else:
        mdp, expert = random_expert_instance(H, cfg.n_states, cfg.n_actions, rng=rng)
    J_star = float(expected_return(mdp, expert))
    J_unif = float(expected_return(mdp, uniform_policy(H, mdp.n_states, mdp.n_actions)))
    return mdp, expert, cfg.target * (J_star - J_unif)


def run_block(cfg: NoisyExpertConfig, family: str, H: int, eta: float) -> dict:
    """Per-method, per-seed episodes for one (family, H, eta)."""
    out = {}
    for m in cfg.methods:
        episodes = []
        for k in range(cfg.seeds):
            inst_rng, run_rng = numpy_rng(cfg.seed, FAMILIES.index(family), H, int(round(eta * 1000)), k).spawn(2)
            mdp, expert, target = instance(family, H, cfg, rng=inst_rng)
            sc = sample_complexity(mdp, expert, eta, METHODS[m], target=target, budget=cfg.budget, rng=run_rng)
            episodes.append(sc.episodes)
        out[m] = episodes
    return out


def _median_ci(values: np.ndarray, n_boot: int, *, rng: np.random.Generator) -> tuple[float, float, float]:
    boots = np.median(rng.choice(values, size=(n_boot, values.size)), axis=1)
    return float(np.median(values)), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def growth_slope(H: np.ndarray, per_seed: list[np.ndarray], log_x: bool, n_boot: int, *,
                 rng: np.random.Generator) -> tuple[float, float, float] | None:
    """Slope of ``log median(n)`` against ``H`` (or ``log H``) with a bootstrap CI over seeds;
    ``None`` when a median is censored (over budget) at some H."""
    x = np.log(H) if log_x else H.astype(float)

    def fit(samples):
        med = np.array([np.median(s) for s in samples])
        if not np.isfinite(med).all():
            return np.nan
        return float(np.polyfit(x, np.log(med), 1)[0])

    point = fit(per_seed)
    if not np.isfinite(point):
        return None
    boots = np.array([fit([rng.choice(s, size=s.size) for s in per_seed]) for _ in range(n_boot)])
    boots = boots[np.isfinite(boots)]
    return point, float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def _block_name(cfg: NoisyExpertConfig, family: str, H: int, eta: float) -> str:
    opts = {k: v for k, v in asdict(cfg).items() if k not in ("out_dir", "n_boot")}
    key = hashlib.sha1(json.dumps([FORMAT_VERSION, opts], sort_keys=True).encode()).hexdigest()[:10]
    return f"{family}_H{H}_eta{eta}_{key}"


def run(cfg: NoisyExpertConfig, stream=sys.stderr) -> dict:
    """Run (resuming finished blocks), write every output, return the results dict."""
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    rng = numpy_rng(cfg.seed)
    cells = [(f, H, e) for f in cfg.families for e in cfg.etas for H in cfg.horizons]
    prog = Progress(len(cells), "noisy_expert", stream=stream)
    raw, cache = {}, StageCache(out / "blocks")
    for family, H, eta in cells:
        name = _block_name(cfg, family, H, eta)
        raw[(family, H, eta)] = cache.json(name, lambda: run_block(cfg, family, H, eta))
        prog.update(note=f"{family} H={H} eta={eta}" + ("" if name in cache.seconds else " (resumed)"))
    rows, slopes = [], []
    for family in cfg.families:
        for eta in cfg.etas:
            for m in cfg.methods:
                per_seed = [np.array(raw[(family, H, eta)][m], dtype=float) for H in cfg.horizons]
                for H, v in zip(cfg.horizons, per_seed):
                    med, lo, hi = _median_ci(v, cfg.n_boot, rng=rng)
                    rows.append({"family": family, "eta": eta, "method": m, "H": H, "median_n": med,
                                 "ci_low": lo, "ci_high": hi, "finished": float(np.isfinite(v).mean())})
                H = np.array(cfg.horizons)
                exp_fit = growth_slope(H, per_seed, False, cfg.n_boot, rng=rng)
                pow_fit = growth_slope(H, per_seed, True, cfg.n_boot, rng=rng)
                slopes.append({
                    "family": family, "eta": eta, "method": m,
                    "slope_logn_vs_H": exp_fit[0] if exp_fit else None,
                    "slope_ci": f"[{exp_fit[1]:.3f}, {exp_fit[2]:.3f}]" if exp_fit else "censored",
                    "slope_logn_vs_logH": pow_fit[0] if pow_fit else None,
                    "loglog_ci": f"[{pow_fit[1]:.3f}, {pow_fit[2]:.3f}]" if pow_fit else "censored",
                    "theory_-log_q": -np.log(lock_continue_probability(eta, cfg.n_actions)) if family == "lock" else None,
                })
    results = {"config": asdict(cfg), "rows": rows, "slopes": slopes}
    write_json(out / "results.json", results)
    write_csv(out / "sample_complexity.csv", rows)
    write_csv(out / "growth.csv", slopes)
    md = (f"# Noisy expert: episodes to reach the target\n\nTarget: suboptimality <= {cfg.target} x (J(pi*) - J(uniform)); "
          f"budget {cfg.budget}; {cfg.seeds} seeds; median with 95 % bootstrap CI. BC is checked at n = 1, 2, 4, ...\n\n"
          "## Growth rates\n\n" + markdown_table(slopes) + "\n## Episodes per horizon\n\n" + markdown_table(rows))
    atomic_write_text(out / "results.md", md)
    plot_noisy_expert(results, out / "noisy_expert")
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(NoisyExpertConfig, __doc__, PRESETS, argv, name="experiments.noisy_expert")
    results = exit_on_stale(run, cfg)
    print(markdown_table(results["slopes"]))
    print(f"wrote {cfg.out_dir}/results.md, sample_complexity.csv, growth.csv, results.json, noisy_expert.png/pdf")
    return results


if __name__ == "__main__":
    main()
