"""Evaluation in the product: `--mode=train_evaluator`, `--mode=eval` and `--eval_every`.

The metrics, the domain evaluator and the scoring drivers live in `gan/` (`gan.metrics`,
`gan.evaluator`, `gan.features`, `gan.scoring`); this module picks the feature extractor a config asks for, evaluates a
generator against the dataset's test split (which the domain evaluator never trained on), and
keeps the best checkpoint by FID during training. Numbers are comparable only with the same
evaluator and the same number of samples, so both are reported with them.

Conditional runs (`Setup.num_classes` > 0) are evaluated on `--eval_samples` class-balanced
samples (sample i of class i % num_classes), which give every unconditional metric and, per
class, ~eval_samples / num_classes of them for intra-FID (against the reference's real images
of that class) and class accuracy (`gan.scoring.evaluate_generator`).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import tensorflow as tf
from absl import logging

from datasets import registry
from gan import evaluator, features, scoring
from trainers import presets, sampling
from trainers.outputs import summaries
from trainers.outputs.images import write_atomically
from trainers.engine.checkpoints import RunCheckpoints
from trainers.config.fields import Config, ConfigError
from trainers.engine.controller import LoopReport, PeriodicAction

BEST_RECORD = "best.json"


def feature_extractor(config: Config, dataset: str, resolution: int | None) -> features.FeatureExtractor:
    """The extractor `--evaluator` names: Gantry's domain classifier, InceptionV3, or a file."""
    try:
        if config.evaluator == "inception":
            return features.inception_v3(config.inception_weights)
        if config.evaluator != "domain":
            return features.load_feature_model(config.evaluator)
        return evaluator.load_or_train_evaluator(
            dataset, resolution=resolution, data_dir=config.data_dir,
            fashion_mnist_dir=config.fashion_mnist_dir, cache_dir=config.evaluator_dir,
            train_if_missing=False).extractor
    except (FileNotFoundError, OSError) as error:
        raise ConfigError(f"--evaluator={config.evaluator!r}: {error}") from None


def _test_split(config: Config, dataset: str, resolution: int | None, split: str = "test"):
    return registry.load_split(dataset, split=split, data_dir=config.data_dir,
                               fashion_mnist_dir=config.fashion_mnist_dir,
                               resolution=resolution, seed=config.seed)


