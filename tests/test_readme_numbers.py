"""Every number the README quotes inside a ``<!-- results: FILE ... -->`` block equals a number in
one of the named shipped results files, at the precision it is quoted."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- results: ([^>]+?) -->(.*?)<!-- /results -->", re.S)
NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?![\w.])")


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)]


def test_readme_numbers_match_shipped_results():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = BLOCK.findall(readme)
    assert blocks, "the README marks no results block"
    for files, body in blocks:
        paths = [ROOT / f for f in files.split()]
        missing = [str(p) for p in paths if not p.is_file()]
        assert not missing, f"README cites results files that are not shipped: {missing}"
        pool = [v for p in paths for v in _numbers(p.read_text(encoding="utf-8"))]
        quoted = NUMBER.findall(body)
        assert quoted
        for q in quoted:
            d = len(q.split(".")[1])
            assert any(abs(round(v, d) - float(q)) < 10 ** -(d + 3) for v in pool), f"{q} is not in {files}"
