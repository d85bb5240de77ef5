"""A domain evaluator trained on synthetic Fashion-MNIST-shaped data in seconds, shared by the
evaluator and evaluation tests: no test needs the real dataset or the full evaluator; and
`write_evaluator`, which caches any classifier as the Fashion-MNIST domain evaluator."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from datasets import registry
from gan import evaluator

SETTINGS = evaluator.TrainSettings(epochs=1, batch_size=64, width=4, feature_dim=16,
                                   learning_rate=1e-2, max_train_examples=2000)
SIZES = {"train": 2400, "test": 500}


def synthetic(split: str, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST-shaped images whose class is which pair of rows is bright."""
    count = count or SIZES[split]
    rng = np.random.default_rng(len(split))
    labels = rng.permutation(np.arange(count) % 10)
    images = np.full((count, 28, 28, 1), -1.0, np.float32)
    for index, label in enumerate(labels):
        images[index, 4 + 2 * label : 6 + 2 * label] = 1.0
    images += rng.normal(0.0, 0.2, images.shape).astype(np.float32)
    return images, labels.astype(np.int64)


def dataset(split: str) -> tf.data.Dataset:
    images, labels = synthetic(split)
    return tf.data.Dataset.from_tensor_slices({"x": images, "label": labels})


class FakeRegistry:
    """Stands in for registry.load_split with synthetic splits and counts the loads."""

    def __init__(self):
        self.loads = []

    def __call__(self, name, *, split, data_dir, fashion_mnist_dir, resolution, seed,
                 channels=None):
        self.loads.append((name, split, resolution))
        return dataset(split)


def train_synthetic_evaluator(cache_dir: str) -> tuple[evaluator.LoadedEvaluator, FakeRegistry]:
    """Trains the synthetic-data evaluator into `cache_dir`; returns it and the recorded loads."""
    loads = FakeRegistry()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "load_split", loads)
        loaded = evaluator.load_or_train_evaluator(
            "fashion_mnist", resolution=None, data_dir=None, fashion_mnist_dir=None,
            cache_dir=cache_dir, train_if_missing=True, settings=SETTINGS)
    return loaded, loads


def write_evaluator(model: keras.Model, cache_dir: str) -> None:
    """Caches `model` as the Fashion-MNIST domain evaluator in `cache_dir`."""
    directory = evaluator.evaluator_dir("fashion_mnist", resolution=28, cache_dir=cache_dir)
    os.makedirs(directory)
    model.save(os.path.join(directory, evaluator.EVALUATOR_FILE))
    with open(os.path.join(directory, evaluator.RECORD_FILE), "w") as file:
        json.dump({"dataset": "fashion_mnist", "note": "test classifier"}, file)
