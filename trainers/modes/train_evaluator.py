"""`--mode=train_evaluator`: trains and caches the domain classifier of `--dataset`, the
feature extractor of `--evaluator=domain` (`gan.evaluator`)."""

from __future__ import annotations

from gan import evaluator
from trainers.config.flags import Config, ConfigError


def train_domain_evaluator(config: Config) -> evaluator.LoadedEvaluator:
    """Trains the classifier on the training split and reports its test accuracy."""
    try:
        evaluator.classified_image_info(config.dataset, config.resolution, config.channels)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    settings = evaluator.TrainSettings(epochs=config.evaluator_epochs, seed=config.seed,
                                       max_train_examples=config.evaluator_train_examples or None)
    return evaluator.train_evaluator(config.dataset, resolution=config.resolution,
                                     data_dir=config.data_dir, fashion_mnist_dir=config.fashion_mnist_dir,
                                     cache_dir=config.evaluator_dir, settings=settings, verbose=2,
                                     channels=config.channels)
