"""Compare the verdicts of two runs of one experiment: a rerun, a repeat with other seeds, or your
own run against a shipped one.

``python -m experiments.compare_runs --run results/full_pipeline/default_seed1 --reference results/full_pipeline/default``

Reads both folders' ``paired.csv`` (the rows of paired differences every experiment writes), matches
rows by their identifying columns (``task`` / ``evaluation user`` where present, and
``difference``) and writes ``verdicts.md`` / ``verdicts.csv`` under ``--out-dir``: each comparison's
mean and interval in both runs, its verdict after Holm's correction in both, and ``agreed`` (the
ordering both runs support, or ``not established``). A reading should state only the agreed
orderings. Rows present in one run only are listed as such.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path

from shiftbounds.utils.cli import parse_config
from shiftbounds.utils.io import atomic_write_text, markdown_table, write_csv

KEYS = ("task", "evaluation user", "difference")
VERDICT = "holm verdict"


@dataclass(frozen=True)
class CompareConfig:
    """Options of ``experiments.compare_runs``."""

    run: str = field(default="", metadata={"help": "results folder of the run to check (holds paired.csv)"})
    reference: str = field(default="", metadata={"help": "results folder to compare it with (holds paired.csv)"})
    seed: int = field(default=0, metadata={"help": "unused (no randomness); kept for the common CLI"})
    out_dir: str = field(default="results/compare_runs/default", metadata={"help": "where verdicts.md / verdicts.csv go"})

    def __post_init__(self) -> None:
        for name in ("run", "reference"):
            folder = Path(getattr(self, name))
            if not getattr(self, name) or not (folder / "paired.csv").is_file():
                raise ValueError(f"--{name} must be a results folder holding paired.csv; got {getattr(self, name)!r}")


PRESETS = {"default": {}, "smoke": {}}


def read_paired(folder: str | Path) -> dict[tuple, dict]:
    """A run's paired rows keyed by their identifying columns; a row without a ``holm verdict`` is an error."""
    path = Path(folder) / "paired.csv"
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if rows and VERDICT not in rows[0]:
        raise ValueError(f"{path} has no {VERDICT!r} column; rerun its experiment to tabulate Holm's verdicts")
    keys = [k for k in KEYS if rows and k in rows[0]]
    return {tuple(r[k] for k in keys): r for r in rows}


def compare(run: dict[tuple, dict], reference: dict[tuple, dict]) -> list[dict]:
    """One row per comparison in either run: both means, intervals and Holm verdicts, and the agreed verdict."""
    out = []
    for key in list(reference) + [k for k in run if k not in reference]:
        a, b = run.get(key), reference.get(key)
        row = {"comparison": " / ".join(key)}
        for tag, r in (("run", a), ("reference", b)):
            row[f"{tag} mean"] = f"{float(r['mean']):.3f}" if r else ""
            row[f"{tag} ci"] = r["ci"] if r and "ci" in r else (f"[{r['low']}, {r['high']}]" if r else "")
            row[f"{tag} verdict"] = r[VERDICT] if r else "(absent)"
        if a is None or b is None:
            row["agreed"] = "in one run only"
        elif a[VERDICT] == b[VERDICT] and a[VERDICT] != "not significant":
            row["agreed"] = a[VERDICT]
        else:
            row["agreed"] = "not established"
        out.append(row)
    return out


def run(cfg: CompareConfig) -> list[dict]:
    rows = compare(read_paired(cfg.run), read_paired(cfg.reference))
    out = Path(cfg.out_dir)
    write_csv(out / "verdicts.csv", rows)
    agreed = [r for r in rows if r["agreed"] not in ("not established", "in one run only")]
    md = (f"# Verdicts of {cfg.run} against {cfg.reference}\n\nVerdicts after Holm's correction within each run; "
          f"`agreed`: the ordering both runs support. {len(agreed)} of {len(rows)} comparisons agree on an ordering.\n\n"
          + markdown_table(rows))
    atomic_write_text(out / "verdicts.md", md)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    cfg = parse_config(CompareConfig, __doc__, PRESETS, list(sys.argv[1:] if argv is None else argv), name="experiments.compare_runs")
    rows = run(cfg)
    print((Path(cfg.out_dir) / "verdicts.md").read_text())
    return rows


if __name__ == "__main__":
    main()
