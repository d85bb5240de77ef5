"""A conditional run through run.py as a user runs it: train --gan=cgan briefly with
--eval_every, then sample one class by name, evaluate, and export a SavedModel that takes labels.

The domain evaluator is an untrained classifier written straight into the cache: these tests
check that the class metrics are computed and reported, not their values
(tests/trainers/test_conditional_outputs.py checks those).
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from gan import evaluator
from tests.test_run import TINY, run
from tests.trainers.test_conditional_outputs import write_evaluator
from trainers.outputs import summaries


@pytest.fixture(scope="module")
def cgan_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cgan")
    cache = root / "evaluators"
    write_evaluator(evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                               feature_dim=16), str(cache))
    logdir = root / "run"
    result = run(*TINY, "--gan=cgan", f"--logdir={logdir}", "--train_steps=2",
                 "--checkpoint_every=2", "--image_every=0", "--histogram_every=0", "--eval_every=2",
                 "--eval_samples=100", f"--evaluator_dir={cache}")
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir, cache


def test_eval_every_logs_the_class_metrics(cgan_run):
    logdir, _ = cgan_run
    assert {"eval/fid", "eval/class_accuracy", "eval/intra_fid"} <= summaries.read_event_tags(
        str(logdir))["scalars"]
    best = json.loads((logdir / "checkpoints_best" / "best.json").read_text())
    assert best["step"] == 2 and len(best["intra_fid_per_class"]) == 10


def test_sample_one_class_by_name(cgan_run, tmp_path):
    logdir, _ = cgan_run
    result = run("--mode=sample", f"--logdir={logdir}", "--label=Sneaker", "--num_samples=6",
                 f"--output={tmp_path / 's.npy'}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Wrote 6 samples" in result.stdout
    drawn = np.load(tmp_path / "s.npy")
    assert drawn.shape == (6, 28, 28, 1) and drawn.dtype == np.uint8


def test_eval_prints_class_accuracy_and_intra_fid(cgan_run):
    logdir, cache = cgan_run
    result = run("--mode=eval", f"--logdir={logdir}", "--eval_samples=100",
                 f"--evaluator_dir={cache}")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    assert 0.0 <= metrics["class_accuracy"] <= 1.0 and metrics["intra_fid"] > 0
    assert len(metrics["intra_fid_per_class"]) == 10 and isinstance(metrics["fid"], float)


def test_export_serves_images_for_labels(cgan_run, tmp_path):
    logdir, _ = cgan_run
    result = run("--mode=export", f"--logdir={logdir}", f"--export_dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = tf.saved_model.load(str(tmp_path / "generator" / "2"))
    served = loaded.signatures["serving_default"](
        noise=tf.random.stateless_normal([3, 16], seed=[0, 1]),
        labels=tf.constant([7, 0, 9]))["images"]
    assert served.shape == (3, 28, 28, 1) and served.dtype == tf.uint8
