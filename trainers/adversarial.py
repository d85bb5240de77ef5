"""The phases of generator/discriminator training, built from a config.

One discriminator phase (k = --d_steps updates) and one generator phase (--g_steps), with the
loss of `--loss`, an optional discriminator penalty (`--penalty`: WGAN-GP, DRAGAN, R1 or R2),
optional consistency regularization (bCR) and differentiable augmentation (`--diffaugment`).
With `--penalty_every=N > 1` the penalty becomes its own lazy phase that runs every N cycles
with its weight multiplied by N, so its strength per cycle is unchanged (StyleGAN2's lazy
regularization); it updates with the discriminator's optimizer (shared Adam moments, as in
StyleGAN2).

`--update_order=simultaneous` replaces the two phases by one, "simultaneous": the TensorFlow DCGAN
tutorial's train_step. One generator pass and one discriminator pass on the real and on the fake
batch feed both losses; D's variables follow the D loss (with its penalty and consistency terms)
and G's the G loss, each with its own optimizer ("discriminator", "generator"), from one tape.
So G learns against the discriminator of the START of the cycle, not the freshly updated one,
and each cycle costs one forward pass of G and two of D fewer than alternating order. It reports
"simultaneous/loss_discriminator" and "simultaneous/loss_generator" (and "simultaneous/loss",
their sum), with per-optimizer "grad_norm_<model>" and "learning_rate_<model>". D runs in
training mode for both losses: with spectral normalization each training-mode call runs a power
iteration and writes the normalized kernel into the kernel variable (Keras 3), so G's gradient
flows through the freshly normalized D, where alternating order's G step sees D in inference
mode, as the last D update left it. A lazy penalty stays a phase of its own after it.

Random draws (stateless, replica-count independent) use fixed salts per purpose, so adding one
regularizer never changes the noise another one sees.
"""

from __future__ import annotations

from typing import Callable

import keras
import tensorflow as tf

from gan import augment, losses, regularizers
from trainers.engine import schedules
from trainers.config.fields import Config
from trainers.engine.phases import LossOutput, Phase, StepInputs

LATENT_SALT, INTERPOLATION_SALT, REAL_AUGMENT_SALT, FAKE_AUGMENT_SALT = 0, 1, 2, 3
DRAGAN_SALT, CONSISTENCY_SALT, GENERATOR_AUGMENT_SALT = 4, 5, 6
CONSISTENCY_POLICY = "translation"


def augmenter(policy: str) -> Callable[[tf.Tensor, StepInputs, int], tf.Tensor]:
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


def generator_adversarial_loss(config: Config, loss: losses.AdversarialLoss, fake_logits,
                               inputs: StepInputs) -> tf.Tensor:
    """G's adversarial loss on its fakes' logits: the replica's share of the global mean, over
    only the fakes top-k training keeps when --topk < 1.

    Each replica keeps the top fraction of its own fakes (Sinha et al. keep the top of the whole
    batch): ranking across replicas would need an all-gather of the scores in every generator
    update. With one replica the two are the same.
    """
    per_example = loss.generator(fake_logits)
    if config.topk < 1:
        fraction = schedules.top_k_fraction(inputs.cycle, config.topk, config.topk_decay_steps)
        per_example = per_example * losses.top_k_weights(fake_logits, fraction)
    return inputs.mean(per_example)


