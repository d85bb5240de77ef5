"""What the hand-written baseline recipes of `benchmarks/quality.py` share: the data, the
compiled loop that trains until a wall-clock deadline, and the command line that saves samples.

A recipe (`tutorial_dcgan.py`, `strong_dcgan.py`) is an object with `generator`, `batch_size`,
`latent_dim` and `train_step(images)`, written as its authors write it; everything around it is
here, so the baselines differ only in their own models, losses and optimizers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable, Protocol

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from datasets import registry  # noqa: E402
from trainers.outputs.images import save_samples  # noqa: E402

BUFFER_SIZE = 60_000  # the whole training split
STEPS_PER_CALL = 20  # steps per compiled call between deadline checks


class Recipe(Protocol):
    generator: keras.Model
    batch_size: int
    latent_dim: int

    def train_step(self, images: tf.Tensor) -> None: ...


def training_batches(seed: int, batch_size: int) -> tf.data.Dataset:
    """Fashion-MNIST through Gantry's loader (scaled to [-1, 1]): shuffled, batched, repeated."""
    images = registry.load_split("fashion_mnist", split="train", data_dir=None,
                                 fashion_mnist_dir=None, resolution=None, seed=seed)
    return (images.map(lambda example: example["x"]).cache().shuffle(BUFFER_SIZE, seed=seed)
            .batch(batch_size, drop_remainder=True).repeat().prefetch(tf.data.AUTOTUNE))


def train_until(recipe: Recipe, batches: tf.data.Dataset, deadline: float) -> int:
    """Runs compiled calls of STEPS_PER_CALL steps until `deadline`; returns the step count."""
    iterator = iter(batches)

    @tf.function
    def steps():
        for _ in tf.range(STEPS_PER_CALL):
            recipe.train_step(next(iterator))

    done = 0
    while time.time() < deadline:
        steps()
        done += STEPS_PER_CALL
    return done


def main(make_recipe: Callable[[int], Recipe], description: str) -> None:
    """Trains `make_recipe(seed)` until `--deadline` (a Unix time, so that the budget counts from
    when the benchmark started the process, as it does for Gantry's run), then writes
    `--num_samples` samples as uint8 NHWC to `--output` and a JSON record of steps and seconds
    beside it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--deadline", type=float, required=True, help="Unix time to stop at")
    parser.add_argument("--output", required=True, help=".npy file for the uint8 samples")
    parser.add_argument("--num_samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.time()
    recipe = make_recipe(args.seed)
    steps = train_until(recipe, training_batches(args.seed, recipe.batch_size), args.deadline)
    trained_seconds = time.time() - started
    noise = tf.random.stateless_normal([args.num_samples, recipe.latent_dim], seed=[args.seed, 1])
    samples = np.concatenate([recipe.generator(noise[start:start + 500], training=False).numpy()
                              for start in range(0, args.num_samples, 500)])
    save_samples(samples, args.output)
    with open(os.path.splitext(args.output)[0] + ".json", "w") as file:
        json.dump({"steps": steps, "images": steps * recipe.batch_size,
                   "batch_size": recipe.batch_size, "seconds": trained_seconds}, file)
