"""Evaluating generated images: the feature extractor `--evaluator` names, and an evaluation
of a sampling function against the dataset's test split (which the domain evaluator never
trained on).

The metrics, the domain classifier, the standard Inception graph and the evaluation drivers
live in `gan/` (`gan.metrics`, `gan.evaluator`, `gan.inception`, `gan.features`,
`gan.evaluation`). Numbers are comparable only on the same features and the same number of
samples: every key names its features (`tags.name_features`), and `--mode=eval` records the
network and its checksum beside them. Class-conditional
runs are evaluated on `--eval_samples` class-balanced samples (sample i of class
i % num_classes), which give every unconditional metric and, per class, intra-FID (against the
reference's real images of that class) and class accuracy.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from datasets import registry
from gan import evaluation, evaluator, features, inception
from trainers.config.flags import Config, ConfigError
from trainers.evaluation import tags


def feature_extractor(config: Config, dataset: str, resolution: int | None,
                      channels: int | None = None) -> features.FeatureExtractor:
    """The extractor `--evaluator` names: Gantry's domain classifier, the standard Inception
    graph, Keras's InceptionV3, or a model file."""
    if config.evaluator == "inception":
        try:
            return inception.inception_features(config.inception_graph)
        except inception.GraphError as error:
            raise ConfigError(f"--evaluator=inception --inception_graph="
                              f"{config.inception_graph!r}: {error}") from None
    try:
        if config.evaluator == "keras_inception_v3":
            return features.keras_inception_v3(config.keras_inception_weights)
        if config.evaluator != "domain":
            return features.load_feature_model(config.evaluator)
        return evaluator.load_or_train_evaluator(
            dataset, resolution=resolution, data_dir=config.data_dir,
            fashion_mnist_dir=config.fashion_mnist_dir, cache_dir=config.evaluator_dir,
            train_if_missing=False, channels=channels).extractor
    except (OSError, ValueError) as error:  # a missing, unreadable or non-Keras file
        raise ConfigError(f"--evaluator={config.evaluator!r}: {error}") from None


def _test_split(config: Config, run: Config, split: str = "test"):
    return registry.load_split(run.dataset, split=split, data_dir=config.data_dir,
                               fashion_mnist_dir=config.fashion_mnist_dir,
                               resolution=run.resolution, seed=config.seed, channels=run.channels)


class ImageEvaluation:
    """Evaluates a sampling function against one fixed real reference: the first
    `--eval_samples` test images of the run's dataset, featurised once."""

    def __init__(self, config: Config, run: Config):
        self.config, self.run = config, run
        self.extractor = feature_extractor(config, run.dataset, run.resolution, run.channels)
        self.reference = evaluation.real_reference(
            _test_split(config, run), self.extractor,
            num_samples=config.eval_samples)

    def key(self, metric: str) -> str:
        """The key `metric` has in this evaluation's results ("fid" -> "fid_domain")."""
        return tags.feature_key(metric, self.extractor.name)

    def __call__(self, sample, latent_shape, *, num_classes: int = 0,
                 sample_labeled=None) -> dict[str, float | list[float]]:
        """Metrics of `sample(noise)`, each key naming the features; for a conditional image
        run (`num_classes` > 0) of `sample_labeled(noise, labels)` instead, which adds the
        class-conditional metrics."""
        if num_classes:
            if sample_labeled is None:
                raise ValueError(f"num_classes={num_classes} needs sample_labeled(noise, labels).")
            self.check_class_counts(num_classes)
            sample = sample_labeled
        results = evaluation.evaluate_generator(
            sample, latent_shape=latent_shape, reference=self.reference, extractor=self.extractor,
            num_samples=self.config.eval_samples, seed=self.config.seed, num_classes=num_classes)
        return tags.name_features(results, self.extractor.name)

    def check_class_counts(self, num_classes: int) -> None:
        """ConfigError unless `--eval_samples` gives intra-FID 2 images of every class on both
        sides (the generated ones are balanced; the real ones are the test split's first)."""
        real = np.bincount(self.reference.labels, minlength=num_classes)
        if self.config.eval_samples < 2 * num_classes or real.min() < 2:
            raise ConfigError(
                f"--eval_samples={self.config.eval_samples} is invalid for a run with "
                f"{num_classes} classes: intra-FID needs at least 2 real and 2 generated images "
                f"of each (the first test images hold {real.min()} of class {real.argmin()}); "
                f"use more, e.g. --eval_samples={20 * num_classes}.")

    def real_vs_real(self, num_classes: int = 0) -> dict[str, float | list[float]]:
        """The metric floor: train-split images evaluated as if generated; for a conditional run
        (`num_classes` > 0) replayed by class, so the class metrics get their floor too."""
        train = _test_split(self.config, self.run, split="train")
        if not num_classes:
            images = np.concatenate([batch["x"] for batch in train.take(self.config.eval_samples)
                                     .batch(1000).as_numpy_iterator()])
            return self(evaluation.replay_sampler(images), latent_shape=(1,))
        per_class = -(-self.config.eval_samples // num_classes)
        images, labels = _class_balanced(train, per_class=per_class, num_classes=num_classes)
        return self(evaluation.replay_sampler(images), latent_shape=(1,), num_classes=num_classes,
                    sample_labeled=evaluation.class_replay_sampler(images, labels))


def _class_balanced(examples: tf.data.Dataset, *, per_class: int,
                    num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """The first `per_class` images of every class of `examples`, and their labels."""
    images, labels = [], []
    for batch in examples.batch(1000).as_numpy_iterator():
        images.append(batch["x"])
        labels.append(batch["label"])
        if np.bincount(np.concatenate(labels), minlength=num_classes).min() >= per_class:
            break
    images, labels = np.concatenate(images), np.concatenate(labels)
    keep = np.sort(np.concatenate([np.flatnonzero(labels == label)[:per_class]
                                   for label in range(num_classes)]))
    return images[keep], labels[keep]
