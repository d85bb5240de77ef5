"""Where `gan/` is wired into phases: the models, optimizers and phases of each `--gan` setup.

The trainer core never imports `gan/`; a setup is a function from the resolved config and the
dataset's description to a `Setup`. New multi-model setups register a builder here by name.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import keras
import tensorflow as tf

from gan import losses, networks, regularizers
from trainers.config import Config, ConfigError
from trainers.phases import LossOutput, Phase, StepInputs


@dataclasses.dataclass(frozen=True)
class Setup:
    """Models, one optimizer per phase, the ordered phases, and how to draw samples.

    `sample(noise)` maps a batch of latent vectors to outputs (images or points) with the
    sampling model; `latent_shape` is the per-example noise shape.
    """

    models: Mapping[str, keras.Model]
    optimizers: Mapping[str, keras.optimizers.Optimizer]
    phases: tuple[Phase, ...]
    latent_shape: tuple[int, ...]
    sample: Callable[[tf.Tensor], tf.Tensor]


def check_dataset(config: Config, info) -> None:
    """Rejects dataset/architecture combinations before anything is built."""
    if info.kind == "image":
        height, width, _ = info.shape
        if height != width or height not in networks.SUPPORTED_RESOLUTIONS:
            raise ConfigError(
                f"--resolution={height} (dataset {config.dataset!r} gives {height}x{width}) is not "
                f"supported by the DCGAN networks; use --resolution with one of "
                f"{', '.join(map(str, networks.SUPPORTED_RESOLUTIONS))}.")


def _optimizer(config: Config, learning_rate: float) -> keras.optimizers.Optimizer:
    if config.optimizer == "adam":
        return keras.optimizers.Adam(learning_rate, beta_1=config.beta1, beta_2=config.beta2)
    return keras.optimizers.RMSprop(learning_rate)


def _networks(config: Config, info) -> tuple[keras.Model, keras.Model]:
    if info.kind == "points":
        return (networks.mlp_generator(latent_dim=config.latent_dim, output_dim=info.shape[0]),
                networks.mlp_discriminator(input_dim=info.shape[0]))
    resolution, _, channels = info.shape
    generator = networks.dcgan_generator(
        resolution=resolution, channels=channels, latent_dim=config.latent_dim, width=config.g_width)
    discriminator = networks.dcgan_discriminator(
        resolution=resolution, channels=channels, width=config.d_width,
        normalization=config.d_normalization)
    return generator, discriminator


def adversarial_phases(config: Config, latent_dim: int) -> tuple[Phase, ...]:
    """The discriminator phase (k = --d_steps updates) then the generator phase (--g_steps)."""
    loss = losses.get_loss(config.loss)

    def discriminator_loss(models, inputs: StepInputs) -> LossOutput:
        generator, discriminator = models["generator"], models["discriminator"]
        real = inputs.real["x"]
        fake = generator(inputs.normal([latent_dim]), training=True)
        real_logits = discriminator(real, training=True)
        fake_logits = discriminator(fake, training=True)
        adversarial = inputs.mean(loss.discriminator(real_logits, fake_logits))
        metrics = {"adversarial": adversarial,
                   "real_score": inputs.mean(tf.reshape(real_logits, [-1])),
                   "fake_score": inputs.mean(tf.reshape(fake_logits, [-1]))}
        total = adversarial
        if config.penalty == "gradient_penalty":
            weights = inputs.uniform([], salt=1)
            penalty = inputs.mean(regularizers.wgan_gp_penalty(
                lambda x: discriminator(x, training=True), real, fake, weights))
            metrics["gradient_penalty"] = penalty
            total = total + config.penalty_weight * penalty
        return LossOutput(loss=total, metrics=metrics)

    def generator_loss(models, inputs: StepInputs) -> LossOutput:
        fake = models["generator"](inputs.normal([latent_dim]), training=True)
        fake_logits = models["discriminator"](fake, training=True)
        return LossOutput(loss=inputs.mean(loss.generator(fake_logits)))

    clip = None
    if config.clip_value > 0:
        def clip(models):
            regularizers.clip_weights(models["discriminator"].trainable_variables, config.clip_value)

    d_metrics = ("adversarial", "real_score", "fake_score")
    if config.penalty == "gradient_penalty":
        d_metrics += ("gradient_penalty",)
    return (
        Phase(name="discriminator", models=("discriminator",), loss=discriminator_loss,
              metrics=d_metrics, repeats=config.d_steps, after_update=clip),
        Phase(name="generator", models=("generator",), loss=generator_loss,
              repeats=config.g_steps, uses_data=False),
    )


def build_gan(config: Config, info, strategy: tf.distribute.Strategy) -> Setup:
    """Generator/discriminator setups: dcgan, wgan and wgan_gp differ only in their config."""
    check_dataset(config, info)
    with strategy.scope():
        generator, discriminator = _networks(config, info)
        models = {"generator": generator, "discriminator": discriminator}
        phases = adversarial_phases(config, config.latent_dim)
        learning_rates = {"discriminator": config.d_lr, "generator": config.g_lr}
        optimizers = {}
        for phase in phases:
            optimizer = _optimizer(config, learning_rates[phase.name])
            # Keras 3 creates slots lazily; a compiled step under a strategy needs them now.
            optimizer.build([v for name in phase.models for v in models[name].trainable_variables])
            optimizers[phase.name] = optimizer
    return Setup(models=models, optimizers=optimizers, phases=phases,
                 latent_shape=(config.latent_dim,),
                 sample=lambda noise: generator(noise, training=False))


SETUPS: dict[str, Callable[[Config, object, tf.distribute.Strategy], Setup]] = {
    "dcgan": build_gan,
    "wgan": build_gan,
    "wgan_gp": build_gan,
}


def build_setup(config: Config, info, strategy: tf.distribute.Strategy) -> Setup:
    """The registered setup for `--gan`."""
    if config.gan not in SETUPS:
        raise ConfigError(f"--gan={config.gan!r} has no registered setup; known: {', '.join(SETUPS)}.")
    return SETUPS[config.gan](config, info, strategy)
