"""`--train_time`: a wall-clock budget for training, kept across resumes.

The seconds a run has trained are recorded in LOGDIR/train_time.json, one entry per
checkpoint step, written (atomically) just before that checkpoint is saved. A resume reads the
entry of the step it restored, so it trains only the time left; a crash between the two
writes leaves an entry no checkpoint uses, never a wrong one.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from datasets import files

TIME_RECORD_FILE = "train_time.json"


class TimeBudget:
    """`seconds` of training over the whole run, `used` of them before this process started.

    `clock` is injectable so tests need not sleep; training time starts at `start()`.
    """

    def __init__(self, *, seconds: float, used: float = 0.0, logdir: str | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if seconds <= 0:
            raise ValueError(f"a time budget of {seconds!r} seconds must be positive.")
        self.seconds = seconds
        self.used = used
        self.logdir = logdir
        self.clock = clock
        self._began: float | None = None

    @classmethod
    def resumed(cls, *, seconds: float, logdir: str, step: int,
                clock: Callable[[], float] = time.monotonic) -> "TimeBudget":
        """The budget of the run in `logdir` restored at `step` (nothing used at step 0)."""
        return cls(seconds=seconds, used=used_at(logdir, step), logdir=logdir, clock=clock)

    def start(self) -> None:
        self._began = self.clock()

    def elapsed(self) -> float:
        """Seconds of training so far, this process's and the recorded ones."""
        if self._began is None:
            return self.used
        return self.used + self.clock() - self._began

    def left(self) -> float:
        """Seconds of the budget not used yet (0 once spent)."""
        return max(self.seconds - self.elapsed(), 0.0)

    def share_used(self) -> float:
        """The share of the budget used so far, 0 to 1 (what a decaying rate follows)."""
        return min(self.elapsed() / self.seconds, 1.0)

    def spent(self) -> bool:
        return self.elapsed() >= self.seconds

    def record(self, step: int) -> None:
        """Records the seconds used at `step`, whose checkpoint is about to be saved."""
        if self.logdir is None:
            return
        path = os.path.join(self.logdir, TIME_RECORD_FILE)
        entries = _read(path)
        entries[str(step)] = round(self.elapsed(), 3)
        files.write_json(path, entries)


def used_at(logdir: str, step: int) -> float:
    """Training seconds recorded for the checkpoint at `step` (0 when none: a new run, or a run
    trained without --train_time)."""
    return float(_read(os.path.join(logdir, TIME_RECORD_FILE)).get(str(step), 0.0))


def _read(path: str) -> dict[str, float]:
    return files.read_json(
        path, holds="the training seconds used at each checkpoint (--train_time)",
        fix="Delete it to count the time from this resume on") or {}
