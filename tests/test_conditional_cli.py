"""A conditional run through run.py as a user runs it: train --setup=cgan briefly with
--eval_every (its sample grids: one row per class), then sample one class by name, evaluate, and export a SavedModel that takes labels.

The domain evaluator is an untrained classifier written straight into the cache: these tests
check that --mode=eval reports the class metrics --eval_every recorded for the same checkpoint
(tests/trainers/test_conditional_outputs.py checks the metrics' values on a known classifier).
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from gan import evaluator
from tests.cli import TINY, run, run_together
from tests.gan.synthetic_evaluator import write_evaluator
from trainers.outputs import hparams, summaries


@pytest.fixture(scope="module")
def cgan_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cgan")
    cache = root / "evaluators"
    write_evaluator(evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                               feature_dim=16), str(cache))
    logdir = root / "run"
    result = run(*TINY, "--setup=cgan", f"--logdir={logdir}", "--train_cycles=2",
                 "--checkpoint_every=2", "--image_every=2", "--histogram_every=0", "--eval_every=2",
                 "--eval_samples=100", f"--evaluator_dir={cache}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Finished at step 2" in result.stdout
    return logdir, cache


def test_training_draws_one_row_of_samples_per_class(cgan_run):
    logdir, _ = cgan_run
    tags = summaries.read_event_tags(str(logdir))
    assert {"samples", "samples_by_class"} <= tags["images"]
    assert {"discriminator/adversarial", "generator/loss"} <= tags["scalars"]
    [png] = [tf.make_ndarray(value.tensor)[2] for path in logdir.glob("events.*")
             for event in tf.compat.v1.train.summary_iterator(str(path))
             for value in event.summary.value if value.tag == "samples_by_class"]
    # 10 Fashion-MNIST classes (rows) x 10 fixed noise vectors (columns), 28 px, 1 px padding
    assert tf.io.decode_png(png).shape == (10 * 29 + 1, 10 * 29 + 1, 1)


def test_eval_every_logs_the_class_metrics(cgan_run):
    logdir, _ = cgan_run
    assert {"eval/fid_domain", "eval/class_accuracy_domain",
            "eval/intra_fid_domain"} <= summaries.read_event_tags(
        str(logdir))["scalars"]
    best = json.loads((logdir / "checkpoints_best" / "best.json").read_text())
    assert best["step"] == 2 and len(best["intra_fid_per_class_domain"]) == 10


@pytest.fixture(scope="module")
def readers(cgan_run, tmp_path_factory):
    """The runs the tests below check, started together since they only read the trained run:
    6 samples of class 7 (Sneaker) asked for by name and by index with --seed=5, --mode=eval and
    --mode=export. Returns (the directory of their outputs, {name: finished run})."""
    logdir, cache = cgan_run
    out = tmp_path_factory.mktemp("readers")
    sample = ["--mode=sample", f"--logdir={logdir}", "--num_samples=6", "--seed=5"]
    results = run_together(
        [*sample, "--label=Sneaker", f"--output={out / 'sneakers.npy'}"],
        [*sample, "--label=7", f"--output={out / 'sevens.npy'}"],
        ["--mode=eval", f"--logdir={logdir}", "--eval_samples=100", f"--evaluator_dir={cache}"],
        ["--mode=export", f"--logdir={logdir}", f"--export_dir={out / 'export'}"])
    return out, dict(zip(("sneakers", "sevens", "eval", "export"), results))


@pytest.fixture(scope="module")
def sneakers(readers):
    """6 samples of class 7 (Sneaker) asked for by name, with --seed=5."""
    out, results = readers
    assert results["sneakers"].returncode == 0, results["sneakers"].stderr[-2000:]
    assert "Wrote 6 samples" in results["sneakers"].stdout
    return np.load(out / "sneakers.npy")


def test_a_class_by_name_draws_what_its_index_draws(readers, sneakers):
    out, results = readers
    assert results["sevens"].returncode == 0, results["sevens"].stderr[-2000:]
    assert sneakers.shape == (6, 28, 28, 1) and sneakers.dtype == np.uint8
    np.testing.assert_array_equal(np.load(out / "sevens.npy"), sneakers)


def test_eval_repeats_the_class_metrics_recorded_in_training(cgan_run, readers):
    """--mode=eval of the step-2 checkpoint, with the same seed, sample count and evaluator as
    --eval_every used at step 2, gives the metrics recorded then; intra-FID is the mean of the
    per-class values."""
    logdir, _ = cgan_run
    result = readers[1]["eval"]
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    best = json.loads((logdir / "checkpoints_best" / "best.json").read_text())
    assert metrics["step"] == best["step"] == 2
    for key in ("fid_domain", "class_accuracy_domain", "intra_fid_domain"):
        assert metrics[key] == pytest.approx(best[key], rel=1e-5), key
    assert metrics["intra_fid_per_class_domain"] == pytest.approx(
        best["intra_fid_per_class_domain"], rel=1e-5)
    assert metrics["intra_fid_domain"] == pytest.approx(
        np.mean(metrics["intra_fid_per_class_domain"]), rel=1e-6)
    # Every metric it wrote for TensorBoard is an HParams column of the run (num_samples: context).
    columns = {tag for group, tag in hparams.read_hparams(str(logdir)).metrics if group == "eval"}
    written = summaries.read_event_tags(str(logdir / "eval"))["scalars"] - {"eval/num_samples"}
    assert {"eval/intra_fid_domain", "eval/class_accuracy_domain",
            "eval/fid_domain"} <= written <= columns


def test_export_serves_images_for_labels(readers, sneakers):
    """The exported `seed` signature draws what --mode=sample draws for the same seed and class."""
    out, results = readers
    assert results["export"].returncode == 0, results["export"].stderr[-3000:]
    loaded = tf.saved_model.load(str(out / "export" / "generator" / "2"))
    served = loaded.signatures["serving_default"](
        noise=tf.random.stateless_normal([3, 16], seed=[0, 1]),
        labels=tf.constant([7, 0, 9]))["images"]
    assert served.shape == (3, 28, 28, 1) and served.dtype == tf.uint8
    seeded = loaded.signatures["seed"](seed=tf.constant(5, tf.int64), count=tf.constant(6),
                                       label=tf.constant(7))["images"].numpy()
    assert np.abs(seeded.astype(int) - sneakers.astype(int)).max() <= 1
