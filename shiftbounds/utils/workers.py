"""Independent jobs in parallel worker processes, with results that do not depend on how many.

Each job runs on exactly one torch thread, in a spawned process (not forked: CUDA and macOS need
spawn) or, with one worker, in this process; torch's rounding depends on its thread count, and RL
training amplifies rounding differences, so one thread per job is what makes a run's outputs the
same bytes whatever the number of workers. What crosses a process boundary is pickled: the job
function must be a module-level function and its arguments plain data (e.g. a frozen config).

The executor is ``local`` (the processes above) or ``ray`` (:func:`set_executor`, ``--executor ray``
on every entry point): each job then runs as a Ray task with ``num_cpus=1`` on one torch thread, on
the cluster ``ray.init()`` finds (``RAY_ADDRESS``) or a local one, and its result comes back to this
process, so the outputs are the same bytes as the local workers'. Jobs write their stage files
where the entry point tells them (its output folder): on a cluster, that folder must be on storage
every node sees. Worker processes of the local executor exit when this process dies.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

import torch

from shiftbounds.utils.progress import Progress

EXECUTORS = ("local", "ray")
_EXECUTOR = {"name": "local"}


def set_executor(name: str) -> str:
    """Run later :func:`run_graph` / :func:`run_jobs` calls on the executor ``name`` (:data:`EXECUTORS`).

    Raises:
        ValueError: an unknown executor, or ``ray`` when Ray is not installed (``pip install shiftbounds[ray]``).
    """
    if name not in EXECUTORS:
        raise ValueError(f"--executor must be one of {EXECUTORS}; got {name!r}")
    if name == "ray":
        try:
            import ray  # noqa: F401 - an optional extra, imported where it is chosen
        except ImportError as exc:
            raise ValueError("--executor ray needs Ray: pip install 'shiftbounds[ray]'") from exc
    _EXECUTOR["name"] = name
    return name


def executor() -> str:
    """The executor :func:`run_graph` uses now."""
    return _EXECUTOR["name"]


def default_workers() -> int:
    """Every core of the machine (at least 1)."""
    return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Within the block torch computes on one intra-op thread; the previous count is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _init_worker(parent: int | None = None) -> None:
    torch.set_num_threads(1)
    if parent is not None:
        threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """Exit this worker once the process that started it is gone (e.g. killed with -9)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(1)


def _on_one_thread(fn: Callable[..., Any], args: tuple) -> Any:
    """``fn(*args)`` on one torch thread: what a Ray task runs."""
    _init_worker()
    return fn(*args)


def run_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int, *, label: str = "jobs") -> list[Any]:
    """``[fn(*job) for job in jobs]``, in the jobs' order, on ``workers`` processes (``1``: here),
    each job on one torch thread; progress with ETA as jobs finish (:func:`run_graph` with no needs).

    Raises:
        ValueError: ``workers < 1``.
    """
    return list(run_graph(fn, dict(enumerate(jobs)), {}, workers, label=label).values())


def run_graph(fn: Callable[..., Any], jobs: Mapping[Hashable, tuple], needs: Mapping[Hashable, Collection[Hashable]],
              workers: int, *, label: str = "jobs") -> dict[Hashable, Any]:
    """``{key: fn(*jobs[key])}``, each job started as soon as the jobs it ``needs`` have finished (a
    needed key that is not a job counts as finished: e.g. a stage already saved), on ``workers``
    processes (``1``: here, in the jobs' order as far as their needs allow), each job on one torch
    thread; progress with ETA as jobs finish. What a job computes must depend only on its needs'
    outputs, never on which other jobs ran beside it: then the results are the same whatever
    ``workers``.

    Raises:
        ValueError: ``workers < 1``, or jobs that need each other (a cycle).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    pending = {k: {n for n in needs.get(k, ()) if n in jobs and n != k} for k in jobs}
    prog, results = Progress(len(jobs), label), {}

    def ready() -> list:
        return [k for k, left in pending.items() if not left]

    def finished(key) -> None:
        for left in pending.values():
            left.discard(key)
        prog.update(1, note=f"{jobs[key][1:]} done")

    def stuck() -> ValueError:
        return ValueError(f"jobs that need each other cannot run: {sorted(map(str, pending))}")

    if workers == 1 or len(jobs) <= 1:
        with one_torch_thread():
            while pending:
                if not (now := ready()):
                    raise stuck()
                key = now[0]
                del pending[key]
                results[key] = fn(*jobs[key])
                finished(key)
        return {k: results[k] for k in jobs}
    if executor() == "ray":
        return _run_graph_on_ray(fn, jobs, pending, ready, finished, stuck)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=ctx, initializer=_init_worker,
                             initargs=(os.getpid(),)) as pool:
        running: dict = {}
        while pending or running:
            for key in ready():
                del pending[key]
                running[pool.submit(fn, *jobs[key])] = key
            if not running:
                raise stuck()
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                key = running.pop(fut)
                results[key] = fut.result()
                finished(key)
    return {k: results[k] for k in jobs}


def _run_graph_on_ray(fn, jobs, pending, ready, finished, stuck) -> dict:
    """:func:`run_graph`'s loop with every job a Ray task (``num_cpus=1``, one torch thread)."""
    import ray  # an optional extra: imported only when chosen

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False, log_to_driver=False)
    task = ray.remote(num_cpus=1)(_on_one_thread)
    results, running = {}, {}
    while pending or running:
        for key in ready():
            del pending[key]
            running[task.remote(fn, jobs[key])] = key
        if not running:
            raise stuck()
        done, _ = ray.wait(list(running), num_returns=1)
        for ref in done:
            key = running.pop(ref)
            results[key] = ray.get(ref)
            finished(key)
    return {k: results[k] for k in jobs}
