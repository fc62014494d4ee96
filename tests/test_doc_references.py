"""Every reference to a doc in code, docs and notebooks names a file of this repository, and a
section of it that exists (``docs/theory.md §3``, ``docs/pipeline.md "Measurements"``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REF = re.compile(r'(docs/[\w.-]+\.md)(?: §(\d+)| "([^"]+)")?')
FOREIGN = re.compile(r"\b(THEORY|PIPELINE|STYLE)\.md\b")


def _sources() -> list[Path]:
    """The repository's own files (``git ls-files``): never a virtual environment or other
    untracked folder inside the checkout."""
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True, check=True).stdout
    paths = [ROOT / f for f in tracked.split("\0") if f]
    return [p for p in paths if p.suffix in (".py", ".md", ".ipynb") and p.is_file()
            and "results" not in p.relative_to(ROOT).parts and p.name != "test_doc_references.py"]


def test_every_doc_reference_resolves():
    bad, seen = [], 0
    for src in _sources():
        text = src.read_text(encoding="utf-8")
        if FOREIGN.search(text):
            bad.append(f"{src.relative_to(ROOT)} cites {FOREIGN.search(text).group(0)}, which is not in this repository")
        for m in REF.finditer(text):
            seen += 1
            doc = ROOT / m.group(1)
            if not doc.is_file():
                bad.append(f"{src.relative_to(ROOT)}: {m.group(1)} does not exist")
                continue
            heads = [h.lstrip("#").strip() for h in doc.read_text(encoding="utf-8").splitlines() if h.startswith("#")]
            if m.group(2) and not any(h.startswith(f"{m.group(2)}.") for h in heads):
                bad.append(f"{src.relative_to(ROOT)}: {m.group(1)} has no section §{m.group(2)}")
            if m.group(3) and not any(m.group(3).lower() in h.lower() for h in heads):
                bad.append(f"{src.relative_to(ROOT)}: {m.group(1)} has no section {m.group(3)!r}")
    assert seen > 30 and not bad, "\n".join(bad)
