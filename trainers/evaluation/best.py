"""`--eval_every`: evaluate during training, log `eval/*` scalars, and keep the best checkpoint.

What is evaluated, and how results rank, is the setup's (`Setup.periodic_evaluation`); this job
owns the when and the bookkeeping: the best checkpoint in LOGDIR/checkpoints_best and `best.json`
beside it, which carries the best selection value (under "score") across resumes.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

import tensorflow as tf
from absl import logging

from datasets import files
from trainers.engine.checkpoints import RunCheckpoints
from trainers.engine.controller import LoopReport, PeriodicAction
from trainers.evaluation import tags
from trainers.outputs import actions

BEST_RECORD = "best.json"
# best.json's key of the best selection value: the name older runs' records use.
SELECTION_KEY = "score"


def best_checkpoint_job(*, every: int, evaluate: Callable[[], dict[str, Any]],
                        selection: Callable[[dict[str, Any]], float],
                        checkpoint: tf.train.Checkpoint, best_directory: str, is_chief: bool,
                        worker: int) -> PeriodicAction:
    """Every `every` cycles: `evaluate()`, its numbers as `eval/*` scalars (`tags.eval_scalars`),
    and a checkpoint in `best_directory` when `selection(results)` (lower is better) beats the
    best so far.

    Lists (per-class values) go to the log line and best.json, not to TensorBoard.
    """
    best = RunCheckpoints(checkpoint, best_directory, max_to_keep=1, is_chief=is_chief, worker=worker)
    if is_chief:  # the run's lock is held: nobody else saves here
        best.remove_unfinished()
    record_path = os.path.join(best_directory, BEST_RECORD)
    previous = files.read_json(
        record_path, holds="the best evaluation so far, its selection value and its step",
        fix="Move it away: the next evaluation starts a new best record (the checkpoint "
            "beside it is then replaced by the next best one).") or {}

    def run(report: LoopReport) -> None:
        results = evaluate()
        actions.log_scalars(report, tags.eval_scalars(results))
        value = selection(results)
        if math.isfinite(value) and value < previous.get(SELECTION_KEY, math.inf):
            best.save(checkpoint_number=report.step)
            previous.update({SELECTION_KEY: value, "step": report.step, **results})
            if is_chief:
                files.write_json(record_path, previous)
        logging.info("Evaluation at step %d: %s", report.step, results)

    return PeriodicAction(name="evaluation", every=every, fn=run)
