"""Independent jobs in parallel worker processes, with results that do not depend on how many.

Each job runs on exactly one torch thread, in a spawned process (not forked: CUDA and macOS need
spawn) or, with one worker, in this process; torch's rounding depends on its thread count, and RL
training amplifies rounding differences, so one thread per job is what makes a run's outputs the
same bytes whatever the number of workers. What crosses a process boundary is pickled: the job
function must be a module-level function and its arguments plain data (e.g. a frozen config).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from shiftbounds.utils.progress import Progress


def default_workers() -> int:
    """Every core of the machine (at least 1)."""
    return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Within the block torch computes on one intra-op thread; the previous count is restored."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def run_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int, *, label: str = "jobs") -> list[Any]:
    """``[fn(*job) for job in jobs]``, in the jobs' order, on ``workers`` processes (``1``: here),
    each job on one torch thread; progress with ETA as jobs finish.

    Raises:
        ValueError: ``workers < 1``.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    prog = Progress(len(jobs), label)
    if workers == 1 or len(jobs) <= 1:
        out = []
        with one_torch_thread():
            for job in jobs:
                out.append(fn(*job))
                prog.update(1, note=f"{job[1:]} done")
        return out
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=ctx, initializer=_init_worker) as pool:
        futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        results: list[Any] = [None] * len(jobs)
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            prog.update(1, note=f"{jobs[i][1:]} done")
    return results
