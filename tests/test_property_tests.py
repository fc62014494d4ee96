"""The property-test statistics the ledger cites: counted from hypothesis's observations, the same
bytes for the same seed, and a failed case turns the theorem's row."""

from __future__ import annotations

import shutil
from pathlib import Path

from experiments import claims, property_tests
from shiftbounds.ledger.decide import PROPERTIES, bound_holds
from shiftbounds.ledger.properties import summarise
from shiftbounds.ledger.render import context, load_claims

ROOT = Path(__file__).resolve().parents[1]


def _case(prop, status, features=(), how="during generate phase"):
    return {"type": "test_case", "property": prop, "status": status, "how_generated": how, "features": dict.fromkeys(features, "")}


def test_summarise_counts_cases_and_shares_of_the_drawn_ones():
    records = [_case("t", "passed", ["H=2 S=3 A=2", "material: True"]), _case("t", "passed", ["H=1 S=3 A=2", "material: False"]),
               _case("t", "failed", ["H=3 S=2 A=2", "material: True"]), _case("t", "passed", how="explicit example"),
               _case("u", "gave_up"), {"type": "info", "property": "t"}]
    t, u = summarise(records)
    assert (t["cases"], t["explicit"], t["passed"], t["failed"], t["rejected"]) == (4, 1, 3, 1, 0)
    assert t["nontrivial"] == 2 / 3 and t["material"] == 2 / 3
    assert (u["cases"], u["rejected"], u["nontrivial"], u["material"]) == (1, 1, None, None)


def test_the_smoke_preset_gives_the_same_bytes_twice(tmp_path):
    for name in ("a", "b"):
        property_tests.main(["--preset", "smoke", "--out-dir", str(tmp_path / name)])
    a, b = ((tmp_path / n / "statistics.csv").read_bytes() for n in ("a", "b"))
    assert a == b and b"test_theorem1_chain" in a


def test_a_failed_property_case_contradicts_the_theorem_row(tmp_path):
    shutil.copytree(ROOT / "results/bound_check", tmp_path / "results/bound_check")
    shutil.copytree(ROOT / PROPERTIES, tmp_path / PROPERTIES)
    data = load_claims(claims.DATA)
    claim = next(c for c in data["claims"] if c["kind"] == "bound_holds")
    assert bound_holds(claim, context(data, tmp_path)).verdict == "supported"
    path = tmp_path / PROPERTIES / "statistics.csv"
    path.write_text(path.read_text().replace("test_theorem1_chain,157,7,157,0,", "test_theorem1_chain,157,7,156,1,"))
    assert bound_holds(claim, context(data, tmp_path)).verdict == "contradicted"
