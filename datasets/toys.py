"""2-D Gaussian-mixture toys for watching mode collapse: ring8 and grid25.

ring8: 8 modes on the unit circle at angles 2*pi*k/8, std 0.01.
grid25: 25 modes at {-4,-2,0,2,4}^2, std 0.05.
An example is {"x": float32 (2,), "label": int64 index of the mode it was drawn from}.

The stream is infinite and a pure function of (seed, split, example index): chunk c of
`_CHUNK` examples is drawn with stateless ops keyed by fold_in((seed, split id), c). So the order
is reproducible across runs and machines, "test" never repeats "train", and no state needs
checkpointing.
"""

import math

import numpy as np
import tensorflow as tf

from datasets.errors import DatasetError

TOY_NAMES = ("ring8", "grid25")
_SPLIT_IDS = {"train": 0, "test": 1}
_CHUNK = 1024


def toy_modes(name: str) -> tuple[np.ndarray, float]:
    """Returns the (num_modes, 2) float32 mode centres and the per-axis std of toy `name`."""
    if name == "ring8":
        angles = 2.0 * math.pi * np.arange(8) / 8
        return np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32), 0.01
    if name == "grid25":
        axis = np.array([-4.0, -2.0, 0.0, 2.0, 4.0])
        xs, ys = np.meshgrid(axis, axis, indexing="ij")
        return np.stack([xs.ravel(), ys.ravel()], axis=1).astype(np.float32), 0.05
    raise DatasetError(
        f"--dataset={name!r} is not a toy dataset: use one of {', '.join(TOY_NAMES)}."
    )


def toy_chunks(name: str, *, split: str, seed: int) -> tf.data.Dataset:
    """`toy_stream` in chunks of examples (each element has a leading axis of `_CHUNK`), for the
    training pipeline, which re-slices whole chunks into batches instead of handling points one
    at a time; `toy_chunks(...).unbatch()` is `toy_stream(...)`."""
    modes, std = toy_modes(name)
    if split not in _SPLIT_IDS:
        raise DatasetError(
            f"split={split!r} does not exist for --dataset={name}: use 'train' or 'test'."
        )
    if not isinstance(seed, (int, np.integer)):
        raise DatasetError(f"--seed={seed!r} must be an integer.")
    base_key = tf.constant([seed, _SPLIT_IDS[split]], tf.int64)
    mode_table = tf.constant(modes)

    def draw_chunk(chunk: tf.Tensor) -> dict[str, tf.Tensor]:
        key = tf.random.experimental.stateless_fold_in(base_key, chunk)
        index_key, noise_key = tf.unstack(tf.random.experimental.stateless_split(key, 2))
        label = tf.random.stateless_uniform(
            [_CHUNK], index_key, minval=0, maxval=len(modes), dtype=tf.int64
        )
        noise = std * tf.random.stateless_normal([_CHUNK, 2], noise_key)
        return {"x": tf.gather(mode_table, label) + noise, "label": label}

    return tf.data.Dataset.counter(dtype=tf.int64).map(draw_chunk)


def toy_stream(name: str, *, split: str, seed: int) -> tf.data.Dataset:
    """The infinite, deterministic example stream of toy `name` (cardinality INFINITE)."""
    return toy_chunks(name, split=split, seed=seed).unbatch()
