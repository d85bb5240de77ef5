"""The best-checkpoint job: keeps the best score across resumes in best.json, with the
checkpoint beside it, and clears what a save cut short left in its folder."""

import json
import os

import numpy as np
import tensorflow as tf

from trainers.engine.controller import LoopReport
from trainers.engine.trainer import LoopOutput
from trainers.evaluation.best import BEST_RECORD, best_checkpoint_job


def job(directory, scores, checkpoint):
    return best_checkpoint_job(every=1, evaluate=lambda: {"fid": scores.pop(0)},
                               selection=lambda results: results["fid"], checkpoint=checkpoint,
                               best_directory=str(directory), is_chief=True, worker=0)


def report(step):
    return LoopReport(step=step, output=LoopOutput(metrics={}, gradients={}),
                      images_per_second=1.0, seconds=1.0)


def test_the_best_score_survives_a_resume_and_leftovers_are_cleared(tmp_path):
    variable = tf.Variable(np.zeros(3, np.float32))
    checkpoint = tf.train.Checkpoint(v=variable)
    writer = tf.summary.create_noop_writer()
    with writer.as_default():
        first = job(tmp_path, [30.0, 20.0, 25.0], checkpoint)
        for step in (1, 2, 3):
            variable.assign(np.full(3, step, np.float32))
            first.fn(report(step))
        assert json.loads((tmp_path / BEST_RECORD).read_text()) == {"fid": 20.0, "score": 20.0,
                                                                    "step": 2}
        os.makedirs(tmp_path / "ckpt-4_temp")  # a save of the best cut short by a kill
        resumed = job(tmp_path, [22.0, 10.0], checkpoint)
        assert not (tmp_path / "ckpt-4_temp").exists()
        for step in (4, 5):
            resumed.fn(report(step))
    assert json.loads((tmp_path / BEST_RECORD).read_text())["step"] == 5
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-5")
