"""Atomic results files: JSON, CSV and Markdown tables, and checkpointed stages.

A file is written to a temporary sibling and renamed into place, so a killed run never leaves a
half-written result; readers see the old file or the new one.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np


def _jsonable(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        return _jsonable(asdict(x))
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else str(v)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, Path):
        return str(x)
    return x


def _atomic_replace(path: str | os.PathLike, write) -> Path:
    """Call ``write(tmp_path)`` on a temporary sibling of ``path``, then rename it into place;
    the temporary file is removed if anything fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temporary file in the same folder, then rename)."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    return _atomic_replace(path, write)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Atomically write ``obj`` (dataclasses, arrays and NumPy scalars allowed) as indented JSON."""
    return atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file; the error names the file when it is not valid JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc})") from exc


def write_csv(path: str | os.PathLike, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Atomically write a list of dicts as CSV (columns in first-seen order)."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _jsonable(v) for k, v in row.items()})
    return atomic_write_text(path, buf.getvalue())


def format_cell(v: Any, digits: int = 4) -> str:
    """A compact string for a table cell (floats to ``digits`` significant digits; ``None``, a
    value that cannot be measured, as an em dash)."""
    if v is None:
        return "—"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{digits}g}"
    return str(v)


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Iterable[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table of ``rows``."""
    cols = list(columns) if columns is not None else list(rows[0]) if rows else []
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(format_cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` to a temporary sibling, then rename: a killed run leaves no half-written checkpoint."""
    import torch

    return _atomic_replace(path, lambda tmp: torch.save(obj, tmp))


def guard_resume(folder: str | os.PathLike, config: Any, ignore: Iterable[str] = ("out_dir", "device")) -> None:
    """Refuse to resume saved stages computed under other settings.

    The first call records ``config`` as ``<folder>/config.json``; a later call compares the two and
    raises ``ValueError`` naming every setting that changed. ``config`` is a mapping or a config
    dataclass; the keys in ``ignore``, and a dataclass's fields marked ``metadata={"resume":
    False}``, never matter to what a stage computes and are left out. A folder of stages with no
    record yet is adopted as it is.
    """
    skip = set(ignore)
    if is_dataclass(config) and not isinstance(config, type):
        skip |= {f.name for f in fields(config) if f.metadata.get("resume", True) is False}
        config = asdict(config)
    path = Path(folder) / "config.json"
    now = {k: v for k, v in _jsonable(dict(config)).items() if k not in skip}
    if path.exists():
        saved = {k: v for k, v in read_json(path).items() if k not in skip}
        changed = sorted(k for k in set(now) | set(saved) if now.get(k) != saved.get(k))
        if changed:
            diffs = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in changed)
            raise ValueError(f"{folder} holds stages computed under other settings ({diffs}); "
                             "pass a fresh --out-dir or delete that folder to start over")
    else:
        write_json(path, now)
