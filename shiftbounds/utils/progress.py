"""Terminal progress with ETA, for long loops (no global state; one object per loop)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from transformers import PrinterCallback, TrainerCallback


def format_seconds(seconds: float) -> str:
    """``"1h02m"``, ``"3m07s"`` or ``"12s"``."""
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    """Prints ``[label] i/n  elapsed  ETA  note`` at most every ``min_interval`` seconds.

    The ETA assumes the remaining steps cost what the finished ones did on average.
    """

    def __init__(self, total: int, label: str, stream: TextIO | None = None, min_interval: float = 1.0,
                 enabled: bool = True) -> None:
        if total < 0:
            raise ValueError(f"total must be >= 0; got {total}")
        self.total, self.label = total, label
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval, self.enabled = min_interval, enabled
        self.done = 0
        self._start = time.perf_counter()
        self._last = -float("inf")

    def update(self, n: int = 1, note: str = "") -> None:
        """Mark ``n`` more steps finished and print when due (always on the last step)."""
        self.done += n
        now = time.perf_counter()
        if not self.enabled or (now - self._last < self.min_interval and self.done < self.total):
            return
        self._last = now
        elapsed = now - self._start
        eta = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        eta_s = format_seconds(eta) if self.done else "?"
        self.stream.write(
            f"[{self.label}] {self.done}/{self.total}  elapsed {format_seconds(elapsed)}  ETA {eta_s}  {note}\n"
        )
        self.stream.flush()


def attach_progress(trainer, label: str, stream: TextIO | None = None, min_interval: float = 10.0):
    """Replace a ``transformers.Trainer``'s per-log printing (``PrinterCallback``, which prints every
    logged dict) with one :class:`Progress` line per ``min_interval`` seconds: step, elapsed, ETA and
    the last logged loss or reward. Only the main process prints. Returns ``trainer``.

    A step that logs is counted once its log arrives (the trainer calls ``on_step_end`` before
    ``on_log``), so a line shows the loss of the step it counts."""
    class _ProgressCallback(TrainerCallback):
        def __init__(self) -> None:
            self.progress: Progress | None = None
            self.note, self.pending = "", False

        def on_train_begin(self, args, state, control, **kwargs):
            self.progress = Progress(state.max_steps, label, stream=stream, min_interval=min_interval,
                                     enabled=state.is_world_process_zero)

        def on_step_end(self, args, state, control, **kwargs):
            self.pending = control.should_log
            if self.progress is not None and not self.pending:
                self.progress.update(note=self.note)

        def on_log(self, args, state, control, logs=None, **kwargs):
            shown = [f"{k} {logs[k]:.4g}" for k in ("loss", "reward") if isinstance((logs or {}).get(k), (int, float))]
            self.note = ", ".join(shown) or self.note
            if self.progress is not None and self.pending:
                self.pending = False
                self.progress.update(note=self.note)

    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(_ProgressCallback())
    return trainer
