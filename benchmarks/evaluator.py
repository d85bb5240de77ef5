"""Trains Gantry's domain evaluator in full and checks it is good enough to trust its metrics.

Usage, from the repository root:

    python benchmarks/evaluator.py                          # Fashion-MNIST, a few minutes on CPU
    python benchmarks/evaluator.py --cache_dir ~/.cache/gantry/evaluators   # also install it
    python benchmarks/evaluator.py --epochs 1 --samples 1000 # quicker, below the bar

Table 1 trains the evaluator exactly as `--mode=train_evaluator` does (`TrainSettings`) and,
as the baseline, a linear softmax classifier on the pixels with the same data, optimizer and
epochs; it reports test accuracy and seconds, and the script exits with status 1 when the
evaluator's accuracy is under `--min_accuracy` (0.90).

Table 2 checks the metrics with that evaluator on `--samples` images per side (at most a third
of the test split), the real side being the first test images. "held-out real": other test
images, as a perfect generator would give them: the floor each metric reaches at this sample
count (FID and KID near 0, precision and recall high, coverage 1, class KL near 0); "train
split": images the evaluator was trained on (how far its features shift on seen data); "half
the classes": test images of classes 0-4 only (coverage 0.5, KL near log 2 = 0.69); "untrained
DCGAN": a randomly initialised generator. The seconds are one `evaluate_generator` call: what
periodic evaluation during training costs (the real side is computed once beforehand).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from datasets import registry  # noqa: E402
from gan import evaluation, evaluator, networks  # noqa: E402

LATENT_DIM = 100
METRICS = ("fid", "kid", "precision", "recall", "inception_score", "coverage", "class_kl")


def parse_args() -> argparse.Namespace:
    defaults = evaluator.TrainSettings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--resolution", type=int, default=None)
    parser.add_argument("--data_dir", default=None)
    parser.add_argument("--fashion_mnist_dir", default=None)
    parser.add_argument("--cache_dir", default=None,
                        help="where to save the evaluator (default: a temporary directory)")
    for field in dataclasses.fields(evaluator.TrainSettings):
        parser.add_argument(f"--{field.name}", type=float if field.name == "learning_rate" else int,
                            default=getattr(defaults, field.name))
    parser.add_argument("--min_accuracy", type=float, default=0.90)
    parser.add_argument("--samples", type=int, default=2000, help="images per side in table 2")
    parser.add_argument("--json", default=None, help="also write the results here")
    return parser.parse_args()


def linear_baseline(args, settings, split) -> tuple[float, float]:
    info = registry.dataset_info(args.dataset, resolution=args.resolution)
    images = keras.Input(shape=info.shape)
    logits = keras.layers.Dense(info.num_classes,
                                kernel_initializer=keras.initializers.GlorotUniform(0))(
        keras.layers.Flatten()(images))
    start = time.perf_counter()
    accuracy = evaluator.train_classifier(keras.Model(images, logits), split("train"),
                                          split("test"), settings=settings)
    return accuracy, time.perf_counter() - start


def _arrays(examples: tf.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    batches = list(examples.batch(1000).as_numpy_iterator())
    return (np.concatenate([batch["x"] for batch in batches]),
            np.concatenate([batch["label"] for batch in batches]))


def main() -> int:
    args = parse_args()
    settings = evaluator.TrainSettings(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(evaluator.TrainSettings)})

    def split(name):
        return registry.load_split(args.dataset, split=name, data_dir=args.data_dir,
                                   fashion_mnist_dir=args.fashion_mnist_dir,
                                   resolution=args.resolution, seed=settings.seed)

    with tempfile.TemporaryDirectory() as scratch:
        loaded = evaluator.train_evaluator(
            args.dataset, resolution=args.resolution, data_dir=args.data_dir,
            fashion_mnist_dir=args.fashion_mnist_dir, cache_dir=args.cache_dir or scratch,
            settings=settings)
    record = loaded.record
    baseline_accuracy, baseline_seconds = linear_baseline(args, settings, split)
    passed = record["test_accuracy"] >= args.min_accuracy
    print(f"\nTable 1: {args.dataset} at {record['resolution']} px, {settings.epochs} epochs, "
          f"batch {settings.batch_size}")
    print(f"{'classifier':<34}{'test accuracy':>14}{'seconds':>9}")
    verdict = f"{'PASS' if passed else 'FAIL'} (>= {args.min_accuracy})"
    table = [("domain evaluator (CNN)", record["test_accuracy"], record["train_seconds"], verdict),
             ("baseline: linear softmax on pixels", baseline_accuracy, baseline_seconds, "")]
    for name, accuracy, seconds, note in table:
        print(f"{name:<34}{accuracy:>14.4f}{seconds:>9.1f}   {note}")

    extractor, count = loaded.extractor, args.samples
    info = registry.dataset_info(args.dataset, resolution=args.resolution)
    test_images, test_labels = _arrays(split("test").take(4 * count))
    if len(test_images) < 3 * count:
        raise SystemExit(f"--samples={count} needs 3 x {count} test images; ask for fewer.")
    reference = evaluation.real_reference(tf.data.Dataset.from_tensor_slices(test_images[:count]),
                                         extractor, num_samples=count)
    rest, rest_labels = test_images[count:], test_labels[count:]
    cases = {
        "held-out real": evaluation.replay_sampler(rest),
        "train split": evaluation.replay_sampler(_arrays(split("train").take(count))[0]),
        "half the classes": evaluation.replay_sampler(rest[rest_labels < info.num_classes // 2]),
    }
    if info.shape[0] in networks.SUPPORTED_RESOLUTIONS:
        untrained = networks.dcgan_generator(resolution=info.shape[0], channels=info.shape[2],
                                             latent_dim=LATENT_DIM)
        cases["untrained DCGAN"] = lambda noise: untrained(noise, training=False)
    rows = {}
    for name, sample in cases.items():
        start = time.perf_counter()
        rows[name] = evaluation.evaluate_generator(sample, latent_shape=(LATENT_DIM,),
                                                  reference=reference, extractor=extractor,
                                                  num_samples=count)
        rows[name]["seconds"] = time.perf_counter() - start
    print(f"\nTable 2: metrics with this evaluator, {count} samples per side, real = the first "
          f"{count} test images")
    print(f"{'fake side':<18}" + "".join(f"{m:>16}" for m in (*METRICS, "seconds")))
    for name, row in rows.items():
        print(f"{name:<18}" + "".join(f"{row[m]:>16.4f}" for m in (*METRICS, "seconds")))

    if args.json:
        with open(args.json, "w") as file:
            json.dump({"evaluator": record, "baseline_accuracy": baseline_accuracy,
                       "baseline_seconds": baseline_seconds, "metrics": rows}, file, indent=2)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
