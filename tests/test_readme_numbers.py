"""Every number the README or a doc quotes inside a ``<!-- results: FILE ... -->`` block is found
in place in the named shipped results files (:mod:`shiftbounds.ledger.quotes`): a table's cells at
the row and column they come from, an interval's value and bounds in one record, and the checker
fails on misquotes planted at each of those levels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shiftbounds.ledger.quotes import check_page

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES)
def test_quoted_numbers_are_found_in_place(page):
    if page == "docs/results.md":  # the README's numbers are its claims table, checked by tests/test_claims.py
        assert "<!-- results:" in (ROOT / page).read_text(encoding="utf-8"), f"{page} marks no results block"
    assert check_page(ROOT, page) == {}


CSV = """task,arm,J_real,J_real_ci,gap,slope,slope_ci
guess_number,static_awr,0.4321,"[0.423, 0.440]",-0.0414,1.038,"[0.48, 1.68]"
guess_number,static_one_step,0.3512,"[0.341, 0.361]",0.1020,1.521,"[0.91, 2.16]"
"""
TABLE = """<!-- results: data/runs.csv -->
| arm | `J_real` [95 % CI] | gap | slope |
|---|---|---|---|
| static_awr | 0.432 [0.423, 0.440] | -0.041 | 1.04 [0.48, 1.68] |
| static_one_step | 0.351 [0.341, 0.361] | 0.102 | 1.52 [0.91, 2.16] |

The AWR slope is 1.04 [0.48, 1.68].
<!-- /results -->
"""


@pytest.mark.parametrize("plant, problem", [
    (None, None),
    (("| -0.041 | 1.04 [0.48, 1.68] |", "| -0.041 | 1.52 [0.91, 2.16] |"), "not read from the files' row 'static_awr'"),
    (("| 0.432 [0.423, 0.440] | -0.041 |", "| 0.432 [0.423, 0.440] | 0.432 |"), "come from different columns"),
    (("| 1.04 [0.48, 1.68] |\n", "| 1.04 [0.48, 1.69] |\n"), "not all in records"),
    (("is 1.04 [0.48, 1.68].", "is 1.04 [0.91, 2.16]."), "not one record's value and bounds"),
    (("is 1.04 [0.48, 1.68].", "is 1.05."), "1.05 is not in the named files"),
])
def test_a_planted_misquote_fails_at_its_level(tmp_path, plant, problem):
    """GIVEN a shipped CSV and a page quoting it correctly WHEN one quote is changed to a number
    that is still in the file but at another row, at another column, an interval bound that is in
    no record with its value, a prose interval from another row, or a number in no file THEN the
    check names that problem (and with no plant, none)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "runs.csv").write_text(CSV)
    page = TABLE if plant is None else TABLE.replace(*plant, 1)
    assert page != TABLE or plant is None
    (tmp_path / "page.md").write_text(page)
    found = check_page(tmp_path, "page.md")
    if problem is None:
        assert found == {}
    else:
        assert any(problem in p for ps in found.values() for p in ps), found


def test_a_block_citing_a_missing_file_fails(tmp_path):
    (tmp_path / "page.md").write_text("<!-- results: nowhere.csv -->\n0.5\n<!-- /results -->\n")
    assert "not shipped" in check_page(tmp_path, "page.md")["nowhere.csv"][0]


@pytest.mark.parametrize("page", PAGES)
def test_no_zero_width_interval_is_quoted(page):
    """A value that does not vary over its replicates is written as such ("constant"), never as a
    zero-width interval "x [x, x]"."""
    text = (ROOT / page).read_text(encoding="utf-8")
    zero = [m.group(0) for m in re.finditer(r"(-?\d+\.\d+) \[(-?\d+\.\d+), (-?\d+\.\d+)\]", text)
            if float(m.group(1)) == float(m.group(2)) == float(m.group(3))]
    assert not zero, f"{page}: {zero}"
