"""The noisy-expert study (``experiments.noisy_expert``): its configuration, the per-seed sample
complexity of each learner over horizons (chains, saved as stages so a run resumes), and the
analysis of finished chains: sample-complexity rows, growth rates and the crossover horizon ``H*``.

The ledger's check recomputes the shipped tables with :func:`analyse` from the shipped chains.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from shiftbounds.crossover import crossover_estimates, growth_slope, median_ci
from shiftbounds.imitation import (
    LearnerConfig,
    combination_lock,
    lock_continue_probability,
    random_expert_instance,
    sample_complexity,
)
from shiftbounds.tabular import expected_return, uniform_policy
from shiftbounds.utils.io import format_cell, markdown_table, read_json
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
ONLINE_AGAINST_BC = ("nail", "nail-noised")
FAMILIES = ("lock", "random")
FORMAT_VERSION = 2


@dataclass(frozen=True)
class NoisyExpertConfig:
    """Options of ``experiments.noisy_expert``."""

    families: tuple[str, ...] = field(default=("lock",), metadata={"help": f"instance families, from {FAMILIES}"})
    horizons: tuple[int, ...] = field(default=(4, 6, 8, 12, 16, 24, 32, 48, 64), metadata={"help": "horizons H, increasing"})
    fit_max_h: int = field(default=16, metadata={"help": "horizons <= this are fitted to predict H*; the whole grid measures it"})
    etas: tuple[float, ...] = field(default=(0.05, 0.1, 0.15, 0.2, 0.3), metadata={"help": "expert noise levels eta"})
    methods: tuple[str, ...] = field(default=("bc", "opd", "opd-noised", "nail", "nail-noised"),
                                     metadata={"help": f"learners, from {tuple(METHODS)}"})
    n_actions: int = field(default=4, metadata={"help": "A (actions per context)"})
    n_states: int = field(default=8, metadata={"help": "S of the random family"})
    target: float = field(default=0.1, metadata={"help": "suboptimality target, as a fraction of J(pi*) - J(uniform)"})
    budget: int = field(default=4096, metadata={"help": "most trajectories / episodes per run"})
    seeds: int = field(default=20, metadata={"help": "seeds per cell"})
    n_boot: int = field(default=1000, metadata={"help": "bootstrap resamples for CIs"})
    workers: int = field(default=0, metadata={"help": "(family, eta, method) chains at once, one process each; 0 = every core. "
                                                      "The results do not depend on it", "resume": False})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="results/noisy_expert/default", metadata={"help": "folder for the results", "resume": False})

    def __post_init__(self) -> None:
        bad = [m for m in self.methods if m not in METHODS] + [f for f in self.families if f not in FAMILIES]
        if bad or not self.methods or not self.families:
            raise ValueError(f"unknown --methods/--families {bad}; choose from {tuple(METHODS)} and {FAMILIES}")
        if len(self.horizons) < 2 or min(self.horizons) < 1 or list(self.horizons) != sorted(set(self.horizons)):
            raise ValueError(f"--horizons needs >= 2 increasing values >= 1; got {self.horizons}")
        if sum(h <= self.fit_max_h for h in self.horizons) < 2:
            raise ValueError(f"--fit-max-h {self.fit_max_h} leaves fewer than 2 of --horizons {self.horizons} to fit")
        if any(not 0 <= e < 1 for e in self.etas) or not self.etas:
            raise ValueError(f"--etas must lie in [0, 1); got {self.etas}")
        if not 0 < self.target < 1:
            raise ValueError(f"--target must lie in (0, 1); got {self.target}")
        if self.budget < 1 or self.seeds < 2 or self.n_actions < 2 or self.workers < 0:
            raise ValueError(f"need --budget >= 1, --seeds >= 2, --n-actions >= 2, --workers >= 0; "
                             f"got {self.budget}, {self.seeds}, {self.n_actions}, {self.workers}")


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


def run_cell(cfg: NoisyExpertConfig, family: str, eta: float, method: str, H: int) -> list[float]:
    """Per-seed episodes of one (family, eta, method, H); seed ``k``'s instance and stream are the
    same for every method (paired)."""
    episodes = []
    for k in range(cfg.seeds):
        inst_rng, run_rng = numpy_rng(cfg.seed, FAMILIES.index(family), H, int(round(eta * 1000)), k).spawn(2)
        mdp, expert, target = instance(family, H, cfg, rng=inst_rng)
        episodes.append(sample_complexity(mdp, expert, eta, METHODS[method], target=target, budget=cfg.budget,
                                          rng=run_rng).episodes)
    return episodes


def run_chain(cfg: NoisyExpertConfig, family: str, eta: float, method: str) -> dict:
    """``{"H": per-seed episodes, or None when not run}`` over the horizons, in order; after a
    horizon whose median is over the budget the larger ones are not run. Saved under
    ``<out_dir>/chains`` when finished (so a killed run resumes by chains)."""

    def make() -> dict:
        out, censored = {}, False
        for H in cfg.horizons:
            out[str(H)] = None if censored else run_cell(cfg, family, eta, method, H)
            censored = censored or not np.isfinite(np.median(out[str(H)]))
        return out

    return StageCache(Path(cfg.out_dir) / "chains").json(chain_name(cfg, family, eta, method), make)


def chain_name(cfg: NoisyExpertConfig, family: str, eta: float, method: str) -> str:
    opts = {k: v for k, v in asdict(cfg).items() if k not in ("out_dir", "n_boot", "workers", "fit_max_h", "etas", "methods", "families")}
    key = hashlib.sha1(json.dumps([FORMAT_VERSION, family, eta, method, opts], sort_keys=True).encode()).hexdigest()[:10]
    return f"{family}_eta{eta}_{method}_{key}"


def load_chains(cfg: NoisyExpertConfig) -> dict:
    """The finished chains of a run, read from ``<out_dir>/chains`` (a missing chain is an error: nothing is run)."""
    folder, chains = Path(cfg.out_dir) / "chains", {}
    for key in ((f, e, m) for f in cfg.families for e in cfg.etas for m in cfg.methods):
        path = folder / f"{chain_name(cfg, *key)}.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the chain {key} of this run is missing")
        chains[key] = read_json(path)
    return chains


def per_seed(chain: dict, H: int, seeds: int) -> np.ndarray:
    """A chain's per-seed counts at ``H``; a horizon not run counts as over the budget."""
    v = chain[str(H)]
    return np.full(seeds, np.inf) if v is None else np.array(v, dtype=float)


