"""The best-checkpoint job: keeps the best score across resumes in best.json, with the
checkpoint beside it and the basis it was measured on, refuses a resume that measures on
another basis, and clears what a save cut short left in its folder."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from trainers.config.flags import ConfigError
from trainers.engine.controller import LoopReport
from trainers.engine.trainer import LoopOutput
from trainers.evaluation.best import BEST_RECORD, best_checkpoint_job


DOMAIN = {"evaluator": "domain", "evaluator_checksum": "7bedfff74b644fc4", "eval_samples": 2000}


def job(directory, scores, checkpoint, basis=DOMAIN):
    return best_checkpoint_job(every=1, evaluate=lambda: {"fid": scores.pop(0)},
                               selection=lambda results: results["fid"], basis=basis,
                               checkpoint=checkpoint, best_directory=str(directory), is_chief=True,
                               worker=0)


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
        assert json.loads((tmp_path / BEST_RECORD).read_text()) == {
            "fid": 20.0, "score": 20.0, "step": 2, "basis": DOMAIN}
        os.makedirs(tmp_path / "ckpt-4_temp")  # a save of the best cut short by a kill
        resumed = job(tmp_path, [22.0, 10.0], checkpoint)
        assert not (tmp_path / "ckpt-4_temp").exists()
        for step in (4, 5):
            resumed.fn(report(step))
    assert json.loads((tmp_path / BEST_RECORD).read_text())["step"] == 5
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-5")


def test_a_resume_measuring_on_another_basis_is_refused_before_it_evaluates(tmp_path):
    checkpoint = tf.train.Checkpoint(v=tf.Variable(np.zeros(3, np.float32)))
    with tf.summary.create_noop_writer().as_default():
        job(tmp_path, [20.0], checkpoint).fn(report(1))
        fewer = {**DOMAIN, "eval_samples": 500}  # a smaller sample's FID is higher: not comparable
        with pytest.raises(ConfigError, match=(
                f"best.json ranks the best checkpoint by values measured with eval_samples=2000; "
                f"this run measures with eval_samples=500, and the two do not compare. Resume "
                f"with the flags that measured it, or move {tmp_path} away")):
            job(tmp_path, [5.0], checkpoint, basis=fewer)
        inception = {"evaluator": "inception", "evaluator_checksum": "c1a5b0b4",
                     "eval_samples": 2000}
        with pytest.raises(ConfigError, match="measured with evaluator='domain', "
                                              "evaluator_checksum='7bedfff74b644fc4'; this run "
                                              "measures with evaluator='inception', "
                                              "evaluator_checksum='c1a5b0b4'"):
            job(tmp_path, [5.0], checkpoint, basis=inception)
        record = json.loads((tmp_path / BEST_RECORD).read_text())
        del record["basis"]  # as a run recorded before the basis was kept wrote it
        (tmp_path / BEST_RECORD).write_text(json.dumps(record))
        job(tmp_path, [5.0], checkpoint, basis=fewer).fn(report(2))
    assert json.loads((tmp_path / BEST_RECORD).read_text()) == {
        "fid": 5.0, "score": 5.0, "step": 2, "basis": fewer}
