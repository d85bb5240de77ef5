"""The kinds of data a generator/discriminator setup trains on: images and toys (2-D points).

Everything about a G/D run that depends on its data and not on its losses lives in one class
per kind: the flags it refuses, its networks, its progress samples, how `--eval_every` and
`--mode=eval` evaluate a generator, how `--mode=sample` writes samples and `--mode=export` serves
them. `get` chooses the kind of a dataset (`DatasetInfo.kind`) once, in one place; the setups
(`unconditional`, `conditional`) ask it and never compare kinds. A new kind of data is one more
class here and one more entry in `KINDS`.

- `Images`: the convolutional networks of `--arch` (`gan.architectures`), image grids, FID and
  the other metrics of an evaluator's features (`trainers.evaluation.image_evaluation`), and of
  stacked images the modes covered (`trainers.evaluation.mode_coverage`), uint8 exports.
- `Toy` (the 2-D toys ring8 and grid25): MLPs, scatter plots over the true modes, modes
  captured and high-quality samples (`gan.evaluation.evaluate_toy_generator`).

TensorFlow and `gan/` are imported inside the methods (see `protocol`).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Callable

from trainers.config.flags import Config, ConfigError
from trainers.evaluation import mode_coverage, tags
from trainers.setups.protocol import PeriodicEvaluation

if TYPE_CHECKING:
    import keras
    import numpy as np
    import tensorflow as tf

    from datasets.registry import DatasetInfo
    from trainers.setups.adversarial import Conditioning
    from trainers.setups.protocol import Built, Restored

# The owners (`flags.declare`) of the flags every generator/discriminator setup reads beyond the
# common ones (its `Setup.flag_owners`; cgan and acgan add their own).
GAN_FLAG_OWNERS = ("generator", "discriminator", "architecture", "discriminator architecture",
                   "adversarial", "ema", "features", "privacy")
# Flags that change the convolutional image networks, refused on the toys' MLPs.
IMAGE_NETWORK_FLAGS = ("arch", "g_extra_blocks", "d_extra_blocks", "d_dropout", "g_upsample",
                       "r3gan_blocks", "r3gan_expansion", "r3gan_group_width")
# The flag behind each family-specific builder keyword (`gan.architectures.Architecture`'s
# options) and the value that leaves it unused: an --arch whose builders lack the keyword
# refuses any other value.
R3GAN_OPTION_FLAGS = {"blocks_per_stage": ("r3gan_blocks", 2), "expansion": ("r3gan_expansion", 2),
                      "group_width": ("r3gan_group_width", 16)}
GENERATOR_OPTION_FLAGS = {"extra_blocks": ("g_extra_blocks", 0),
                          "upsample": ("g_upsample", "transposed"), **R3GAN_OPTION_FLAGS}
DISCRIMINATOR_OPTION_FLAGS = {"normalization": ("d_normalization", "none"),
                              "dropout": ("d_dropout", 0.0), "extra_blocks": ("d_extra_blocks", 0),
                              "spectral_norm": ("d_spectral_norm", False), **R3GAN_OPTION_FLAGS}
IMAGE_SUMMARY_SAMPLES, TOY_SUMMARY_SAMPLES = 64, 1000
# What `evaluate_toy_generator` reports of a toy (of images: `tags.IMAGE_METRICS`, each key
# naming its features: "fid_domain").
TOY_METRICS = ("modes", "high_quality")


def generator_options(config: Config, keywords: tuple[str, ...]) -> dict[str, Any]:
    """The family-specific generator keywords (`Architecture.generator_options`) from flags."""
    return {keyword: getattr(config, GENERATOR_OPTION_FLAGS[keyword][0]) for keyword in keywords}


def discriminator_options(config: Config, keywords: tuple[str, ...]) -> dict[str, Any]:
    """The family-specific discriminator keywords (`Architecture.discriminator_options`)."""
    return {keyword: getattr(config, DISCRIMINATOR_OPTION_FLAGS[keyword][0]) for keyword in keywords}


def check_architecture_flags(config: Config) -> None:
    """Refuses a network flag that --arch's builders do not take, naming the archs that do (a
    preset flag the setup does not read is None: dfad builds no discriminator). The fix names
    the value rather than "drop it": a preset may have set the flag (cgan's spectral norm)."""
    from gan import architectures
    chosen = architectures.ARCHITECTURES[config.arch]
    for options, flags in (("generator_options", GENERATOR_OPTION_FLAGS),
                           ("discriminator_options", DISCRIMINATOR_OPTION_FLAGS)):
        for keyword, (flag, unused) in flags.items():
            value = getattr(config, flag)
            if keyword not in getattr(chosen, options) and value not in (unused, None):
                having = [name for name, arch in architectures.ARCHITECTURES.items()
                          if keyword in getattr(arch, options)]
                raise ConfigError(
                    f"--{flag}={value!r} is not an option of the --arch={config.arch} networks; "
                    f"use --{flag}={unused!r} or --arch={' or '.join(having)}.")


def image_generator(config: Config, info: DatasetInfo, name: str, builder: str,
                    **keywords: Any) -> keras.Model:
    """The generator that the --arch family's `builder` (an `Architecture` field:
    "generator", "conditional_generator", ...) makes for images of `info`'s shape, with the
    width and family options of the flags; `keywords` add the builder's own (a conditional
    generator's `num_classes`)."""
    from gan import architectures
    resolution, _, channels = info.shape
    arch = architectures.ARCHITECTURES[config.arch]
    return getattr(arch, builder)(
        resolution=resolution, channels=channels, latent_dim=config.latent_dim,
        width=config.g_width, name=name, **keywords,
        **generator_options(config, arch.generator_options))


def image_discriminator(config: Config, info: DatasetInfo, builder: str,
                        **keywords: Any) -> keras.Model:
    """The discriminator that the --arch family's `builder` (an `Architecture` field) makes for
    images of `info`'s shape, as `image_generator` does (`keywords`: the unconditional one's
    `pack`, a conditional one's `num_classes`)."""
    from gan import architectures
    resolution, _, channels = info.shape
    arch = architectures.ARCHITECTURES[config.arch]
    return getattr(arch, builder)(
        resolution=resolution, channels=channels, width=config.d_width, **keywords,
        **discriminator_options(config, arch.discriminator_options))


def toy_selection(results: dict[str, Any], num_modes: int) -> float:
    """Lower is better: minus the sum of the fraction of modes captured and the fraction of
    high-quality samples.

    Both count equally: ranking by modes first would prefer an early, blurry generator whose
    few stray samples touch every mode (measured on grid25: 23 modes with 3.6% high-quality
    samples) over a sharp one that misses four (21 modes, 79%).
    """
    return -(results["modes"] / num_modes + results["high_quality"])


def uint8_images(images: tf.Tensor) -> tf.Tensor:
    """[-1, 1] float pixels -> uint8, in graph ops: floor((x + 1) * 127.5 + 0.5), clipped.

    The same mapping as `images.to_uint8`, computed in float32 rather than float64, so a pixel
    within ~1e-5 of a rounding boundary may land one level apart.
    """
    import tensorflow as tf
    scaled = (tf.clip_by_value(tf.cast(images, tf.float32), -1.0, 1.0) + 1.0) * 127.5 + 0.5
    return tf.cast(tf.floor(scaled), tf.uint8)


class DataKind(abc.ABC):
    """What a G/D setup does that depends on the kind of its data. `metrics` are the numbers
    `periodic_evaluation` and `evaluate` report; `summary_samples` the size of the fixed noise
    batch behind the progress samples. `conditioning` is the run's (`adversarial.Conditioning`).
    One instance per kind, in `KINDS`."""

    metrics: tuple[str, ...] = ()
    summary_samples: int = 0

    @abc.abstractmethod
    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int) -> None:
        """Refuses flags (and a replica count) this kind of data cannot train with."""

    @abc.abstractmethod
    def without_labelled_images(self, info: DatasetInfo) -> str:
        """What the data has instead of labelled images (for a conditional setup's refusal),
        or "" when it has them."""

    @abc.abstractmethod
    def generator(self, config: Config, info: DatasetInfo, name: str) -> keras.Model:
        """The built-in unconditional generator for this data."""

    @abc.abstractmethod
    def discriminator(self, config: Config, info: DatasetInfo) -> keras.Model:
        """The built-in unconditional discriminator for this data."""

    @abc.abstractmethod
    def summary_writer(self, tag: str, info: DatasetInfo) -> Callable[[np.ndarray, int], None]:
        """``write(samples, step)`` of the progress samples under `tag`."""

    @abc.abstractmethod
    def periodic_evaluation(self, config: Config, built: Built, info: DatasetInfo,
                            conditioning: Conditioning) -> PeriodicEvaluation:
        """What `--eval_every` evaluates, and how it ranks checkpoints."""

    @abc.abstractmethod
    def evaluate(self, config: Config, run: Config, info: DatasetInfo, restored: Restored | None,
                 conditioning: Conditioning) -> dict[str, Any]:
        """`--mode=eval` of the restored run, or the real-vs-real floor when `restored` is None."""

    @abc.abstractmethod
    def check_sample(self, config: Config, restored: Restored) -> None:
        """Refuses `--mode=sample` layout flags this data cannot be drawn with."""

    @abc.abstractmethod
    def save_samples(self, samples: np.ndarray, path: str, info: DatasetInfo,
                     rows: int | None) -> None:
        """Writes `--mode=sample`'s samples to `path` (`rows`: an image grid's)."""

    @abc.abstractmethod
    def served(self, generated: tf.Tensor) -> dict[str, tf.Tensor]:
        """The exported endpoints' outputs for the generator's `generated` batch."""


