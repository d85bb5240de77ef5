"""Where a SIGKILL landed: named from the last marker line the killed process wrote
(benchmarks/chaos_observer.py) and, for checkpoint writes and evaluations, from the files its
save had left on disk."""

from __future__ import annotations

from benchmarks.chaos_logdir import folder_entries, latest_checkpoint_step
from benchmarks.chaos_processes import Process

MOMENTS = ("start-up", "training steps", "evaluation", "checkpoint write", "between jobs")


def moment(process: Process, logdir: str) -> str:
    """`start-up` (before `run`: imports, building, restoring; or before the first `trained`:
    the first compiled loop, which traces the step and skips the data to the restored
    position), `training steps`, `evaluation`, `checkpoint write`, or `between jobs`
    (summaries, progress)."""
    events = process.events()
    if not any(e.name == "run" for e in events):
        return "start-up (imports, building, restoring)"
    if not any(e.name == "trained" for e in events):
        return "start-up (first compiled loop: tracing)"
    last = events[-1]
    if last.name == "save":
        return f"checkpoint write ({checkpoint_files(logdir, last.step)})"
    if last.name == "eval":
        detail = best_checkpoint_files(logdir, last.step)
        return "evaluation" + (f" ({detail})" if detail else "")
    return "training steps" if last.name == "train" else "between jobs"


def checkpoint_files(logdir: str, step: int) -> str:
    """What a killed save of ckpt-`step` left in LOGDIR/checkpoints."""
    names = folder_entries(logdir, "checkpoints")
    if f"ckpt-{step}_temp" in names:
        return f"ckpt-{step}_temp/ on disk"
    if latest_checkpoint_step(logdir) == step:
        return f"ckpt-{step} written and named latest"
    if f"ckpt-{step}.index" in names:
        return f"ckpt-{step} written, not yet named latest"
    return "nothing of it on disk yet"


def best_checkpoint_files(logdir: str, step: int) -> str:
    """Whether a killed evaluation at `step` was saving a new best checkpoint (numbered by it)."""
    names = folder_entries(logdir, "checkpoints_best")
    return "best checkpoint being written" if f"ckpt-{step}_temp" in names else ""
