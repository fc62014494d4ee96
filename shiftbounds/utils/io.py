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
import platform
import subprocess
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from shiftbounds.utils.configs import earlier_values, flat_dict


def _jsonable(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        return _jsonable(flat_dict(x))
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


def atomic_replace(path: str | os.PathLike, write) -> Path:
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

    return atomic_replace(path, write)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Atomically write ``obj`` (dataclasses, arrays and NumPy scalars allowed) as indented JSON."""
    return atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n")


def jsonl_records(path: str | os.PathLike, error: type[Exception] = ValueError):
    """Yield ``(where, record)`` for every non-blank line of a UTF-8 JSONL file (a leading byte-order
    mark is allowed), ``where`` being ``"<path>:<line>"``; a line that is not JSON, or bytes that are
    not UTF-8, raise ``error`` naming the line."""
    raw = Path(path).read_bytes()
    for lineno, chunk in enumerate(raw.split(b"\n"), 1):
        try:
            line = chunk.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{path}:{lineno}: not UTF-8 (byte {chunk[exc.start:exc.start + 1]!r} at column {exc.start + 1}); "
                        "save the file as UTF-8") from None
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            yield where, json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc


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
    """``torch.save`` to a temporary sibling, then rename: a killed run leaves no half-written checkpoint.
    Serialised in memory first, so the archive's record names do not carry the temporary file's
    random name: the same object gives the same bytes."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return atomic_replace(path, lambda tmp: Path(tmp).write_bytes(buf.getvalue()))


def run_environment() -> dict[str, Any]:
    """What a results folder records about the software and machine that made it: package, Python,
    NumPy, torch and (when installed) transformers / TRL versions, the git commit of the package's
    checkout when there is one, the devices, the CPU model, torch's CPU kernel level and thread count."""
    def version(pkg: str) -> str | None:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    root = Path(__file__).resolve().parents[2]
    commit = None
    if (root / ".git").exists():
        try:
            commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                    timeout=10, check=True).stdout.strip()
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            commit += "+dirty" if dirty else ""
        except (OSError, subprocess.SubprocessError):
            commit = None
    return {
        "shiftbounds": version("shiftbounds"), "git_commit": commit, "python": platform.python_version(),
        "numpy": np.__version__, "torch": torch.__version__, "transformers": version("transformers"),
        "trl": version("trl"), "cuda_available": torch.cuda.is_available(),
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "cpu_model": _cpu_model(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def _cpu_model() -> str | None:
    """The processor's model name (``/proc/cpuinfo`` on Linux, ``platform.processor()`` elsewhere):
    torch may round differently on another CPU type, so a results folder records which one made it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _skipped(config: Any, ignore: Iterable[str]) -> set[str]:
    skip = set(ignore)
    if is_dataclass(config) and not isinstance(config, type):
        skip |= {f.name for f in fields(config) if f.metadata.get("resume", True) is False}
    return skip


class StaleFolderError(ValueError):
    """A results folder holds results computed under other settings (raised by :func:`guard_resume`)."""


# what a run's rounding depends on beyond its settings and thread count: a folder resumed where one of
# these differs is reused with a warning, and the earlier environment is kept
ROUNDING_ENVIRONMENT = ("cpu_model", "torch_cpu_capability", "cuda_device", "numpy", "torch", "transformers", "trl")


def guard_resume(folder: str | os.PathLike, config: Any, ignore: Iterable[str] = (), environment: Iterable[str] = (),
                 legacy: Mapping[str, Any] | None = None) -> Path:
    """Open ``folder`` for a run of ``config``: refuse it when it was made under settings that change
    results, then (re)write ``<folder>/config.json``.

    ``config.json`` holds ``{"config": <every field>, "environment": run_environment()}``; it can be
    passed back with ``--config`` to rerun. ``config`` is a config dataclass (or a mapping). The
    fields marked ``metadata={"resume": False}`` (and the keys in ``ignore``) never change what the
    run computes — the output folder, say, or which of several cached sweeps to tabulate — so they
    may differ; any other difference raises :class:`StaleFolderError` naming each changed setting with its
    saved and new value. ``environment`` names keys of :func:`run_environment` that change results
    too and must match the saved ones (``"torch_threads"`` for a run that trains in one process on
    several threads: torch's rounding depends on the thread count). ``legacy`` maps a setting added
    after some folders were made to the value those folders were computed with (their
    ``config.json`` lacks it). A folder made on another CPU model or other package versions
    (:data:`ROUNDING_ENVIRONMENT`) is reused with a warning, since rounding may differ, and its
    earlier environment is kept in ``config.json`` under ``earlier_environments``. This is the one guard of every experiment; a folder without a
    ``config.json`` is adopted. Temporary files of atomic writes that a killed run left behind
    (``.<name>.<random>.tmp``, never a result) are removed.
    """
    path = Path(folder) / "config.json"
    is_config = is_dataclass(config) and not isinstance(config, type)
    full = flat_dict(config) if is_config else dict(config)
    legacy = {**(earlier_values(type(config)) if is_config else {}), **(legacy or {})}
    skip = _skipped(config, ignore)
    now = {k: v for k, v in _jsonable(full).items() if k not in skip}
    env_now, earlier = run_environment(), []
    if path.exists():
        saved_all = read_json(path)
        saved_cfg = saved_all["config"] if isinstance(saved_all.get("config"), Mapping) else saved_all
        saved = {k: v for k, v in {**_jsonable(dict(legacy or {})), **saved_cfg}.items() if k not in skip}  # as JSON reads it
        changed = sorted(k for k in set(now) | set(saved) if now.get(k) != saved.get(k))
        env_saved = saved_all.get("environment") or {}
        for k in sorted(k for k in environment if k in env_saved and env_saved[k] != env_now.get(k)):
            changed.append(k)
            saved[k], now[k] = env_saved[k], env_now.get(k)
        if changed:
            diffs = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in changed)
            raise StaleFolderError(f"{folder} holds results computed under other settings ({diffs}); "
                             "pass a fresh --out-dir or delete that folder to start over")
        earlier = list(saved_all.get("earlier_environments") or [])
        moved = [k for k in ROUNDING_ENVIRONMENT if k in env_saved and env_saved[k] != env_now.get(k)]
        if moved:
            earlier.append(env_saved)
            diffs = ", ".join(f"{k}: saved {env_saved[k]!r}, now {env_now.get(k)!r}" for k in moved)
            warnings.warn(f"{folder} was started on another machine or software ({diffs}); what it saved is reused, and "
                          "what is computed here may round differently, so its results need not be the bytes one "
                          "uninterrupted run on either gives (the earlier environment is kept in config.json)", stacklevel=2)
    for orphan in Path(folder).rglob(".*.tmp"):  # from atomic_replace of a killed process
        orphan.unlink()
    write_json(path, {"config": full, "environment": env_now, **({"earlier_environments": earlier} if earlier else {})})
    return path
