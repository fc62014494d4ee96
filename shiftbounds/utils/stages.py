"""One stage cache for every experiment: a finished stage is loaded from disk, not recomputed.

A run is a sequence of named stages (an SFT model, a calibrated simulator, a measurement ...).
:class:`StageCache` keeps each stage's output under one folder, ``<name>.json`` or ``<name>.pt``,
written atomically once the stage has finished, so a run killed at any point and started again
recomputes only the stages that had not finished. That a folder belongs to the same settings is
checked once per run by :func:`shiftbounds.utils.io.guard_resume`; the stages must draw from
generators keyed by their own names (:mod:`shiftbounds.utils.seeding`), so that a loaded stage
and a recomputed one are interchangeable.

Each saved stage's wall seconds are kept beside it, under ``timings/<name>.json``, so the cost of
a run that was stopped and resumed is known stage by stage, whichever call computed each.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from shiftbounds.utils.io import read_json, write_json

T = TypeVar("T")


class StageCache:
    """Stages saved under ``folder``.

    Args:
        folder: where ``<name>.json`` / ``<name>.pt`` live (created on the first save).
        save: ``False`` computes without writing (e.g. every process but the main one of a
            distributed run).
        barrier: waits for every process of a distributed run (folder stages finish together).

    Attributes:
        seconds: wall seconds of every stage computed (not loaded) through this cache.
    """

    SECONDS = "timings"  # no stage has this name

    def __init__(self, folder: str | Path, *, save: bool = True, barrier: Callable[[], None] = lambda: None) -> None:
        self.folder = Path(folder)
        self.save = save
        self.barrier = barrier
        self.seconds: dict[str, float] = {}

    def _stage(self, path: Path, make: Callable[[], T], load: Callable[[Path], T], save: Callable[[T, Path], None]) -> T:
        """``load(path)`` if it exists, else ``make()`` (timed) and, when saving, ``save(value, path)``."""
        if path.exists():
            return load(path)
        t0 = time.perf_counter()
        value = make()
        seconds = time.perf_counter() - t0
        if self.save:
            save(value, path)
        self._record(path.stem, seconds)
        return value

    def _record(self, name: str, seconds: float) -> None:
        """``seconds`` for the stage ``name`` in :attr:`seconds` and, when saving, beside the stage."""
        self.seconds[name] = seconds
        if self.save:
            write_json(self.folder / self.SECONDS / f"{name}.json", seconds)

    def saved_seconds(self) -> dict[str, float]:
        """Wall seconds of every stage saved under this folder by any call (sorted by name); a stage
        saved before its seconds were kept is absent."""
        kept = sorted((self.folder / self.SECONDS).glob("*.json"))
        return {p.stem: read_json(p) for p in kept if self.saved(p.stem)}

    def saved(self, name: str) -> bool:
        """Whether the stage ``name`` is saved, as a ``<name>/`` folder, ``<name>.json`` or ``<name>.pt``."""
        return (self.folder / name).is_dir() or any((self.folder / f"{name}{ext}").is_file() for ext in (".json", ".pt"))

    def json(self, name: str, make: Callable[[], Any]) -> Any:
        """``<name>.json`` if it exists, else ``make()`` written there (a JSON-able value)."""
        return self._stage(self.folder / f"{name}.json", make, read_json, lambda value, path: write_json(path, value))

    def torch(self, name: str, make: Callable[[], T], *, load: Callable[[Path], T],
              save: Callable[[T, Path], None]) -> T:
        """``load(<name>.pt)`` if it exists, else ``make()`` saved there with ``save(value, path)``
        (which must write atomically, e.g. :func:`shiftbounds.nn.transformer.save_model`)."""
        return self._stage(self.folder / f"{name}.pt", make, load, save)

    def folder_stage(self, name: str, make: Callable[[Path], Any]) -> Path:
        """The folder ``<name>/`` if it exists, else ``make(tmp)`` writing a model folder (a
        simulator, an agent) into a temporary sibling, which is then renamed to ``<name>/``: a
        folder under its final name is always complete."""
        path = self.folder / name
        if path.is_dir():
            return path
        tmp = self.folder / f".{name}.partial"
        if self.save and tmp.exists():
            shutil.rmtree(tmp)
        self.barrier()
        t0 = time.perf_counter()
        make(tmp)
        seconds = time.perf_counter() - t0
        self.barrier()
        if self.save:
            tmp.rename(path)
        self._record(name, seconds)
        self.barrier()
        return path
