"""What the hand-written baseline recipes of `benchmarks/quality.py` share: the data, the
compiled loop that trains until a wall-clock deadline, and the command line that saves samples.

A recipe (`tutorial_dcgan.py`, `strong_dcgan.py`) is an object with `generator`, `batch_size`,
`latent_dim` and `train_step(images)`, written as its authors write it; everything around it is
here, so the baselines differ only in their own models, losses and optimizers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Callable, Protocol, Sequence

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


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The generator's weights as they were `seconds` after the process started, `steps` in."""

    mark: float  # the mark (seconds after start) this is the newest state at or before
    seconds: float
    steps: int
    weights: list[np.ndarray]


def train_until(recipe: Recipe, batches: tf.data.Dataset, deadline: float, *,
                started: float | None = None, marks: Sequence[float] = (),
                clock: Callable[[], float] = time.time) -> tuple[int, list[Snapshot]]:
    """Runs compiled calls of STEPS_PER_CALL steps until `deadline`; returns the step count and,
    for each of `marks` (seconds after `started`, a Unix time) the deadline passes, a snapshot
    of the generator at the newest call boundary at or before it.

    Each call first copies the generator's weights into shadow variables (in the graph: a few
    milliseconds), so when a call ends past a mark, the shadow holds the state at the boundary
    before it, and only the marks passed cost a copy to host memory.
    """
    iterator = iter(batches)
    weights = recipe.generator.weights
    shadow = [tf.Variable(weight, trainable=False) for weight in weights]

    @tf.function
    def steps():
        for copy, weight in zip(shadow, weights):
            copy.assign(weight)
        for _ in tf.range(STEPS_PER_CALL):
            recipe.train_step(next(iterator))

    started = clock() if started is None else started
    pending = sorted(marks)
    snapshots: list[Snapshot] = []
    done, boundary = 0, clock()
    while boundary < deadline:
        steps()
        now = clock()
        while pending and now - started > pending[0]:
            snapshots.append(Snapshot(mark=pending.pop(0), seconds=boundary - started, steps=done,
                                      weights=[copy.numpy() for copy in shadow]))
        done += STEPS_PER_CALL
        boundary = now
    return done, snapshots


def write_samples(recipe: Recipe, num_samples: int, seed: int, path: str) -> None:
    """`num_samples` samples of the recipe's generator as it is now, uint8 NHWC, at `path`."""
    noise = tf.random.stateless_normal([num_samples, recipe.latent_dim], seed=[seed, 1])
    samples = np.concatenate([recipe.generator(noise[start:start + 500], training=False).numpy()
                              for start in range(0, num_samples, 500)])
    save_samples(samples, path)


def mark_path(output: str, mark: float) -> str:
    """Where the samples of the snapshot at `mark` seconds go, beside `output`."""
    stem, extension = os.path.splitext(output)
    return f"{stem}-{mark:g}s{extension}"


def main(make_recipe: Callable[[int], Recipe], description: str) -> None:
    """Trains `make_recipe(seed)` until `--deadline` (a Unix time, so that the budget counts from
    when the benchmark started the process, as it does for Gantry's run), then writes
    `--num_samples` samples as uint8 NHWC to `--output` and a JSON record of steps and seconds
    beside it. With `--marks`, the generator's state at each mark (`train_until`) is kept in
    memory and its samples are written after the deadline, beside `--output` (`mark_path`), so
    sampling takes none of the training's time."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--deadline", type=float, required=True, help="Unix time to stop at")
    parser.add_argument("--started", type=float, default=None,
                        help="Unix time the process was launched (default: when it starts "
                             "training); --marks and the recorded seconds count from it")
    parser.add_argument("--marks", default="",
                        help="comma-separated seconds after --started at which to keep the state")
    parser.add_argument("--output", required=True, help=".npy file for the uint8 samples")
    parser.add_argument("--num_samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.time() if args.started is None else args.started
    recipe = make_recipe(args.seed)
    steps, snapshots = train_until(recipe, training_batches(args.seed, recipe.batch_size),
                                   args.deadline, started=started,
                                   marks=[float(mark) for mark in args.marks.split(",") if mark])
    trained_seconds = time.time() - started
    write_samples(recipe, args.num_samples, args.seed, args.output)
    for snapshot in snapshots:
        recipe.generator.set_weights(snapshot.weights)
        write_samples(recipe, args.num_samples, args.seed, mark_path(args.output, snapshot.mark))
    with open(os.path.splitext(args.output)[0] + ".json", "w") as file:
        json.dump({"steps": steps, "images": steps * recipe.batch_size,
                   "batch_size": recipe.batch_size, "seconds": trained_seconds,
                   "marks": [{"mark": snapshot.mark, "seconds": snapshot.seconds,
                              "steps": snapshot.steps,
                              "output": mark_path(args.output, snapshot.mark)}
                             for snapshot in snapshots]}, file)
