"""`--eval_every`: evaluate during training, log `eval/*` scalars, and keep the best checkpoint.

What is scored, and how results rank, is the setup's (`Setup.scorer`); this job owns the
when and the bookkeeping: the best checkpoint in LOGDIR/checkpoints_best and `best.json` beside
it, which carries the best score across resumes.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable

import tensorflow as tf
from absl import logging

from trainers.engine.checkpoints import RunCheckpoints
from trainers.engine.controller import LoopReport, PeriodicAction
from trainers.outputs import summaries
from trainers.outputs.images import write_atomically

BEST_RECORD = "best.json"


def best_checkpoint_job(*, every: int, score: Callable[[], dict[str, Any]],
                        selection: Callable[[dict[str, Any]], float],
                        checkpoint: tf.train.Checkpoint, best_directory: str, is_chief: bool,
                        worker: int) -> PeriodicAction:
    """Every `every` cycles: `score()`, its numbers as `eval/*` scalars, and a checkpoint in
    `best_directory` when `selection(results)` (lower is better) beats the best so far.

    Lists (per-class values) go to the log line and best.json, not to TensorBoard.
    """
    best = RunCheckpoints(checkpoint, best_directory, max_to_keep=1, is_chief=is_chief, worker=worker)
    record_path = os.path.join(best_directory, BEST_RECORD)
    previous = {}
    if os.path.exists(record_path):
        with open(record_path) as file:
            previous = json.load(file)

    def run(report: LoopReport) -> None:
        results = score()
        summaries.write_scalars({f"eval/{key}": value for key, value in results.items()
                                 if not isinstance(value, list)}, step=report.step)
        value = selection(results)
        if math.isfinite(value) and value < previous.get("score", math.inf):
            best.save(checkpoint_number=report.step)
            previous.update(score=value, step=report.step, **results)
            if is_chief:
                record = json.dumps(previous, indent=2, sort_keys=True).encode()
                write_atomically(record_path, lambda handle: handle.write(record))
        logging.info("Evaluation at step %d: %s", report.step, results)

    return PeriodicAction(name="evaluation", every=every, fn=run)
