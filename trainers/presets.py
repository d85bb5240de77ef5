"""Where `gan/` is wired into phases: the models, optimizers and phases of each `--gan` setup.

The trainer core never imports `gan/`; a setup is a function from the resolved config and the
dataset's description to a `Setup`. New multi-model setups register a builder here by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Iterator, Mapping

import keras
import tensorflow as tf

from datasets import registry
from gan import augment, networks
from trainers.engine import ema
from trainers.engine import schedules
from trainers.adversarial import adversarial_phases
from trainers.config.fields import Config, ConfigError
from trainers.engine.controller import PeriodicAction
from trainers.engine.phases import Phase, optimizer_models, optimizer_updates_after


@dataclasses.dataclass(frozen=True)
class Setup:
    """Models, their optimizers, the ordered phases, and how to draw samples.

    `optimizers` is keyed by optimizer name (`phases.phase_optimizer_names`: a phase's own name
    unless it sets `Phase.optimizers`), and so are `learning_rate_scales`; the names are also
    the optimizers' keys in the checkpoint.

    `sample(noise)` maps a batch of latent vectors to outputs (images or points) with the
    sampling model; `latent_shape` is the per-example noise shape.

    Class-conditional setups set `num_classes` (0 = unconditional) and
    ``sample_labeled(noise [N, *latent_shape], labels int [N]) -> outputs``; their
    `sample(noise)` then draws the balanced labels ``tf.range(N) % num_classes``.

    `image_summaries(every)`, when set, builds the periodic image job that replaces the
    fixed-noise sample grid (image-to-image setups, which draw nothing from noise).
    """

    models: Mapping[str, keras.Model]
    optimizers: Mapping[str, keras.optimizers.Optimizer]
    phases: tuple[Phase, ...]
    latent_shape: tuple[int, ...]
    sample: Callable[[tf.Tensor], tf.Tensor]
    learning_rate_scales: Mapping[str, tf.Variable] = dataclasses.field(default_factory=dict)
    loss_weights: Mapping[str, tf.Variable] = dataclasses.field(default_factory=dict)
    num_classes: int = 0
    sample_labeled: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None
    image_summaries: Callable[[int], PeriodicAction] | None = None


def check_dataset(config: Config, info) -> None:
    """Rejects dataset/architecture and flag combinations before anything is built."""
    try:
        augment.parse_policy(config.diffaugment)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if info.kind == "points":
        for flag in ("g_extra_blocks", "d_extra_blocks", "d_dropout", "g_upsample"):
            if getattr(config, flag) != getattr(Config, flag):
                raise ConfigError(
                    f"--{flag}={getattr(config, flag)!r} changes the convolutional image networks; "
                    f"dataset {config.dataset!r} has 2-D points, whose networks are MLPs: drop it.")
    if config.diffaugment and info.kind != "image":
        raise ConfigError(f"--diffaugment={config.diffaugment!r} augments images; dataset "
                          f"{config.dataset!r} has 2-D points: leave it empty.")
    if info.kind == "image":
        height, width, _ = info.shape
        if height != width or height not in networks.SUPPORTED_RESOLUTIONS:
            raise ConfigError(
                f"--resolution={height} (dataset {config.dataset!r} gives {height}x{width}) is not "
                f"supported by the DCGAN networks; use --resolution with one of "
                f"{', '.join(map(str, networks.SUPPORTED_RESOLUTIONS))}.")
    if config.gan in CONDITIONAL_SETUPS:
        _conditional().check_conditional(config, info)


@contextlib.contextmanager
def dtype_policy(name: str) -> Iterator[None]:
    """Builds models under the `--precision` policy without leaving it set globally."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def phase_optimizer(config: Config, *, base_rate: float, schedule: str, total_updates: int,
                    warmup_updates: int) -> tuple[keras.optimizers.Optimizer, tf.Variable]:
    """The optimizer for one phase and its learning-rate scale variable.

    Under mixed_float16 it is wrapped in its own LossScaleOptimizer, so each model's loss scale
    adapts to its own gradients.
    """
    rate = schedules.PhaseLearningRate(base=base_rate, kind=schedule, total=max(total_updates, 1),
                                       warmup=warmup_updates)
    if config.optimizer == "adam":
        optimizer = keras.optimizers.Adam(rate, beta_1=config.beta1, beta_2=config.beta2)
    else:
        optimizer = keras.optimizers.RMSprop(rate)
    if config.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer, rate.scale


def _generator(config: Config, info, name: str) -> keras.Model:
    if info.kind == "points":
        return networks.mlp_generator(latent_dim=config.latent_dim, output_dim=info.shape[0], name=name)
    resolution, _, channels = info.shape
    return networks.dcgan_generator(resolution=resolution, channels=channels,
                                    latent_dim=config.latent_dim, width=config.g_width,
                                    extra_blocks=config.g_extra_blocks,
                                    upsample=config.g_upsample, name=name)