class Evaluator:
    """Evaluates a sampling function against one fixed real reference (built once)."""

    def __init__(self, config: Config, run: Config, info: registry.DatasetInfo):
        self.config, self.run, self.info = config, run, info
        self.extractor = self.reference = None
        if info.kind != "points":
            self.extractor = feature_extractor(config, run.dataset, run.resolution)
            self.reference = scoring.real_reference(
                _test_split(config, run.dataset, run.resolution), self.extractor,
                num_samples=config.eval_samples)

    def __call__(self, sample, latent_shape, *, num_classes: int = 0,
                 sample_labeled=None) -> dict[str, float | list[float]]:
        """Metrics of `sample(noise)`; for a conditional image run (`num_classes` > 0) of
        `sample_labeled(noise, labels)` instead, which adds the class-conditional metrics."""
        if self.info.kind == "points":
            return scoring.evaluate_toy_generator(sample, latent_shape=latent_shape,
                                                    modes=self.info.modes, std=self.info.mode_std,
                                                    seed=self.config.seed)
        if num_classes:
            if sample_labeled is None:
                raise ValueError(f"num_classes={num_classes} needs sample_labeled(noise, labels).")
            self.check_class_counts(num_classes)
            sample = sample_labeled
        return scoring.evaluate_generator(sample, latent_shape=latent_shape,
                                            reference=self.reference, extractor=self.extractor,
                                            num_samples=self.config.eval_samples,
                                            seed=self.config.seed, num_classes=num_classes)

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
        """The metric floor: train-split images scored as if generated; for a conditional run
        (`num_classes` > 0) replayed by class, so the class metrics get their floor too."""
        if self.info.kind == "points":
            raise ConfigError("--real_vs_real compares image splits; toy datasets have none.")
        train = _test_split(self.config, self.run.dataset, self.run.resolution, split="train")
        if not num_classes:
            images = np.concatenate([batch["x"] for batch in train.take(self.config.eval_samples)
                                     .batch(1000).as_numpy_iterator()])
            return self(scoring.replay_sampler(images), latent_shape=(1,))
        per_class = -(-self.config.eval_samples // num_classes)
        images, labels = _class_balanced(train, per_class=per_class, num_classes=num_classes)
        return self(scoring.replay_sampler(images), latent_shape=(1,), num_classes=num_classes,
                    sample_labeled=scoring.class_replay_sampler(images, labels))


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


def evaluate(config: Config) -> dict[str, object]:
    """`--mode=eval`: one JSON-ready dict of every metric for the chosen checkpoint."""
    run = sampling.load_run_config(config.logdir)
    if run.gan == "cyclegan":
        from trainers import cyclegan  # builds on this module
        return cyclegan.evaluate(config)
    info = registry.dataset_info(run.dataset, resolution=run.resolution)
    scorer = Evaluator(config, run, info)
    if config.real_vs_real:
        num_classes = presets.build_setup(run, info, tf.distribute.get_strategy()).num_classes
        results = scorer.real_vs_real(num_classes)
        context = {"checkpoint": None, "step": None, "real_vs_real": True}
    else:
        restored = sampling.restore_run(config.logdir, use_ema=config.use_ema,
                                        checkpoint=sampling.latest_checkpoint(config.logdir, config.checkpoint))
        setup = restored.setup
        results = scorer(setup.sample, setup.latent_shape, num_classes=setup.num_classes,
                         sample_labeled=setup.sample_labeled)
        context = {"checkpoint": restored.checkpoint, "step": restored.step,
                   "generator": restored.generator_name}
    num_samples = scoring.TOY_SAMPLES if info.kind == "points" else config.eval_samples
    return {**results, **context, "num_samples": num_samples, "evaluator": config.evaluator}


def train_domain_evaluator(config: Config) -> evaluator.LoadedEvaluator:
    """`--mode=train_evaluator`: trains and caches the domain classifier of `--dataset`."""
    info = registry.dataset_info(config.dataset, resolution=config.resolution)
    if info.kind != "image":
        raise ConfigError(f"--dataset={config.dataset!r} has no images to classify; the toy "
                          "datasets are evaluated by modes and high-quality samples instead.")
    settings = evaluator.TrainSettings(epochs=config.evaluator_epochs, seed=config.seed,
                                       max_train_examples=config.evaluator_train_examples or None)
    return evaluator.train_evaluator(config.dataset, resolution=config.resolution,
                                     data_dir=config.data_dir, fashion_mnist_dir=config.fashion_mnist_dir,
                                     cache_dir=config.evaluator_dir, settings=settings, verbose=2)


def selection_score(results: dict, *, num_modes: int = 0) -> float:
    """Lower is better: FID for images; for a toy (`num_modes` > 0) minus the sum of the
    fraction of modes captured and the fraction of high-quality samples.

    Both toy fractions count equally: ranking by modes first would prefer an early, blurry
    generator whose few stray samples touch every mode (measured on grid25: 23 modes with 3.6%
    high-quality samples) over a sharp one that misses four (21 modes, 79%).
    """
    if num_modes:
        return -(results["modes"] / num_modes + results["high_quality"])
    return results["fid"]


def periodic_evaluation(config: Config, *, info, sample, latent_shape, checkpoint: tf.train.Checkpoint,
                        best_directory: str, is_chief: bool, worker: int, num_classes: int = 0,
                        sample_labeled=None) -> PeriodicAction:
    """Every `--eval_every` cycles: metrics as `eval/*` scalars, and the best checkpoint by FID.

    The reference features are computed once, when training starts; a missing domain
    evaluator, or too few `--eval_samples` for a conditional run's per-class metrics, is
    reported then, before any training. The best FID survives resumes through `best.json`
    beside the best checkpoint. Toy runs keep the checkpoint with the best `selection_score`
    (modes captured and high-quality samples, as fractions). A conditional image run
    (`num_classes` > 0) is evaluated through `sample_labeled` and also logs
    eval/class_accuracy and eval/intra_fid (the per-class list goes to the log line and
    best.json, not to TensorBoard).
    """
    scorer = Evaluator(config, config, info)
    if num_classes and info.kind == "image":
        scorer.check_class_counts(num_classes)
    best = RunCheckpoints(checkpoint, best_directory, max_to_keep=1, is_chief=is_chief, worker=worker)
    record_path = os.path.join(best_directory, BEST_RECORD)
    previous = {}
    if os.path.exists(record_path):
        with open(record_path) as file:
            previous = json.load(file)

    num_modes = len(info.modes) if info.kind == "points" else 0

    def run(report: LoopReport) -> None:
        results = scorer(sample, latent_shape, num_classes=num_classes,
                         sample_labeled=sample_labeled)
        summaries.write_scalars({f"eval/{key}": value for key, value in results.items()
                                 if not isinstance(value, list)}, step=report.step)
        value = selection_score(results, num_modes=num_modes)
        if math.isfinite(value) and value < previous.get("score", math.inf):
            best.save(checkpoint_number=report.step)
            previous.update(score=value, step=report.step, **results)
            if is_chief:
                record = json.dumps(previous, indent=2, sort_keys=True).encode()
                write_atomically(record_path, lambda handle: handle.write(record))
        logging.info("Evaluation at step %d: %s", report.step, results)

    return PeriodicAction(name="evaluation", every=config.eval_every, fn=run)