def adversarial_phases(config: Config, latent_dim: int, *, penalty_weight: tf.Variable | None = None,
                       generator_after_update=None) -> tuple[Phase, ...]:
    """The phases of one cycle (see the module docstring).

    `penalty_weight` (a variable, so callbacks may change it) is ramped in over
    --penalty_ramp_steps cycles inside the compiled step.
    """
    loss = losses.get_loss(config.loss)
    base_penalty_weight = config.penalty_weight if penalty_weight is None else penalty_weight
    augmented = augmenter(config.diffaugment)
    consistency_augment = augmenter(CONSISTENCY_POLICY)
    has_penalty = config.penalty != "none"
    lazy = has_penalty and config.penalty_every > 1
    # Spectral normalization rewrites D's kernels on every training-mode call: the generator
    # step calls D in inference mode then, so it changes no discriminator variable. (The
    # simultaneous phase has one D pass, in training mode, for both losses: see the docstring.)
    d_training_in_g_step = not config.d_spectral_norm

    def penalty_weight_now(inputs: StepInputs) -> tf.Tensor:
        return base_penalty_weight * schedules.linear_ramp(inputs.cycle, config.penalty_ramp_steps)

    def discriminator_objective(discriminator: keras.Model, inputs: StepInputs, real, fake):
        """D's loss on one real and one fake batch with its regularizers:
        (total, metrics, the fake batch's logits)."""
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
        return total, metrics, fake_logits

    def discriminator_loss(models, inputs: StepInputs) -> LossOutput:
        fake = models["generator"](inputs.normal([latent_dim], salt=LATENT_SALT), training=True)
        total, metrics, _ = discriminator_objective(models["discriminator"], inputs,
                                                    inputs.real["x"], fake)
        return LossOutput(loss=total, metrics=metrics)

    def simultaneous_loss(models, inputs: StepInputs) -> LossOutput:
        fake = models["generator"](inputs.normal([latent_dim], salt=LATENT_SALT), training=True)
        d_loss, metrics, fake_logits = discriminator_objective(models["discriminator"], inputs,
                                                               inputs.real["x"], fake)
        g_loss = generator_adversarial_loss(config, loss, fake_logits, inputs)
        return LossOutput(loss=d_loss + g_loss, metrics=metrics,
                          model_losses={"discriminator": d_loss, "generator": g_loss})

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
        return LossOutput(loss=generator_adversarial_loss(config, loss, fake_logits, inputs))

    d_metrics = ("adversarial", "real_score", "fake_score")
    d_metrics += (config.penalty,) if has_penalty and not lazy else ()
    d_metrics += ("consistency",) if config.consistency_weight > 0 else ()
    return assemble_phases(
        config, discriminator_loss=discriminator_loss, generator_loss=generator_loss,
        simultaneous_loss=simultaneous_loss, lazy_penalty_loss=lazy_penalty_loss if lazy else None,
        d_metrics=d_metrics, generator_after_update=generator_after_update)


def assemble_phases(config: Config, *, discriminator_loss, generator_loss, simultaneous_loss,
                    lazy_penalty_loss, d_metrics: tuple[str, ...], g_metrics: tuple[str, ...] = (),
                    generator_after_update=None) -> tuple[Phase, ...]:
    """The phase list of a generator/discriminator setup from its losses, in `--update_order`.

    Alternating: discriminator (k = --d_steps), the lazy penalty when `lazy_penalty_loss` is
    given, then generator. Simultaneous: one phase updating both models from one forward pass
    (`simultaneous_loss` returns per-model losses), then the lazy penalty. Shared by every
    G/D setup (dcgan-style presets, cgan, acgan) so they schedule identically. WGAN weight
    clipping (--clip_value) runs after every discriminator update.
    """
    clip = None
    if config.clip_value > 0:
        def clip(models, cycle):
            del cycle
            regularizers.clip_weights(models["discriminator"].trainable_variables, config.clip_value)

    if config.update_order == "simultaneous":
        # One clip norm per phase: config.validate requires --d_ and --g_clip_global_norm equal.
        phases = [Phase(name="simultaneous", models=("discriminator", "generator"),
                        optimizers=("discriminator", "generator"), loss=simultaneous_loss,
                        metrics=d_metrics, per_model_losses=True,
                        after_update=generator_after_update, clip_norm=config.d_clip_global_norm)]
    else:
        phases = [Phase(name="discriminator", models=("discriminator",), loss=discriminator_loss,
                        metrics=d_metrics, repeats=config.d_steps, after_update=clip,
                        clip_norm=config.d_clip_global_norm)]
    if lazy_penalty_loss is not None:
        phases.append(Phase(name="penalty", models=("discriminator",), loss=lazy_penalty_loss,
                            metrics=(config.penalty,), every=config.penalty_every,
                            after_update=clip, clip_norm=config.d_clip_global_norm,
                            optimizers=("discriminator",)))
    if config.update_order != "simultaneous":
        phases.append(Phase(name="generator", models=("generator",), loss=generator_loss,
                            metrics=g_metrics, repeats=config.g_steps, uses_data=False,
                            after_update=generator_after_update,
                            clip_norm=config.g_clip_global_norm))
    return tuple(phases)