class Images(DataKind):
    """Images [H, W, C] in [-1, 1], square, at a side of `networks.SUPPORTED_RESOLUTIONS`."""

    metrics = tags.IMAGE_METRICS + mode_coverage.METRICS  # the modes of stacked images only
    summary_samples = IMAGE_SUMMARY_SAMPLES

    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int) -> None:
        from gan import networks
        height, width, _ = info.shape
        if height != width or height not in networks.SUPPORTED_RESOLUTIONS:
            raise ConfigError(
                f"--resolution={height} (dataset {config.dataset!r} gives {height}x{width}) is not "
                f"supported by the image networks; use --resolution with one of "
                f"{', '.join(map(str, networks.SUPPORTED_RESOLUTIONS))}.")
        check_architecture_flags(config)
        if config.jit_compile and num_replicas > 1:
            raise ConfigError(
                f"--jit_compile with {num_replicas} replicas: the generator's "
                "synchronized batch norm all-reduces inside the forward pass, which XLA cannot "
                "compile; use one replica or --jit_compile=false.")

    def without_labelled_images(self, info: DatasetInfo) -> str:
        return "" if info.num_classes else "images without class labels"

    def generator(self, config: Config, info: DatasetInfo, name: str) -> keras.Model:
        return image_generator(config, info, name, "generator")

    def discriminator(self, config: Config, info: DatasetInfo) -> keras.Model:
        return image_discriminator(config, info, "discriminator", pack=config.pack)

    def summary_writer(self, tag: str, info: DatasetInfo) -> Callable[[np.ndarray, int], None]:
        from trainers.outputs import actions
        return actions.image_grid_writer(tag)

    def periodic_evaluation(self, config: Config, built: Built, info: DatasetInfo,
                            conditioning: Conditioning) -> PeriodicEvaluation:
        """FID and the other image metrics, ranked by FID, which depends on the features and
        the sample count too (its basis)."""
        evaluation = self.image_evaluation(config, config, conditioning)
        modes = mode_coverage.for_run(config, config)
        features = evaluation.extractor.record()
        return PeriodicEvaluation(
            evaluate=lambda: {**self.evaluate_sampler(evaluation, built, conditioning),
                              **modes(built.sampling.sample, built.sampling.latent_shape)},
            selection=lambda results: results[evaluation.key("fid")],
            basis={"evaluator": features["name"], "evaluator_checksum": features["checksum"],
                   "eval_samples": config.eval_samples})

    def evaluate(self, config: Config, run: Config, info: DatasetInfo, restored: Restored | None,
                 conditioning: Conditioning) -> dict[str, Any]:
        evaluation = self.image_evaluation(config, run, conditioning)
        modes = mode_coverage.for_run(config, run)
        if restored is None:
            results = {**evaluation.real_vs_real(conditioning.num_classes), **modes.real_vs_real()}
        else:
            sampling = restored.built.sampling
            results = {**self.evaluate_sampler(evaluation, restored.built, conditioning),
                       **modes(sampling.sample, sampling.latent_shape)}
        return {**results, "num_samples": config.eval_samples, **modes.sample_count(),
                "features": evaluation.extractor.record()}

    @staticmethod
    def image_evaluation(config: Config, run: Config, conditioning: Conditioning):
        """The evaluation against `run`'s test split; for a conditional run it refuses, before
        any training, an --eval_samples too small for the per-class metrics."""
        from trainers.evaluation.image_evaluation import ImageEvaluation
        evaluation = ImageEvaluation(config, run)
        if conditioning.num_classes:
            evaluation.check_class_counts(conditioning.num_classes)
        return evaluation

    @staticmethod
    def evaluate_sampler(evaluation, built: Built, conditioning: Conditioning) -> dict[str, Any]:
        """The image metrics of `built`'s sampler; class-balanced with the class metrics when
        the run is conditional."""
        sampling = built.sampling
        return evaluation(sampling.sample, sampling.latent_shape, num_classes=conditioning.num_classes,
                          sample_labeled=conditioning.labeled_sampler(built.models[sampling.model]))

    def check_sample(self, config: Config, restored: Restored) -> None:
        """Every layout flag applies to images."""

    def save_samples(self, samples: np.ndarray, path: str, info: DatasetInfo,
                     rows: int | None) -> None:
        from trainers.outputs import images
        images.save_samples(samples, path, rows=rows)

    def served(self, generated: tf.Tensor) -> dict[str, tf.Tensor]:
        """`images`: uint8 [N, H, W, C]."""
        return {"images": uint8_images(generated)}


