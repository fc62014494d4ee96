"""How the property tests of the theorems decided: instances drawn, passed, and the share non-trivial.

``python -m experiments.property_tests [--preset smoke|default] [options]``

Runs the property-based tests (hypothesis) of the theorems in a fresh process with hypothesis's
observability output and a fixed ``--seed``, and writes per test the instances drawn (``cases``),
how many passed and failed, the share of drawn instances whose sizes ``H, S, A`` are all ``>= 2``
(``nontrivial``) and the share that is *material* (the bounds say something there), to
``statistics.csv``, ``statistics.json`` and ``statistics.md`` under ``--out-dir``. The claims ledger
cites these counts beside the theorem rows. A failing property test fails the command.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from shiftbounds.ledger.properties import observe, summarise
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import atomic_write_text, guard_resume, markdown_table, write_csv, write_json

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PropertyTestsConfig:
    """Options of ``experiments.property_tests``."""

    tests: tuple[str, ...] = field(default=("tests/test_theorems.py",), metadata={"help": "test files or node ids, relative to the repository root"})
    seed: int = field(default=0, metadata={"help": "hypothesis's seed (--hypothesis-seed)"})
    out_dir: str = field(default="results/property_tests/default", metadata={"help": "results folder", "resume": False})

    def __post_init__(self) -> None:
        missing = [t for t in self.tests if not (ROOT / t.split("::")[0]).is_file()]
        if not self.tests or missing:
            raise ValueError(f"--tests must name test files under {ROOT}; missing: {missing or 'none given'}")


PRESETS = {"default": {}, "smoke": {"tests": ("tests/test_theorems.py::test_theorem1_chain",)}}


def run(cfg: PropertyTestsConfig) -> list[dict]:
    out = Path(cfg.out_dir)
    guard_resume(out, cfg)
    rows = summarise(observe(cfg.tests, seed=cfg.seed, root=ROOT))
    write_csv(out / "statistics.csv", rows)
    write_json(out / "statistics.json", {"config": asdict(cfg), "tests": rows})
    atomic_write_text(out / "statistics.md", "# Property tests of the theorems\n\nPer test: instances drawn, passed, failed; "
                      "`nontrivial`: share with every size H, S, A >= 2; `material`: share where the bounds say something "
                      f"(hypothesis seed {cfg.seed}).\n\n" + markdown_table(rows))
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    cfg = parse_config(PropertyTestsConfig, __doc__, PRESETS, argv, name="experiments.property_tests")
    rows = exit_on_stale(run, cfg)
    print((Path(cfg.out_dir) / "statistics.md").read_text())
    return rows


if __name__ == "__main__":
    main()
