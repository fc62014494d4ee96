"""Every reference to a doc in code, docs and notebooks names a file of this repository, and a
section of it that exists (``docs/theory.md §3``, ``docs/pipeline.md "Measurements"``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REF = re.compile(r'(docs/[\w.-]+\.md)(?: §(\d+)| "([^"]+)")?')
FOREIGN = re.compile(r"\b(THEORY|PIPELINE|STYLE)\.md\b")


def _sources() -> list[Path]:
    return [p for p in ROOT.rglob("*") if p.suffix in (".py", ".md", ".ipynb") and ".git" not in p.parts
            and "results" not in p.parts and p.name != "test_doc_references.py"]


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
