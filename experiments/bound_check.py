"""Measure Theorems 1-2 against their bounds over horizons: gaps, ratios and log-log slopes.

``python -m experiments.bound_check [--preset smoke|default] [options]``

For each instance family and horizon ``H`` it draws ``n_instances`` instances with per-turn
error about ``eps`` (policy families) or ``delta`` (simulator families), computes the exact return
gap and the bound (:mod:`shiftbounds.bound_sweep`), and fits ``log gap`` against ``log H`` with a
bootstrap CI. In the regime ``eps H << 1`` the bound grows like ``H^2``; whether the *gap* does
depends on the family (cliff and absorbing families: quadratic; mixing families: sub-quadratic, the
bound loose there, reported, not hidden).

Writes ``table.csv``, ``table.md``, ``results.json`` and ``bound_check.{png,pdf}`` under
``--out-dir``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

from shiftbounds.bound_sweep import FAMILIES, QUADRATIC_FAMILIES, cliff_ratios, gaps_and_bounds
from shiftbounds.figures import plot_bound_check
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json
from shiftbounds.utils.progress import Progress
from shiftbounds.utils.seeding import numpy_rng
from shiftbounds.utils.stats import loglog_slope


@dataclass(frozen=True)
class BoundCheckConfig:
    """Options of ``experiments.bound_check`` (each is a command-line flag)."""

    horizons: tuple[int, ...] = field(default=(4, 8, 16, 32, 64, 128), metadata={"help": "horizons H to sweep (comma-separated)"})
    eps_H: float = field(default=0.05, metadata={"help": "per-turn error times the largest H; keep << 1 for the quadratic regime"})
    n_instances: int = field(default=16, metadata={"help": "instances per (family, H)"})
    n_states: int = field(default=6, metadata={"help": "S of the random families (absorbing ones get one more)"})
    n_actions: int = field(default=3, metadata={"help": "A of the random families"})
    families: tuple[str, ...] = field(default=FAMILIES, metadata={"help": f"families to run, from {FAMILIES}"})
    cliff_eps_H: tuple[float, ...] = field(default=(1.0, 0.5, 0.2, 0.1, 0.05, 0.01, 0.001), metadata={"help": "eps*H values for the cliff-ratio curve"})
    n_boot: int = field(default=2000, metadata={"help": "bootstrap resamples for slope CIs"})
    seed: int = field(default=0, metadata={"help": "one seed for every generator"})
    out_dir: str = field(default="results/bound_check/default", metadata={"help": "folder for the results", "resume": False})

    def __post_init__(self) -> None:
        if len(self.horizons) < 2 or min(self.horizons) < 2:
            raise ValueError(f"--horizons needs at least two values >= 2; got {self.horizons}")
        if not 0 < self.eps_H <= 1:
            raise ValueError(f"--eps-H must lie in (0, 1]; got {self.eps_H}")
        if self.n_instances < 1 or self.n_boot < 10:
            raise ValueError(f"--n-instances >= 1 and --n-boot >= 10 required; got {self.n_instances}, {self.n_boot}")
        if self.n_states < 1 or self.n_actions < 2:
            raise ValueError(f"--n-states >= 1 and --n-actions >= 2 required; got {self.n_states}, {self.n_actions}")
        bad = [f for f in self.families if f not in FAMILIES]
        if bad or not self.families:
            raise ValueError(f"--families must be a non-empty subset of {FAMILIES}; got unknown {bad}")

    @property
    def eps(self) -> float:
        """Per-turn error used at every horizon: ``eps_H / max(H)``."""
        return self.eps_H / max(self.horizons)


PRESETS = {
    "default": {},
    "smoke": {"horizons": (8, 16, 32), "n_instances": 16, "n_states": 3, "n_boot": 200},
}


def run(cfg: BoundCheckConfig, stream: TextIO | None = None) -> dict:
    """Run the sweep, write every output, and return the results dict."""
    rng = numpy_rng(cfg.seed)
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    rows, slopes = [], []
    prog = Progress(len(cfg.families) * len(cfg.horizons), "bound_check", stream=stream)
    for family in cfg.families:
        all_H, all_gap, all_bound = [], [], []
        for H in cfg.horizons:
            gaps, bounds = gaps_and_bounds(family, H, cfg.eps, cfg.n_instances, cfg.n_states, cfg.n_actions, rng=rng)
            assert (gaps <= bounds + 1e-9).all(), f"bound violated in {family} at H={H}"
            all_H += [H] * gaps.size
            all_gap += list(gaps)
            all_bound += list(bounds)
            rows.append({"family": family, "H": H, "eps_H": cfg.eps * H, "gap": float(gaps.mean()),
                         "bound": float(bounds.mean()), "ratio": float((gaps / bounds).mean())})
            prog.update(note=f"{family} H={H}")
        g = loglog_slope(all_H, all_gap, rng=rng, n_boot=cfg.n_boot)
        b = loglog_slope(all_H, all_bound, rng=rng, n_boot=cfg.n_boot)
        slopes.append({"family": family, "kind": "simulator" if "sim" in family else "policy",
                       "gap_slope": g.value, "gap_slope_low": g.low, "gap_slope_high": g.high,
                       "bound_slope": b.value, "quadratic_family": family in QUADRATIC_FAMILIES})
    ratios = cliff_ratios(cfg.cliff_eps_H, max(cfg.horizons))
    results = {"config": asdict(cfg), "eps": cfg.eps, "rows": rows, "slopes": slopes, "cliff_ratios": ratios}
    write_csv(out / "table.csv", rows)
    write_csv(out / "slopes.csv", slopes)
    write_csv(out / "cliff_ratios.csv", ratios)
    write_json(out / "results.json", results)
    md = (f"# bound_check\n\nPer-turn error eps = {cfg.eps:.3g} (eps*H <= {cfg.eps_H:.3g}).\n\n## Slopes of log gap on log H "
          "(95 % bootstrap CI)\n\n")
    md += markdown_table(slopes, ["family", "kind", "gap_slope", "gap_slope_low", "gap_slope_high", "bound_slope"])
    md += "\n## Cliff: gap / Theorem 1 bound\n\n" + markdown_table(ratios, ["eps_H", "H", "gap", "bound", "ratio"])
    md += "\n## Gap and bound per horizon (means over instances)\n\n" + markdown_table(rows)
    atomic_write_text(out / "table.md", md)
    plot_bound_check(results, out / "bound_check")
    return results


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(BoundCheckConfig, __doc__, PRESETS, argv, name="experiments.bound_check")
    results = exit_on_stale(run, cfg)
    print(f"\nper-turn error eps = {cfg.eps:.3g}; slopes of log|gap| on log H (95% bootstrap CI):")
    for s in results["slopes"]:
        print(f"  {s['family']:14s} gap {s['gap_slope']:.3f} [{s['gap_slope_low']:.3f}, {s['gap_slope_high']:.3f}]"
              f"   bound {s['bound_slope']:.3f}")
    print("cliff gap/bound: " + ", ".join(f"eps*H={r['eps_H']:g}: {r['ratio']:.4f}" for r in results["cliff_ratios"]))
    print(f"wrote {cfg.out_dir}/table.md, table.csv, slopes.csv, cliff_ratios.csv, results.json, bound_check.png/pdf")
    return results


if __name__ == "__main__":
    main()