def _show(x: float, inf_text: str) -> str:
    return "n/a" if np.isnan(x) else inf_text if np.isinf(x) else f"{x:.1f}"


def _interval(lo: float, hi: float, inf_text: str) -> str:
    return "n/a" if np.isnan(lo) else f"[{_show(lo, inf_text)}, {_show(hi, inf_text)}]"


def analyse(cfg: NoisyExpertConfig, chains: dict) -> dict:
    """Sample-complexity rows, growth rates and the crossover table from the chains."""
    rng = numpy_rng(cfg.seed, "analysis")
    H_all = np.array(cfg.horizons)
    fit = H_all <= cfg.fit_max_h
    rows, growth, cross = [], [], []
    for family in cfg.families:
        for eta in cfg.etas:
            q_rate = -np.log(lock_continue_probability(eta, cfg.n_actions)) if family == "lock" and eta > 0 else None
            counts = {m: [per_seed(chains[(family, eta, m)], H, cfg.seeds) for H in cfg.horizons] for m in cfg.methods}
            for m in cfg.methods:
                for H, v in zip(cfg.horizons, counts[m]):
                    med, lo, hi = median_ci(v, cfg.n_boot, rng=rng)
                    rows.append({"family": family, "eta": eta, "method": m, "H": H, "run": chains[(family, eta, m)][str(H)] is not None,
                                 "median_n": med, "ci_low": lo, "ci_high": hi, "finished": float(np.isfinite(v).mean())})
                finite = np.array([np.isfinite(np.median(v)) for v in counts[m]])
                for name, mask in ((f"fit (H <= {cfg.fit_max_h})", fit), ("all finite", finite)):
                    sel = [v for v, k in zip(counts[m], mask) if k]
                    exp_fit = growth_slope(H_all[mask], sel, False, cfg.n_boot, rng=rng) if mask.sum() >= 2 else None
                    pow_fit = growth_slope(H_all[mask], sel, True, cfg.n_boot, rng=rng) if mask.sum() >= 2 else None
                    growth.append({
                        "family": family, "eta": eta, "method": m, "range": name,
                        "horizons": " ".join(str(h) for h in H_all[mask]),
                        "slope_logn_vs_H": exp_fit[0] if exp_fit else None,
                        "slope_ci": f"[{exp_fit[1]:.3f}, {exp_fit[2]:.3f}]" if exp_fit else "censored",
                        "slope_logn_vs_logH": pow_fit[0] if pow_fit else None,
                        "loglog_ci": f"[{pow_fit[1]:.3f}, {pow_fit[2]:.3f}]" if pow_fit else "censored",
                        "theory_-log_q": q_rate})
            if "bc" not in cfg.methods:
                continue
            for online in (m for m in ONLINE_AGAINST_BC if m in cfg.methods):
                est = crossover_estimates(cfg.horizons, counts["bc"], counts[online], fit_max_h=cfg.fit_max_h,
                                          n_boot=cfg.n_boot, rng=rng, rate=q_rate)
                at_rate = est["predicted_at_rate"] or (np.nan, np.nan, np.nan)
                cross.append({
                    "family": family, "eta": eta, "online": online,
                    "predicted_H*": est["predicted"][0], "predicted_ci": _interval(*est["predicted"][1:], "never"),
                    "predicted_at_-log_q": at_rate[0], "at_-log_q_ci": _interval(*at_rate[1:], "never"),
                    "measured_H*": est["measured"][0], "measured_ci": _interval(*est["measured"][1:], f"> {max(cfg.horizons)}"),
                    "measured_censored_share": est["measured_censored_share"],
                    "prediction": ("not estimable (a median over budget in the fit range)" if np.isnan(est["predicted"][0])
                                   else "extrapolated" if est["predicted"][0] > cfg.fit_max_h else "within the fit range"),
                })
    return {"rows": rows, "growth": growth, "crossover": cross}


def crossover_md(cfg: NoisyExpertConfig, cross: list[dict]) -> str:
    top = f"> {max(cfg.horizons)}"
    table = [{"family": r["family"], "eta": r["eta"], "online": r["online"],
              "predicted H* (fitted BC rate)": f"{_show(r['predicted_H*'], 'never')} {r['predicted_ci']}",
              "predicted H* (BC at -log q)": f"{_show(r['predicted_at_-log_q'], 'never')} {r['at_-log_q_ci']}",
              "measured H*": f"{_show(r['measured_H*'], top)} {r['measured_ci']}",
              "resamples censored": format_cell(r["measured_censored_share"], 3), "prediction": r["prediction"]} for r in cross]
    return markdown_table(table)


