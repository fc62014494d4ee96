"""Side-by-side benchmarks (``python -m benchmarks.X``); never part of the test suite.

Every benchmark follows the experiments' command-line convention (``--help``, ``--preset smoke`` /
``default``, ``--config``, ``--out-dir``, ``--seed``, ``--threads``), times every compared
implementation in the same run, and writes ``results.json`` (config, environment, rows) and
``results.md`` under ``results/benchmarks/<name>/<preset>/``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from shiftbounds.utils.io import atomic_write_text, markdown_table, run_environment, write_json


def best_time(fn: Callable[[], Any], repeats: int, *, warmup: bool = False) -> float:
    """Smallest wall time of ``repeats`` calls (seconds), after one untimed call if ``warmup``;
    CUDA work is synchronised around each call."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    if warmup:
        fn()
    best = float("inf")
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def write_report(out_dir: str | Path, cfg: Any, title: str, rows: Sequence[dict], notes: str = "") -> dict:
    """Write ``results.json`` and ``results.md`` (a table of ``rows`` and ``notes``); returns the JSON dict."""
    out = Path(out_dir)
    results = {"config": cfg, "environment": run_environment(), "rows": list(rows)}
    write_json(out / "results.json", results)
    atomic_write_text(out / "results.md", f"# {title}\n\n" + markdown_table(rows) + (f"\n{notes}\n" if notes else ""))
    print((out / "results.md").read_text())
    print(f"wrote {out}/results.md and results.json")
    return results
