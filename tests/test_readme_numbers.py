"""Every number the README or a doc quotes inside a ``<!-- results: FILE ... -->`` block equals a
number in one of the named shipped results files, at the precision it is quoted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- results: ([^>]+?) -->(.*?)<!-- /results -->", re.S)
NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?![\w.])")
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)]


@pytest.mark.parametrize("page", PAGES)
def test_quoted_numbers_match_shipped_results(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    if page == "docs/results.md":  # the README's numbers are its claims table, checked by tests/test_claims.py
        assert blocks, f"{page} marks no results block"
    for files, body in blocks:
        paths = [ROOT / f for f in files.split()]
        missing = [str(p) for p in paths if not p.is_file()]
        assert not missing, f"{page} cites results files that are not shipped: {missing}"
        pool = [v for p in paths for v in _numbers(p.read_text(encoding="utf-8"))]
        quoted = NUMBER.findall(body)
        assert quoted
        for q in quoted:
            d = len(q.split(".")[1])
            assert any(abs(round(v, d) - float(q)) < 10 ** -(d + 3) for v in pool), f"{page}: {q} is not in {files}"


@pytest.mark.parametrize("page", PAGES)
def test_no_zero_width_interval_is_quoted(page):
    """A value that does not vary over its replicates is written as such ("constant"), never as a
    zero-width interval "x [x, x]"."""
    text = (ROOT / page).read_text(encoding="utf-8")
    zero = [m.group(0) for m in re.finditer(r"(-?\d+\.\d+) \[(-?\d+\.\d+), (-?\d+\.\d+)\]", text)
            if float(m.group(1)) == float(m.group(2)) == float(m.group(3))]
    assert not zero, f"{page}: {zero}"
