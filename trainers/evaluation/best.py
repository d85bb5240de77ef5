"""`--eval_every`: evaluate during training, log `eval/*` scalars, and keep the best checkpoint.

What is evaluated, and how results rank, is the setup's (`Setup.periodic_evaluation`); this job
owns the when and the bookkeeping: the best checkpoint in LOGDIR/checkpoints_best and `best.json`
beside it, which carries the best selection value (under "score") across resumes, with the
basis it was measured on (`PeriodicEvaluation.basis`): a resume that measures otherwise (another
`--evaluator`, a retrained domain evaluator, another `--eval_samples`) is refused before
training, since its values would be ranked against ones they do not compare with.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Mapping

import tensorflow as tf
from absl import logging

from datasets import files
from trainers.config.flags import ConfigError
from trainers.engine.checkpoints import RunCheckpoints
from trainers.engine.controller import LoopReport, PeriodicAction
from trainers.evaluation import tags
from trainers.outputs import actions

BEST_RECORD = "best.json"
# best.json's key of the best selection value: the name older runs' records use.
SELECTION_KEY = "score"
# best.json's key of the selection's basis; records written before it existed have none.
BASIS_KEY = "basis"


def best_checkpoint_job(*, every: int, evaluate: Callable[[], dict[str, Any]],
                        selection: Callable[[dict[str, Any]], float], basis: Mapping[str, Any],
                        checkpoint: tf.train.Checkpoint, best_directory: str, is_chief: bool,
                        worker: int) -> PeriodicAction:
    """Every `every` cycles: `evaluate()`, its numbers as `eval/*` scalars (`tags.eval_scalars`),
    and a checkpoint in `best_directory` when `selection(results)` (lower is better) beats the
    best so far; ConfigError now when best.json's best was measured on another `basis`.

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
    basis = json.loads(json.dumps(basis))  # as best.json holds it: lists, not tuples
    check_same_basis(previous.get(BASIS_KEY, basis), basis, record_path, best_directory)

    def run(report: LoopReport) -> None:
        results = evaluate()
        actions.log_scalars(report, tags.eval_scalars(results))
        value = selection(results)
        if math.isfinite(value) and value < previous.get(SELECTION_KEY, math.inf):
            best.save(checkpoint_number=report.step)
            previous.update({SELECTION_KEY: value, "step": report.step, BASIS_KEY: basis,
                             **results})
            if is_chief:
                files.write_json(record_path, previous)
        logging.info("Evaluation at step %d: %s", report.step, results)

    return PeriodicAction(name="evaluation", every=every, fn=run)


def check_same_basis(recorded: Mapping[str, Any], current: Mapping[str, Any], record_path: str,
                     best_directory: str) -> None:
    """ConfigError when the best record's values were measured on another basis than this
    run's, naming what differs and the two ways on."""
    differ = sorted(key for key in {*recorded, *current} if recorded.get(key) != current.get(key))
    if differ:
        then = ", ".join(f"{key}={recorded.get(key)!r}" for key in differ)
        now = ", ".join(f"{key}={current.get(key)!r}" for key in differ)
        raise ConfigError(
            f"{record_path} ranks the best checkpoint by values measured with {then}; this run "
            f"measures with {now}, and the two do not compare. Resume with the flags that "
            f"measured it, or move {best_directory} away to start a new best record.")
