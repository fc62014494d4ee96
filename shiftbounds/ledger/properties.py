"""How the property tests of the theorems decided: run them with hypothesis's observability output
(one JSON line per drawn test case) and count, per test, the instances drawn, how many passed, and
the share that is non-trivial (every size >= 2; *material*: the bounds say something there)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

SIZES = re.compile(r"^H=(\d+) S=(\d+) A=(\d+)$")


def summarise(records: Iterable[dict]) -> list[dict]:
    """Per property test (in first-seen order): ``cases`` run, of them ``explicit`` (the pinned
    ``@example`` corners), ``passed``, ``failed`` and ``rejected`` (filtered out by an assumption),
    and the shares of the drawn cases that record sizes all >= 2 (``nontrivial``) and are ``material``
    (``None`` where the test's draws record no such event; the pinned corners record none)."""
    by: dict[str, list[dict]] = {}
    for r in records:
        if r.get("type") == "test_case":
            by.setdefault(r["property"], []).append(r)
    out = []
    for prop, cases in by.items():
        sizes = [tuple(int(x) for x in m.groups()) for c in cases for f in c.get("features", {}) for m in [SIZES.match(f)] if m]
        material = [f == "material: True" for c in cases for f in c.get("features", {}) if f.startswith("material: ")]
        passed, failed = sum(c["status"] == "passed" for c in cases), sum(c["status"] == "failed" for c in cases)
        out.append({"test": prop, "cases": len(cases), "explicit": sum(c.get("how_generated") == "explicit example" for c in cases),
                    "passed": passed, "failed": failed, "rejected": len(cases) - passed - failed,
                    "nontrivial": sum(min(s) >= 2 for s in sizes) / len(sizes) if sizes else None,
                    "material": sum(material) / len(material) if material else None})
    return out


def observe(tests: Iterable[str], *, seed: int, root: Path) -> list[dict]:
    """Run ``tests`` (paths or node ids under ``root``) in a fresh process with hypothesis's observability
    on and its seed fixed, in a scratch folder (no example database is replayed), and return the
    observed test cases. Raises when pytest fails: a failing property decides nothing here."""
    with tempfile.TemporaryDirectory() as tmp:
        env = os.environ | {"HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY": "1"}
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--hypothesis-seed={seed}",
                f"--rootdir={root}", *(str(root / t) for t in tests)]
        res = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"the property tests failed (exit {res.returncode}):\n{res.stdout[-3000:]}{res.stderr[-2000:]}")
        files = sorted((Path(tmp) / ".hypothesis" / "observed").glob("*_testcases.jsonl"))
        if not files:
            raise RuntimeError("hypothesis wrote no observations (is its observability output available in this version?)")
        return [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
