"""The mode metrics of a run on stacked images (`--dataset=stacked_fashion_mnist`), reported
beside the image metrics by `--eval_every` and `--mode=eval`:

  modes_domain     modes covered, out of 1,000, by `--mode_samples` generated images;
  modes_kl_domain  KL(their mode histogram || uniform), in nats (`gan.mode_coverage`).

"_domain": a sample's mode is the class triple the domain evaluator assigns to its channels
(Fashion-MNIST's classifier on each channel, `gan.per_channel`), whatever features
`--evaluator` gives the image metrics. The samples are their own fixed, seeded noise set, apart
from the `--eval_samples` the image metrics draw. Other datasets have no modes to count: for
them `for_run` gives `NoModes`, which adds nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from trainers.config.flags import Config, ConfigError
from trainers.evaluation import tags

# Always the domain classifier's modes (see the module docstring): "modes_domain", "modes_kl_domain".
MODES, MODES_KL = (tags.feature_key(name, "domain") for name in ("modes", "modes_kl"))
METRICS = (MODES, MODES_KL)


class ModeEvaluation:
    """Counts the modes of a sampling function's `--mode_samples` images."""

    def __init__(self, config: Config, run: Config):
        from gan import evaluator
        self.config, self.run = config, run
        try:
            self.extractor = evaluator.load_or_train_evaluator(
                run.dataset, resolution=run.resolution, data_dir=config.data_dir,
                fashion_mnist_dir=config.fashion_mnist_dir, cache_dir=config.evaluator_dir,
                train_if_missing=False).extractor
        except (OSError, ValueError) as error:  # no cached evaluator, or an unreadable one
            raise ConfigError(f"--mode_samples={config.mode_samples}: the mode metrics of "
                              f"--dataset={run.dataset} need its domain evaluator: {error}") from None

    def __call__(self, sample: Callable, latent_shape: tuple[int, ...]) -> dict[str, Any]:
        """The mode metrics of `sample(noise)`'s images."""
        from gan import mode_coverage
        found = mode_coverage.generated_coverage(
            sample, latent_shape=latent_shape, extractor=self.extractor,
            num_samples=self.config.mode_samples, seed=self.config.seed)
        return self.as_results(found)

    def real_vs_real(self) -> dict[str, Any]:
        """The metrics' floor: the first `--mode_samples` training images as the samples."""
        import numpy as np

        from datasets import registry
        from gan import mode_coverage
        train = registry.load_split(self.run.dataset, split="train", data_dir=self.config.data_dir,
                                    fashion_mnist_dir=self.config.fashion_mnist_dir,
                                    resolution=self.run.resolution, seed=self.config.seed)
        modes = [mode_coverage.classified_modes(batch["x"], self.extractor) for batch in
                 train.take(self.config.mode_samples).batch(1000).as_numpy_iterator()]
        return self.as_results(mode_coverage.coverage(np.concatenate(modes),
                                                      self.extractor.num_classes))

    def sample_count(self) -> dict[str, int]:
        """How many samples the metrics count, for `--mode=eval`'s record."""
        return {"mode_samples": self.config.mode_samples}

    @staticmethod
    def as_results(found) -> dict[str, Any]:
        """`gan.mode_coverage.Coverage` as this module's metric keys."""
        return {MODES: found.covered, MODES_KL: found.kl}


class NoModes:
    """The mode evaluation of data without modes to count: no metrics."""

    def __call__(self, sample: Callable, latent_shape: tuple[int, ...]) -> dict[str, Any]:
        return {}

    def real_vs_real(self) -> dict[str, Any]:
        return {}

    def sample_count(self) -> dict[str, int]:
        return {}


def for_run(config: Config, run: Config) -> ModeEvaluation | NoModes:
    """The mode evaluation of `run`; `NoModes` when its data has no modes to count (any
    dataset but one of stacked images, `datasets.registry.channel_source`)."""
    from datasets import registry
    return ModeEvaluation(config, run) if registry.channel_source(run.dataset) else NoModes()
