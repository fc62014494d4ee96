"""The README's API example runs as written."""

from __future__ import annotations

import re
from pathlib import Path


def test_readme_api_example_runs(capsys):
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = re.search(r"## The API in ten lines\n\n```python\n(.*?)```", text, re.S).group(1)
    assert len([l for l in block.splitlines() if l.strip()]) <= 12
    exec(compile(block, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip()
