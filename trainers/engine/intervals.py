"""Pure helpers that decide when periodic work happens.

The controller owns every interval; these functions are its whole arithmetic, so they are
tested on their own. An interval of 0 means "never".
"""

from __future__ import annotations

from typing import Iterable


def fires(step: int, every: int) -> bool:
    """Whether a job with period `every` is due at `step` (a multiple of the period)."""
    return every > 0 and step > 0 and step % every == 0


def next_stop(step: int, *, total: int | None, cycles_per_loop: int, intervals: Iterable[int]
              ) -> int:
    """The step at which the next compiled loop should end.

    At most `cycles_per_loop` ahead, never past `total` (None: no total, a run that only a time
    budget ends), and never past the next multiple of any interval, so that periodic jobs fire
    exactly on their steps.
    """
    if total is not None and step >= total:
        raise ValueError(f"step {step} is already at or past the total {total}.")
    stop = step + cycles_per_loop if total is None else min(total, step + cycles_per_loop)
    for every in intervals:
        if every > 0:
            stop = min(stop, (step // every + 1) * every)
    return stop
