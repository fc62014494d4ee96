"""The claims ledger: every claim of the two papers the shipped results bear on, including the rows that
go against them, decided by one set of rules from the per-seed files under ``results/``.

``python -m experiments.claims`` reads the claims from ``experiments/claims.yaml`` (claim, paper,
section, kind, setting, evaluator, family, replication unit, command) and writes ``docs/claims.md``
(the rules, the real-dialogue sequence and every row) and the README's table (between
``<!-- claims: start -->`` and ``<!-- claims: end -->``). ``--check`` writes nothing: it recomputes
every summary table a row rests on from the per-seed files beside it (paired differences, exact
p-values and Holm verdicts, McNemar counts, headroom shares, growth slopes, crossovers), decides
every row again, and exits with status 1 on any disagreement or stale page (the test suite runs it).
Verdicts: ``supported``, ``contradicted``, ``not significant``, ``uninformative``, ``untested``
(docs/claims.md states the rules).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from shiftbounds.ledger import check
from shiftbounds.ledger.decide import MAIN, NOISY, REPEAT, SWEEP
from shiftbounds.ledger.render import claims_md, ledger, load_claims, with_readme_block
from shiftbounds.ledger.sources import read_csv
from shiftbounds.noisy_expert import NoisyExpertConfig, analyse, load_chains
from shiftbounds.utils.cli import load_config_file, parse_config
from shiftbounds.utils.io import atomic_write_text

DATA = Path(__file__).with_name("claims.yaml")
MODADD = "results/modadd/cpu"
SIMULATORS = "results/simulator_study/smollm2"


def disagreements(root: Path, data: dict) -> list[str]:
    """Every shipped summary table the ledger reads, against its recomputation from the per-seed files."""
    out = []
    for folder in (MAIN, REPEAT):
        out += check.pipeline_paired(root, folder) + check.pipeline_headroom(root, folder)
    out += check.sweep_growth(root, SWEEP)
    for run in data["real_dialogue"]["runs"]:
        if (root / run["folder"] / "runs.csv").is_file():  # the first development run shipped no per-seed file
            out += check.dialogue_paired(root, run["folder"]) + check.dialogue_goals(root, run["folder"])
    threshold = json.loads((root / MODADD / "config.json").read_text(encoding="utf-8"))["config"]["solve_threshold"]
    out += check.modadd_mcnemar(root, MODADD, threshold)
    out += check.simulator_paired(root, SIMULATORS)
    saved = load_config_file(root / NOISY / "config.json", NoisyExpertConfig)
    cfg = NoisyExpertConfig(**{**saved, "out_dir": str(root / NOISY)})
    again = analyse(cfg, load_chains(cfg))
    for name, key in (("sample_complexity.csv", "rows"), ("growth.csv", "growth"), ("crossover.csv", "crossover")):
        out += check.same_table(f"{NOISY}/{name}", read_csv(root / NOISY / name), again[key])
    return out


@dataclass(frozen=True)
class ClaimsConfig:
    """Options of ``experiments.claims``."""

    root: str = field(default=".", metadata={"help": "the repository root whose results/ decide the claims"})
    data: str = field(default=str(DATA), metadata={"help": "the claims data file"})
    check: bool = field(default=False, metadata={"help": "write nothing; recompute every row and table, exit 1 on any disagreement"})
    seed: int = field(default=0, metadata={"help": "unused (no randomness); kept for the common CLI"})
    out_dir: str = field(default="docs", metadata={"help": "where claims.md goes, relative to --root (the README is the root's)"})

    def __post_init__(self) -> None:
        if not Path(self.data).is_file() or not (Path(self.root) / "README.md").is_file():
            raise ValueError(f"--data must be the claims data file and --root a repository root with a README.md; "
                             f"got --data {self.data!r}, --root {self.root!r}")


PRESETS = {"default": {"out_dir": "docs"}, "smoke": {"check": True, "out_dir": "docs"}}


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(ClaimsConfig, __doc__, PRESETS, list(sys.argv[1:] if argv is None else argv), name="experiments.claims")
    root, data = Path(cfg.root), load_claims(Path(cfg.data))
    rows = ledger(data, root)
    md_file, readme_file = root / cfg.out_dir / "claims.md", root / "README.md"
    md, readme = claims_md(data, rows, root), with_readme_block(readme_file.read_text(encoding="utf-8"), rows)
    if not cfg.check:
        atomic_write_text(md_file, md)
        atomic_write_text(readme_file, readme)
        print(json.dumps({"wrote": [str(md_file), str(readme_file)], "claims": len(rows)}))
        return 0
    problems = disagreements(root, data)
    problems += [f"stale: {p} (run `python -m experiments.claims`)" for p, text in ((md_file, md), (readme_file, readme))
                 if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"claims ledger: {len(rows)} rows recomputed from the per-seed files; tables, ledger and README table agree")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