def _networks(config: Config, info) -> tuple[keras.Model, keras.Model]:
    generator = _generator(config, info, "generator")
    if info.kind == "points":
        return generator, networks.mlp_discriminator(input_dim=info.shape[0], pack=config.pack)
    resolution, _, channels = info.shape
    discriminator = networks.dcgan_discriminator(
        resolution=resolution, channels=channels, width=config.d_width,
        normalization=config.d_normalization, spectral_norm=config.d_spectral_norm,
        dropout=config.d_dropout, extra_blocks=config.d_extra_blocks, pack=config.pack)
    return generator, discriminator


def ema_updater(config: Config) -> Callable[[Mapping[str, keras.Model], tf.Tensor], None]:
    """``after_update`` for the generator phase: moves generator_ema towards generator."""
    images_per_cycle = config.batch_size * config.g_steps

    def update(models, cycle):
        images_seen = (tf.cast(cycle, tf.float32) + 1.0) * images_per_cycle
        beta = ema.ema_beta(batch_size=config.batch_size, halflife_kimg=config.ema_halflife_kimg,
                            images_seen=images_seen, rampup=config.ema_rampup)
        ema.update_ema(models["generator_ema"], models["generator"], beta)

    return update


def build_gan(config: Config, info, strategy: tf.distribute.Strategy) -> Setup:
    """Generator/discriminator setups: dcgan, wgan and wgan_gp differ only in their config."""
    check_dataset(config, info)
    use_ema = config.ema_halflife_kimg > 0
    penalty_weight = tf.Variable(float(config.penalty_weight), trainable=False, name="penalty_weight")
    phases = adversarial_phases(config, config.latent_dim, penalty_weight=penalty_weight,
                                generator_after_update=ema_updater(config) if use_ema else None)
    totals = optimizer_updates_after(phases, config.train_steps)
    warmups = optimizer_updates_after(phases, config.lr_warmup_steps)
    rates = {"discriminator": (config.d_lr, config.d_lr_schedule),
             "generator": (config.g_lr, config.g_lr_schedule)}
    with strategy.scope(), dtype_policy(config.precision):
        generator, discriminator = _networks(config, info)
        models = {"generator": generator, "discriminator": discriminator}
        if use_ema:
            models["generator_ema"] = _generator(config, info, "generator_ema")
            models["generator_ema"].set_weights(generator.get_weights())
        optimizers, scales = {}, {}
        for name, owned in optimizer_models(phases).items():
            base_rate, schedule = rates[name]
            optimizers[name], scales[name] = phase_optimizer(
                config, base_rate=base_rate, schedule=schedule, total_updates=totals[name],
                warmup_updates=warmups[name])
            # Keras 3 creates slots lazily; a compiled step under a strategy needs them now.
            optimizers[name].build([v for model in owned for v in models[model].trainable_variables])
    sampler = models["generator_ema" if use_ema and config.use_ema else "generator"]
    return Setup(models=models, optimizers=optimizers, phases=phases,
                 latent_shape=(config.latent_dim,),
                 sample=lambda noise: sampler(noise, training=False),
                 learning_rate_scales=scales, loss_weights={"penalty": penalty_weight})


SETUPS: dict[str, Callable[[Config, object, tf.distribute.Strategy], Setup]] = {
    name: build_gan for name in ("dcgan", "wgan", "wgan_gp", "lsgan", "sngan", "r1")}

CONDITIONAL_SETUPS = ("cgan", "acgan")


def _conditional():
    """trainers.conditional, imported on use: it builds on this module's Setup and helpers."""
    from trainers import conditional
    return conditional


def _build_conditional(config: Config, info, strategy: tf.distribute.Strategy) -> Setup:
    return _conditional().build_conditional(config, info, strategy)


SETUPS.update(dict.fromkeys(CONDITIONAL_SETUPS, _build_conditional))


def _cyclegan():
    """trainers.cyclegan, imported on use: it builds on this module's Setup and helpers."""
    from trainers import cyclegan
    return cyclegan


def _build_cyclegan(config: Config, info, strategy: tf.distribute.Strategy) -> Setup:
    return _cyclegan().build_cyclegan(config, info, strategy)


SETUPS["cyclegan"] = _build_cyclegan


def dataset_info(config: Config) -> registry.DatasetInfo:
    """What a run trains on: `--dataset`, or for cyclegan its --domain_a/--domain_b pair."""
    if config.gan == "cyclegan":
        return _cyclegan().dataset_info(config)
    return registry.dataset_info(config.dataset, resolution=config.resolution)


def build_setup(config: Config, info, strategy: tf.distribute.Strategy) -> Setup:
    """The registered setup for `--gan`."""
    if config.gan not in SETUPS:
        raise ConfigError(f"--gan={config.gan!r} has no registered setup; known: {', '.join(SETUPS)}.")
    return SETUPS[config.gan](config, info, strategy)
