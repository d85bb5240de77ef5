"""A progress line: step, losses, images/s and time left (to --train_cycles at the recent pace,
or of the --train_time budget, whichever ends first).

On a terminal it prints at most every `tty_seconds`; when output is not a terminal (CI, log
files) it prints every `log_seconds` so logs stay short. The first and last loops always print.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

from trainers.engine.controller import LoopReport


def format_seconds(seconds: float) -> str:
    """Compact h:mm:ss / m:ss for time-left estimates."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Callable for a `PeriodicAction` that runs after every loop."""

    def __init__(self, *, total_steps: int | None, stream: TextIO | None = None,
                 tty_seconds: float = 2.0, log_seconds: float = 30.0,
                 clock: Callable[[], float] = time.monotonic,
                 time_left: Callable[[], float] | None = None):
        """`total_steps` None: no cycle limit (the line shows the step alone); `time_left`
        gives the seconds left of a time budget (None: none)."""
        self.total_steps = total_steps
        self.time_left = time_left
        self.stream = stream or sys.stdout
        self.clock = clock
        interactive = getattr(self.stream, "isatty", lambda: False)()
        self.min_interval = tty_seconds if interactive else log_seconds
        self._last_print: float | None = None
        self._recent: list[tuple[int, float]] = []

    def __call__(self, report: LoopReport) -> None:
        now = self.clock()
        self._recent = (self._recent + [(report.step, now)])[-20:]
        due = (self._last_print is None or report.final
               or now - self._last_print >= self.min_interval)
        if not due:
            return
        self._last_print = now
        print(self.line(report), file=self.stream, flush=True)

    def line(self, report: LoopReport) -> str:
        losses = " ".join(f"{label}={value:.4f}" for label, value in _losses(report.output.metrics))
        estimates = [] if self.time_left is None else [self.time_left()]
        if self.total_steps is not None and len(self._recent) >= 2:
            (first_step, first_time), (last_step, last_time) = self._recent[0], self._recent[-1]
            if last_step > first_step:
                rate = (last_time - first_time) / (last_step - first_step)
                estimates.append(rate * (self.total_steps - report.step))
        left = format_seconds(min(estimates)) if estimates else "?"
        step = report.step if self.total_steps is None else f"{report.step}/{self.total_steps}"
        return f"step {step} {losses} {self._speed(report)} left {left}"

    def _speed(self, report: LoopReport) -> str:
        """Real images per second; cycles per second for a run no phase of which reads data
        (dfad: its images are generated), where images/s would always read 0."""
        if report.images_per_second > 0 or report.seconds <= 0:
            return f"{report.images_per_second:.0f} img/s"
        cycles = report.step - (self._recent[-2][0] if len(self._recent) >= 2 else 0)
        return f"{cycles / report.seconds:.1f} cycles/s"


def _losses(metrics) -> list[tuple[str, float]]:
    """("d_loss", value) pairs: each phase's loss by its initial, or, for a phase that reports
    one loss per model (`loss_<model>`, the simultaneous update), each model's by its initial."""
    split = [(name.split("/", 1), value) for name, value in sorted(metrics.items()) if "/" in name]
    per_model = {phase for (phase, key), _ in split
                 if key.startswith("loss_") and not key.startswith("loss_scale")}
    pairs = []
    for (phase, key), value in split:
        if key == "loss" and phase not in per_model:
            pairs.append((f"{phase[0]}_loss", value))
        elif phase in per_model and key.startswith("loss_") and not key.startswith("loss_scale"):
            pairs.append((f"{key[len('loss_')][0]}_loss", value))
    return pairs
