"""The phases of generator/discriminator training, built from a config.

One discriminator phase (k = --d_steps updates) and one generator phase (--g_steps), with the
loss of `--loss`, an optional discriminator penalty (`--penalty`: WGAN-GP, DRAGAN, R1 or R2),
optional consistency regularization (bCR) and differentiable augmentation (`--diffaugment`).
With `--penalty_every=N > 1` the penalty becomes its own lazy phase that runs every N cycles
with its weight multiplied by N, so its strength per cycle is unchanged (StyleGAN2's lazy
regularization); it shares the discriminator's optimizer.

Random draws (stateless, replica-count independent) use fixed salts per purpose, so adding one
regularizer never changes the noise another one sees.
"""

from __future__ import annotations

from typing import Callable, Mapping

import keras
import tensorflow as tf

from gan import augment, losses, regularizers
from trainers import schedules
from trainers.config import Config
from trainers.phases import LossOutput, Phase, StepInputs

LATENT_SALT, INTERPOLATION_SALT, REAL_AUGMENT_SALT, FAKE_AUGMENT_SALT = 0, 1, 2, 3
DRAGAN_SALT, CONSISTENCY_SALT, GENERATOR_AUGMENT_SALT = 4, 5, 6
CONSISTENCY_POLICY = "translation"


def _augmenter(policy: str) -> Callable[[tf.Tensor, StepInputs, int], tf.Tensor]:
    """``augment(images, inputs, salt)``: DiffAugment with draws for the global batch."""
    if not policy:
        return lambda images, inputs, salt: images
    draws = augment.num_draws(policy)
    return lambda images, inputs, salt: augment.diff_augment(
        images, policy, inputs.uniform([draws], salt=salt))


def penalty_values(config: Config, discriminator: keras.Model, real, fake,
                   inputs: StepInputs) -> tf.Tensor:
    """The per-example `--penalty` on the un-augmented discriminator (no weight applied)."""
    critic = lambda x: discriminator(x, training=True)  # noqa: E731
    if config.penalty == "gradient_penalty":
        return regularizers.wgan_gp_penalty(critic, real, fake, inputs.uniform([], salt=INTERPOLATION_SALT))
    if config.penalty == "dragan":
        uniform = inputs.uniform(real.shape[1:], salt=DRAGAN_SALT)
        return regularizers.dragan_penalty(critic, real, regularizers.dragan_perturbation(real, uniform))
    if config.penalty == "r1":
        return regularizers.r1_penalty(critic, real)
    return regularizers.r2_penalty(critic, fake)


def adversarial_phases(config: Config, latent_dim: int, *, penalty_weight: tf.Variable | None = None,
                       generator_after_update=None) -> tuple[Phase, ...]:
    """The phases of one cycle (see the module docstring).

    `penalty_weight` (a variable, so callbacks may change it) is ramped in over
    --penalty_ramp_steps cycles inside the compiled step.
    """
    loss = losses.get_loss(config.loss)
    base_penalty_weight = config.penalty_weight if penalty_weight is None else penalty_weight
    augmented = _augmenter(config.diffaugment)
    consistency_augment = _augmenter(CONSISTENCY_POLICY)
    has_penalty = config.penalty != "none"
    lazy = has_penalty and config.penalty_every > 1
    # Spectral normalization rewrites D's kernels on every training-mode call: the generator
    # step calls D in inference mode then, so it changes no discriminator variable.
    d_training_in_g_step = not config.d_spectral_norm

    def penalty_weight_now(inputs: StepInputs) -> tf.Tensor:
        return base_penalty_weight * schedules.linear_ramp(inputs.cycle, config.penalty_ramp_steps)

    def discriminator_loss(models, inputs: StepInputs) -> LossOutput:
        generator, discriminator = models["generator"], models["discriminator"]
        real = inputs.real["x"]
        fake = generator(inputs.normal([latent_dim], salt=LATENT_SALT), training=True)
        real_logits = discriminator(augmented(real, inputs, REAL_AUGMENT_SALT), training=True)
        fake_logits = discriminator(augmented(fake, inputs, FAKE_AUGMENT_SALT), training=True)
        adversarial = inputs.mean(loss.discriminator(real_logits, fake_logits))
        metrics = {"adversarial": adversarial,
                   "real_score": inputs.mean(tf.reshape(real_logits, [-1])),
                   "fake_score": inputs.mean(tf.reshape(fake_logits, [-1]))}
        total = adversarial
        if has_penalty and not lazy:
            penalty = inputs.mean(penalty_values(config, discriminator, real, fake, inputs))
            metrics[config.penalty] = penalty
            total = total + penalty_weight_now(inputs) * penalty
        if config.consistency_weight > 0:
            consistency = inputs.mean(regularizers.consistency_loss(
                lambda x: discriminator(x, training=True), real,
                consistency_augment(real, inputs, CONSISTENCY_SALT)))
            metrics["consistency"] = consistency
            total = total + config.consistency_weight * consistency
        return LossOutput(loss=total, metrics=metrics)

    def lazy_penalty_loss(models, inputs: StepInputs) -> LossOutput:
        generator, discriminator = models["generator"], models["discriminator"]
        real = inputs.real["x"]
        fake = generator(inputs.normal([latent_dim], salt=LATENT_SALT), training=True)
        penalty = inputs.mean(penalty_values(config, discriminator, real, fake, inputs))
        weighted = penalty_weight_now(inputs) * penalty * float(config.penalty_every)
        return LossOutput(loss=weighted, metrics={config.penalty: penalty})

    def generator_loss(models, inputs: StepInputs) -> LossOutput:
        fake = models["generator"](inputs.normal([latent_dim], salt=LATENT_SALT), training=True)
        fake_logits = models["discriminator"](augmented(fake, inputs, GENERATOR_AUGMENT_SALT),
                                              training=d_training_in_g_step)
        return LossOutput(loss=inputs.mean(loss.generator(fake_logits)))

    clip = None
    if config.clip_value > 0:
        def clip(models, cycle):
            del cycle
            regularizers.clip_weights(models["discriminator"].trainable_variables, config.clip_value)

    d_metrics = ("adversarial", "real_score", "fake_score")
    d_metrics += (config.penalty,) if has_penalty and not lazy else ()
    d_metrics += ("consistency",) if config.consistency_weight > 0 else ()
    phases = [
        Phase(name="discriminator", models=("discriminator",), loss=discriminator_loss,
              metrics=d_metrics, repeats=config.d_steps, after_update=clip,
              clip_norm=config.d_clip_global_norm),
    ]
    if lazy:
        phases.append(Phase(name="penalty", models=("discriminator",), loss=lazy_penalty_loss,
                            metrics=(config.penalty,), every=config.penalty_every,
                            after_update=clip, clip_norm=config.d_clip_global_norm))
    phases.append(Phase(name="generator", models=("generator",), loss=generator_loss,
                        repeats=config.g_steps, uses_data=False,
                        after_update=generator_after_update, clip_norm=config.g_clip_global_norm))
    return tuple(phases)


# Phases that update with another phase's optimizer (shared Adam moments, as in StyleGAN2).
SHARED_OPTIMIZERS: Mapping[str, str] = {"penalty": "discriminator"}