class Toy(DataKind):
    """A toy: 2-D points around its modes (`DatasetInfo.modes`, `mode_std`), an endless stream."""

    metrics = TOY_METRICS
    summary_samples = TOY_SUMMARY_SAMPLES

    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int) -> None:
        for flag in IMAGE_NETWORK_FLAGS:
            if getattr(config, flag) != getattr(Config, flag):
                raise ConfigError(
                    f"--{flag}={getattr(config, flag)!r} changes the convolutional image "
                    f"networks; dataset {config.dataset!r} is a toy (2-D points), whose networks "
                    "are MLPs: drop it.")
        if config.diffaugment:
            raise ConfigError(f"--diffaugment={config.diffaugment!r} augments images; dataset "
                              f"{config.dataset!r} is a toy (2-D points): leave it empty.")
        if config.consistency_weight:
            raise ConfigError(
                f"--consistency_weight={config.consistency_weight!r} compares the "
                f"discriminator on augmented images; dataset {config.dataset!r} is a toy "
                "(2-D points): use 0.")

    def without_labelled_images(self, info: DatasetInfo) -> str:
        return "toy data (2-D points)"

    def generator(self, config: Config, info: DatasetInfo, name: str) -> keras.Model:
        from gan import networks
        return networks.mlp_generator(latent_dim=config.latent_dim, output_dim=info.shape[0],
                                      name=name)

    def discriminator(self, config: Config, info: DatasetInfo) -> keras.Model:
        from gan import networks
        return networks.mlp_discriminator(input_dim=info.shape[0], pack=config.pack)

    def summary_writer(self, tag: str, info: DatasetInfo) -> Callable[[np.ndarray, int], None]:
        from trainers.outputs import actions
        return actions.scatter_writer(tag, modes=info.modes)

    def periodic_evaluation(self, config: Config, built: Built, info: DatasetInfo,
                            conditioning: Conditioning) -> PeriodicEvaluation:
        """Modes captured and high-quality samples, ranked by `toy_selection`."""
        from gan import evaluation
        return PeriodicEvaluation(
            evaluate=lambda: evaluation.evaluate_toy_generator(
                built.sampling.sample, latent_shape=built.sampling.latent_shape, modes=info.modes,
                std=info.mode_std, seed=config.seed),
            selection=lambda results: toy_selection(results, len(info.modes)))

    def evaluate(self, config: Config, run: Config, info: DatasetInfo, restored: Restored | None,
                 conditioning: Conditioning) -> dict[str, Any]:
        from gan import evaluation
        if restored is None:
            raise ConfigError("--real_vs_real compares image splits; toy datasets have none.")
        results = self.periodic_evaluation(config, restored.built, info, conditioning).evaluate()
        return {**results, "num_samples": evaluation.TOY_SAMPLES}

    def check_sample(self, config: Config, restored: Restored) -> None:
        if config.grid or config.interpolate:
            flag = f"--grid={config.grid!r}" if config.grid else f"--interpolate={config.interpolate}"
            raise ConfigError(
                f"{flag} lays out images, but {config.logdir!r} is a 2-D toy run "
                f"({restored.info.name}) whose samples are points drawn as one scatter plot; use "
                "--num_samples instead.")

    def save_samples(self, samples: np.ndarray, path: str, info: DatasetInfo,
                     rows: int | None) -> None:
        from trainers.outputs import images
        images.save_points(samples, path, modes=info.modes)

    def served(self, generated: tf.Tensor) -> dict[str, tf.Tensor]:
        """`points`: float32 [N, 2]."""
        import tensorflow as tf
        return {"points": tf.cast(generated, tf.float32)}


# `DatasetInfo.kind` (`datasets.registry.IMAGE`, `TOY`) -> its kind of data.
KINDS: dict[str, DataKind] = {"image": Images(), "toy": Toy()}


def get(kind: str) -> DataKind:
    """The kind of data named `kind` (a `DatasetInfo.kind`); ValueError for an unknown name."""
    if kind not in KINDS:
        raise ValueError(f"Data kind {kind!r} is unknown: use one of "
                         f"{', '.join(map(repr, KINDS))}.")
    return KINDS[kind]
