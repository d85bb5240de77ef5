"""Gantry's domain evaluator, and the drivers that turn a generator into metric values.

Why a domain evaluator: Inception's weights cannot be downloaded everywhere Gantry runs, and
ImageNet features of 28x28 grayscale clothes upsampled to 299x299 describe them poorly. So
Gantry trains a small CNN classifier on the dataset's train split once (minutes on a CPU),
measures its accuracy on the test split, and caches it under
`<cache_dir>/<dataset>-<resolution>/`: `evaluator.keras` and `evaluator.json` (accuracy,
training settings, a fingerprint of the weights). Metric values are comparable only when they
come from the same evaluator, which the fingerprint identifies; `gan.features` explains how a
model becomes features and logits. A dataset that stacks another's images as its channels
(`registry.channel_source`: stacked_fashion_mnist) has no classifier of its own: its evaluator
is the other dataset's, applied to each channel (`gan.per_channel`), trained and cached as that
dataset's.

The drivers stream images through an extractor once, batch by batch: the real side is reduced
to a `Reference` that can be computed once and reused (periodic evaluation during training),
the fake side is drawn from a fixed, seeded noise set, so successive evaluations of one run
differ only by the generator.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time

import keras
import tensorflow as tf

from datasets import files, registry
from gan import per_channel
from gan.features import FeatureExtractor, keras_features, weights_checksum

EVALUATOR_FILE = "evaluator.keras"
RECORD_FILE = "evaluator.json"


class EvaluatorMissingError(FileNotFoundError):
    """No evaluator is cached for a dataset and training one was not allowed."""


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """How the domain evaluator is trained: Adam with a cosine-decayed learning rate,
    cross-entropy, seeded weights and shuffles.

    The defaults reach about 91% test accuracy on Fashion-MNIST (benchmarks/evaluator.py).
    `max_train_examples` (None: all) keeps the first examples of the train split.
    """

    epochs: int = 3
    batch_size: int = 128
    width: int = 32
    feature_dim: int = 128
    learning_rate: float = 1e-3
    max_train_examples: int | None = None
    seed: int = 0

    def __post_init__(self):
        for name in ("epochs", "batch_size", "width", "feature_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainSettings.{name}={getattr(self, name)!r} must be >= 1.")
        if not self.learning_rate > 0:
            raise ValueError(f"TrainSettings.learning_rate={self.learning_rate!r} must be > 0.")
        if self.max_train_examples is not None and self.max_train_examples < 1:
            raise ValueError(
                f"TrainSettings.max_train_examples={self.max_train_examples!r} must be None "
                "(the whole split) or >= 1."
            )


@dataclasses.dataclass(frozen=True)
class LoadedEvaluator:
    """A domain evaluator (the classifier, and its features as an extractor), its
    `evaluator.json` record, and whether this call trained it."""

    extractor: FeatureExtractor
    model: keras.Model
    record: dict
    directory: str
    trained: bool


def default_cache_dir() -> str:
    """$XDG_CACHE_HOME/gantry/evaluators, else ~/.cache/gantry/evaluators."""
    return files.user_cache_dir("evaluators")


def evaluator_dir(dataset: str, *, resolution: int, cache_dir: str | None = None,
                  channels: int | None = None) -> str:
    """Where the evaluator of `dataset` at `resolution` px (and, for a folder, `channels`)
    lives: "tfds:x" becomes "tfds_x", a folder its `registry.cache_key` (name and path hash)."""
    slug = re.sub(r"[^A-Za-z0-9_.]+", "_", registry.cache_key(dataset, channels))
    return os.path.join(cache_dir or default_cache_dir(), f"{slug}-{resolution}")


def build_classifier(*, input_shape: tuple[int, int, int], num_classes: int, width: int = 32,
                     feature_dim: int = 128, seed: int = 0,
                     name: str = "domain_evaluator") -> keras.Model:
    """3x3 convolutions, the first at full size with `width` channels, then stride-2 ones that
    double the channels until the side is at most 8, each batch-normalised and ReLU'd; then
    Flatten, Dense(feature_dim) + ReLU (the features) and Dense(num_classes) (the logits).
    Initialisers are seeded from `seed`, so weights do not depend on global random state."""
    if len(input_shape) != 3 or num_classes < 2:
        raise ValueError(
            f"build_classifier needs an (H, W, C) input shape and >= 2 classes, got "
            f"{input_shape!r} and {num_classes!r}."
        )
    seeds = iter(range(1000 * seed, 1000 * seed + 1000))

    def conv(x, channels: int, strides: int, index: int):
        x = keras.layers.Conv2D(channels, 3, strides=strides, padding="same", use_bias=False,
                                kernel_initializer=keras.initializers.HeNormal(next(seeds)),
                                name=f"conv{index}")(x)
        x = keras.layers.BatchNormalization(name=f"conv{index}_bn")(x)
        return keras.layers.ReLU(name=f"conv{index}_relu")(x)

    images = keras.Input(shape=input_shape, name="images")
    x = conv(images, width, 1, 0)
    side, channels, index = input_shape[0], width, 0
    while side > 8:
        side, channels, index = -(-side // 2), 2 * channels, index + 1
        x = conv(x, channels, 2, index)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(feature_dim, kernel_initializer=keras.initializers.HeNormal(next(seeds)),
                           name="features")(x)
    x = keras.layers.ReLU(name="features_relu")(x)
    logits = keras.layers.Dense(num_classes, name="logits",
                                kernel_initializer=keras.initializers.GlorotUniform(next(seeds)))(x)
    return keras.Model(images, logits, name=name)


def train_classifier(model: keras.Model, train: tf.data.Dataset, test: tf.data.Dataset, *,
                     settings: TrainSettings = TrainSettings(), verbose: int = 0) -> float:
    """Trains a logits classifier (`build_classifier`'s, or a baseline) in place on unbatched
    {"x", "label"} examples with `settings`; returns its accuracy on all of `test`."""
    if settings.max_train_examples is not None:
        train = train.take(settings.max_train_examples)
    batches = (train.map(_pair).cache()
               .shuffle(10_000, seed=settings.seed, reshuffle_each_iteration=True)
               .batch(settings.batch_size).prefetch(tf.data.AUTOTUNE))
    steps = int(batches.cardinality())
    if steps < 0:
        steps = sum(1 for _ in batches)
    # Cosine decay to 0 over the run: +0.7 points of test accuracy over a constant rate.
    rate = keras.optimizers.schedules.CosineDecay(settings.learning_rate, steps * settings.epochs)
    model.compile(optimizer=keras.optimizers.Adam(rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)
    model.fit(batches, epochs=settings.epochs, verbose=verbose, shuffle=False)
    _, accuracy = model.evaluate(test.map(_pair).batch(500), verbose=verbose)
    return float(accuracy)


def train_evaluator(dataset: str, *, resolution: int | None, data_dir: str | None,
                    fashion_mnist_dir: str | None, cache_dir: str | None = None,
                    settings: TrainSettings = TrainSettings(), batch_size: int = 250,
                    verbose: int = 0, channels: int | None = None) -> LoadedEvaluator:
    """Trains the evaluator of `dataset` on its train split, tests it on its test split and
    saves it, replacing any cached one: `--mode=train_evaluator`. (A folder's two splits are
    the same images, so its "test_accuracy" is measured on the training images.) For stacked
    images this trains the evaluator of the dataset they stack (`registry.channel_source`)."""
    source = registry.channel_source(dataset)
    if source is not None:
        return _per_channel(train_evaluator(
            source, resolution=resolution, data_dir=data_dir, fashion_mnist_dir=fashion_mnist_dir,
            cache_dir=cache_dir, settings=settings, batch_size=batch_size, verbose=verbose),
            dataset, resolution)
    info = classified_image_info(dataset, resolution, channels)
    directory = evaluator_dir(dataset, resolution=info.shape[0], cache_dir=cache_dir,
                              channels=channels)

    def split(name: str) -> tf.data.Dataset:
        return registry.load_split(dataset, split=name, data_dir=data_dir,
                                   fashion_mnist_dir=fashion_mnist_dir, resolution=resolution,
                                   seed=settings.seed, channels=channels)

    start = time.perf_counter()
    model = build_classifier(input_shape=info.shape, num_classes=info.num_classes,
                             width=settings.width, feature_dim=settings.feature_dim,
                             seed=settings.seed)
    accuracy = train_classifier(model, split("train"), split("test"), settings=settings,
                                verbose=verbose)
    seconds = time.perf_counter() - start
    os.makedirs(directory, exist_ok=True)
    temporary = os.path.join(directory, f".{os.getpid()}.{EVALUATOR_FILE}")
    model.save(temporary)
    os.replace(temporary, os.path.join(directory, EVALUATOR_FILE))
    record = {
        "dataset": dataset,
        "resolution": info.shape[0],
        "input_shape": list(info.shape),
        "num_classes": info.num_classes,
        "feature_dim": settings.feature_dim,
        "test_accuracy": accuracy,
        "train_seconds": round(seconds, 1),
        "settings": dataclasses.asdict(settings),
        "fingerprint": weights_checksum(model),
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
    }
    files.write_json(os.path.join(directory, RECORD_FILE), record)
    return LoadedEvaluator(extractor=_extractor(model, directory, record, batch_size), model=model,
                           record=record, directory=directory, trained=True)


def load_or_train_evaluator(dataset: str, *, resolution: int | None, data_dir: str | None,
                            fashion_mnist_dir: str | None, cache_dir: str | None = None,
                            train_if_missing: bool = False,
                            settings: TrainSettings = TrainSettings(), batch_size: int = 250,
                            verbose: int = 0, channels: int | None = None) -> LoadedEvaluator:
    """The cached evaluator of `dataset` at `resolution` (None: native size). When none is cached
    it is trained first if `train_if_missing`, else `EvaluatorMissingError` says how to train
    it. A cached evaluator is used whatever `settings` say. Stacked images get the evaluator of
    the dataset they stack, per channel (module docstring)."""
    source = registry.channel_source(dataset)
    if source is not None:
        try:
            loaded = load_or_train_evaluator(
                source, resolution=resolution, data_dir=data_dir,
                fashion_mnist_dir=fashion_mnist_dir, cache_dir=cache_dir,
                train_if_missing=train_if_missing, settings=settings, batch_size=batch_size,
                verbose=verbose)
        except EvaluatorMissingError as error:
            raise EvaluatorMissingError(f"{dataset} is classified channel by channel by the "
                                        f"{source} evaluator. {error}") from None
        return _per_channel(loaded, dataset, resolution)
    info = classified_image_info(dataset, resolution, channels)
    directory = evaluator_dir(dataset, resolution=info.shape[0], cache_dir=cache_dir,
                              channels=channels)
    model_path = os.path.join(directory, EVALUATOR_FILE)
    record_path = os.path.join(directory, RECORD_FILE)
    if not (os.path.isfile(model_path) and os.path.isfile(record_path)):
        if not train_if_missing:
            flags = (f"--dataset={dataset}" + (f" --resolution={resolution}" if resolution else "")
                     + (f" --channels={channels}" if channels else ""))
            raise EvaluatorMissingError(
                f"No domain evaluator for {dataset} at {info.shape[0]} px in {directory}. Train "
                f"it once with `python run.py --mode=train_evaluator {flags}` (a few minutes on "
                "a CPU), or use Inception features."
            )
        return train_evaluator(dataset, resolution=resolution, data_dir=data_dir,
                               fashion_mnist_dir=fashion_mnist_dir, cache_dir=cache_dir,
                               settings=settings, batch_size=batch_size, verbose=verbose,
                               channels=channels)
    record = files.read_json(
        record_path, holds=f"the test accuracy and settings of the {dataset} evaluator beside it",
        fix="Retrain it with --mode=train_evaluator, which rewrites both files.")
    model = keras.models.load_model(model_path, compile=False)
    if tuple(model.inputs[0].shape[1:]) != tuple(info.shape):
        raise ValueError(
            f"The cached evaluator {model_path} takes images of shape "
            f"{tuple(model.inputs[0].shape[1:])}, but {dataset} gives {info.shape}; retrain it "
            "with --mode=train_evaluator."
        )
    return LoadedEvaluator(extractor=_extractor(model, directory, record, batch_size), model=model,
                           record=record, directory=directory, trained=False)


def classified_image_info(dataset: str, resolution: int | None,
                          channels: int | None = None) -> registry.DatasetInfo:
    """The DatasetInfo of a labelled image dataset; ValueError for any other (the classifier
    takes [H, W, C] examples with a class label)."""
    info = registry.dataset_info(dataset, resolution=resolution, channels=channels)
    if len(info.shape) == 3 and not info.num_classes:
        raise ValueError(
            f"--dataset={dataset} has no class labels, so it has no domain evaluator (a "
            "classifier of its classes); for a folder, put each class's images in its own "
            "sub-folder. Without classes, evaluate FID, KID and precision/recall with "
            "--evaluator=inception (the standard FID network) or --evaluator=MODEL.keras; the "
            "class metrics need classes.")
    if len(info.shape) != 3 or not info.num_classes:
        raise ValueError(
            f"--dataset={dataset} has no domain evaluator: it needs labelled images, and its "
            f"examples have shape {info.shape} and {info.num_classes or 'no'} classes (the 2-D "
            "toys are evaluated by the modes they cover instead).")
    return info


def _per_channel(loaded: LoadedEvaluator, dataset: str, resolution: int | None) -> LoadedEvaluator:
    """`loaded`, the evaluator of the dataset `dataset` stacks, applied to each channel of
    `dataset`'s images (`gan.per_channel`); its record is `loaded`'s (the fingerprint names
    the weights), with "per_channel_of" naming `dataset`."""
    info = classified_image_info(dataset, resolution)
    model = per_channel.per_channel_classifier(loaded.model, info.shape[-1])
    extractor = keras_features(
        model, name="domain", description=f"domain evaluator {loaded.directory} per channel",
        checksum=loaded.extractor.checksum, batch_size=loaded.extractor.batch_size)
    return dataclasses.replace(loaded, extractor=extractor, model=model,
                               record={**loaded.record, "per_channel_of": dataset})


def _extractor(model: keras.Model, directory: str, record: dict,
               batch_size: int) -> FeatureExtractor:
    """The classifier's features, named "domain" and identified by its weights' checksum (the
    record's, for a record written before checksums were taken)."""
    return keras_features(model, name="domain", description=f"domain evaluator {directory}",
                          checksum=record.get("fingerprint") or weights_checksum(model),
                          batch_size=batch_size)


def _pair(example: dict) -> tuple[tf.Tensor, tf.Tensor]:
    return example["x"], example["label"]
