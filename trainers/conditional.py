"""Class-conditional setups: `--gan=cgan` (projection discriminator) and `--gan=acgan`.

Both are the GAN of `trainers.adversarial` with labels added: the discriminator sees real
images with their dataset labels and fakes generated for labels drawn uniformly over the
classes; the generator step draws its own labels and noise. DiffAugment, the `--penalty`
R1/R2/DRAGAN (also lazily), consistency regularization, weight and gradient clipping, the EMA
generator and `--update_order=simultaneous` work as in the unconditional setups.

- cgan (Miyato & Koyama 2018): conditional batch norm in the generator, projection
  discriminator D(x, y); `--loss` (hinge in the preset) on D(x, y).
- acgan (Odena et al. 2017): label one-hot next to the noise, discriminator with a class head.
  D minimises adversarial + aux_weight * (CE(real class) + CE(fake class)), G minimises
  adversarial + aux_weight * CE(the class it was asked for); the class losses and accuracies
  are reported as phase metrics.

Random draws use `trainers.adversarial`'s salts, plus LABEL_SALT for the fake labels.
"""

from __future__ import annotations

import tensorflow as tf

from gan import conditional, losses, regularizers
from trainers import adversarial, presets
from trainers.engine import schedules
from trainers.config.fields import Config, ConfigError
from trainers.engine.phases import LossOutput, Phase, StepInputs, optimizer_models, optimizer_updates_after

LABEL_SALT = 8
_UNSUPPORTED_PENALTIES = ("gradient_penalty",)


def check_conditional(config: Config, info) -> None:
    """Rejects data and flags a conditional setup cannot use, before anything is built."""
    if info.kind != "image" or not info.num_classes:
        what = "2-D points" if info.kind != "image" else "images without class labels"
        raise ConfigError(
            f"--gan={config.gan} is class-conditional and needs labelled images, but "
            f"--dataset={config.dataset!r} has {what}; use --dataset=fashion_mnist or a labelled "
            "tfds:<name>, or an unconditional --gan such as dcgan or sngan.")
    if config.penalty in _UNSUPPORTED_PENALTIES:
        raise ConfigError(
            f"--penalty={config.penalty!r} is not supported with --gan={config.gan}: it scores "
            "interpolates between a real image of one class and a fake of another, which have no "
            "label; use --penalty=r1, r2 or dragan, or none.")


def fake_labels(inputs: StepInputs, num_classes: int) -> tf.Tensor:
    """Labels for this replica's fakes, uniform over the classes (int32, [replica_batch])."""
    drawn = tf.floor(inputs.uniform([], salt=LABEL_SALT) * num_classes)
    return tf.minimum(tf.cast(drawn, tf.int32), num_classes - 1)


def _scores(classifier: bool, discriminator, images, labels, *, training: bool):
    """(adversarial logits, class logits or None) of the conditional discriminator."""
    if classifier:
        logits, class_logits = discriminator(images, training=training)
        return logits, class_logits
    return discriminator([images, labels], training=training), None


def conditional_phases(config: Config, *, num_classes: int,
                       penalty_weight: tf.Variable | None = None,
                       aux_weight: tf.Variable | None = None,
                       generator_after_update=None) -> tuple[Phase, ...]:
    """The discriminator (+ lazy penalty) and generator phases of `config.gan`.

    `penalty_weight` and `aux_weight` (acgan) default to --penalty_weight and --aux_weight;
    pass variables to let callbacks change them (they are read inside the compiled step).
    """
    if config.gan not in presets.CONDITIONAL_SETUPS:
        raise ValueError(f"conditional_phases builds {presets.CONDITIONAL_SETUPS}, got "
                         f"--gan={config.gan!r}.")
    classifier = config.gan == "acgan"
    penalty_weight = config.penalty_weight if penalty_weight is None else penalty_weight
    aux_weight = config.aux_weight if aux_weight is None else aux_weight
    loss = losses.get_loss(config.loss)
    augmented = adversarial.augmenter(config.diffaugment)
    consistency_augment = adversarial.augmenter(adversarial.CONSISTENCY_POLICY)
    has_penalty = config.penalty != "none"
    lazy = has_penalty and config.penalty_every > 1
    # As in `trainers.adversarial`: spectral normalization rewrites D's kernels in training mode.
    d_training_in_g_step = not config.d_spectral_norm

    def generate(models, inputs: StepInputs):
        labels = fake_labels(inputs, num_classes)
        noise = inputs.normal([config.latent_dim], salt=adversarial.LATENT_SALT)
        return models["generator"]([noise, labels], training=True), labels

    def critic(discriminator, labels):
        """D as a function of images alone, at fixed labels (what the regularizers take)."""
        return lambda images, training=True: _scores(
            classifier, discriminator, images, labels, training=training)[0]

    def penalty(models, inputs: StepInputs, real, real_labels, fake, labels) -> tf.Tensor:
        bound = critic(models["discriminator"], labels if config.penalty == "r2" else real_labels)
        return inputs.mean(adversarial.penalty_values(config, bound, real, fake, inputs))

    def penalty_weight_now(inputs: StepInputs) -> tf.Tensor:
        return penalty_weight * schedules.linear_ramp(inputs.cycle, config.penalty_ramp_steps)

    def discriminator_objective(models, inputs: StepInputs, fake, labels):
        """D's loss on the real batch and one fake batch with its regularizers:
        (total, metrics, the fakes' logits); acgan's metrics include `fake_class_loss`."""
        discriminator = models["discriminator"]
        real = inputs.real["x"]
        real_labels = tf.cast(inputs.real["label"], tf.int32)
        real_logits, real_classes = _scores(
            classifier, discriminator, augmented(real, inputs, adversarial.REAL_AUGMENT_SALT),
            real_labels, training=True)
        fake_logits, fake_classes = _scores(
            classifier, discriminator, augmented(fake, inputs, adversarial.FAKE_AUGMENT_SALT),
            labels, training=True)
        total = adversarial_loss = inputs.mean(loss.discriminator(real_logits, fake_logits))
        metrics = {"adversarial": adversarial_loss,
                   "real_score": inputs.mean(tf.reshape(real_logits, [-1])),
                   "fake_score": inputs.mean(tf.reshape(fake_logits, [-1]))}
        if classifier:
            real_class = inputs.mean(conditional.classification_loss(real_labels, real_classes))
            fake_class = inputs.mean(conditional.classification_loss(labels, fake_classes))
            metrics.update(
                real_class_loss=real_class, fake_class_loss=fake_class,
                real_accuracy=inputs.mean(conditional.classification_accuracy(real_labels, real_classes)),
                fake_accuracy=inputs.mean(conditional.classification_accuracy(labels, fake_classes)))
            total = total + aux_weight * (real_class + fake_class)
        if has_penalty and not lazy:
            metrics[config.penalty] = penalty(models, inputs, real, real_labels, fake, labels)
            total = total + penalty_weight_now(inputs) * metrics[config.penalty]
        if config.consistency_weight > 0:
            metrics["consistency"] = inputs.mean(regularizers.consistency_loss(
                critic(discriminator, real_labels), real,
                consistency_augment(real, inputs, adversarial.CONSISTENCY_SALT)))
            total = total + config.consistency_weight * metrics["consistency"]
        return total, metrics, fake_logits

    def discriminator_loss(models, inputs: StepInputs) -> LossOutput:
        total, metrics, _ = discriminator_objective(models, inputs, *generate(models, inputs))
        return LossOutput(loss=total, metrics=metrics)

    def simultaneous_loss(models, inputs: StepInputs) -> LossOutput:
        """D's and G's losses from one pass (see `trainers.adversarial`); acgan's G class loss
        is then D's fake-class loss, the same cross-entropy on the same logits."""
        d_loss, metrics, fake_logits = discriminator_objective(models, inputs,
                                                               *generate(models, inputs))
        g_loss = adversarial.generator_adversarial_loss(config, loss, fake_logits, inputs)
        if classifier:
            g_loss = g_loss + aux_weight * metrics["fake_class_loss"]
        return LossOutput(loss=d_loss + g_loss, metrics=metrics,
                          model_losses={"discriminator": d_loss, "generator": g_loss})

    def lazy_penalty_loss(models, inputs: StepInputs) -> LossOutput:
        real = inputs.real["x"]
        fake, labels = generate(models, inputs)
        value = penalty(models, inputs, real, tf.cast(inputs.real["label"], tf.int32), fake, labels)
        weighted = penalty_weight_now(inputs) * value * float(config.penalty_every)
        return LossOutput(loss=weighted, metrics={config.penalty: value})

    def generator_loss(models, inputs: StepInputs) -> LossOutput:
        fake, labels = generate(models, inputs)
        logits, classes = _scores(
            classifier, models["discriminator"],
            augmented(fake, inputs, adversarial.GENERATOR_AUGMENT_SALT), labels,
            training=d_training_in_g_step)
        total = adversarial_loss = adversarial.generator_adversarial_loss(config, loss, logits, inputs)
        if not classifier:
            return LossOutput(loss=total)
        class_loss = inputs.mean(conditional.classification_loss(labels, classes))
        return LossOutput(loss=total + aux_weight * class_loss, metrics={
            "adversarial": adversarial_loss, "class_loss": class_loss,
            "accuracy": inputs.mean(conditional.classification_accuracy(labels, classes))})

    d_metrics = ("adversarial", "real_score", "fake_score")
    if classifier:
        d_metrics += ("real_class_loss", "fake_class_loss", "real_accuracy", "fake_accuracy")
    d_metrics += (config.penalty,) if has_penalty and not lazy else ()
    d_metrics += ("consistency",) if config.consistency_weight > 0 else ()
    return adversarial.assemble_phases(
        config, discriminator_loss=discriminator_loss, generator_loss=generator_loss,
        simultaneous_loss=simultaneous_loss, lazy_penalty_loss=lazy_penalty_loss if lazy else None,
        d_metrics=d_metrics, g_metrics=("adversarial", "class_loss", "accuracy") if classifier else (),
        generator_after_update=generator_after_update)


def _generator(config: Config, info, name: str):
    resolution, _, channels = info.shape
    build = conditional.acgan_generator if config.gan == "acgan" else conditional.conditional_generator
    return build(resolution=resolution, channels=channels, latent_dim=config.latent_dim,
                 num_classes=info.num_classes, width=config.g_width,
                 extra_blocks=config.g_extra_blocks, upsample=config.g_upsample, name=name)


def _discriminator(config: Config, info):
    resolution, _, channels = info.shape
    build = (conditional.acgan_discriminator if config.gan == "acgan"
             else conditional.projection_discriminator)
    return build(resolution=resolution, channels=channels, num_classes=info.num_classes,
                 width=config.d_width, normalization=config.d_normalization,
                 spectral_norm=config.d_spectral_norm, dropout=config.d_dropout,
                 extra_blocks=config.d_extra_blocks)


def build_conditional(config: Config, info, strategy: tf.distribute.Strategy) -> presets.Setup:
    """The cgan or acgan setup (`config.gan`) for a labelled image dataset `info`.

    Models: "generator", "discriminator" and, with --ema_halflife_kimg, "generator_ema";
    optimizers "discriminator" and "generator". `sample(noise)` draws balanced labels
    (`tf.range(N) % num_classes`); `sample_labeled(noise, labels)` the given ones.
    """
    presets.check_dataset(config, info)  # check_conditional included
    num_classes = info.num_classes
    use_ema = config.ema_halflife_kimg > 0
    weights = {"penalty": tf.Variable(float(config.penalty_weight), trainable=False,
                                      name="penalty_weight")}
    if config.gan == "acgan":
        weights["aux"] = tf.Variable(float(config.aux_weight), trainable=False, name="aux_weight")
    phases = conditional_phases(
        config, num_classes=num_classes, penalty_weight=weights["penalty"],
        aux_weight=weights.get("aux"),
        generator_after_update=presets.ema_updater(config) if use_ema else None)
    totals = optimizer_updates_after(phases, config.train_steps)
    warmups = optimizer_updates_after(phases, config.lr_warmup_steps)
    rates = {"discriminator": (config.d_lr, config.d_lr_schedule),
             "generator": (config.g_lr, config.g_lr_schedule)}
    with strategy.scope(), presets.dtype_policy(config.precision):
        models = {"generator": _generator(config, info, "generator"),
                  "discriminator": _discriminator(config, info)}
        if use_ema:
            models["generator_ema"] = _generator(config, info, "generator_ema")
            models["generator_ema"].set_weights(models["generator"].get_weights())
        optimizers, scales = {}, {}
        for name, owned in optimizer_models(phases).items():
            base_rate, schedule = rates[name]
            optimizers[name], scales[name] = presets.phase_optimizer(
                config, base_rate=base_rate, schedule=schedule, total_updates=totals[name],
                warmup_updates=warmups[name])
            # Keras 3 creates slots lazily; a compiled step under a strategy needs them now.
            optimizers[name].build([v for model in owned for v in models[model].trainable_variables])
    sampler = models["generator_ema" if use_ema and config.use_ema else "generator"]

    def sample_labeled(noise: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return sampler([noise, tf.cast(labels, tf.int32)], training=False)

    def sample(noise: tf.Tensor) -> tf.Tensor:
        return sample_labeled(noise, tf.range(tf.shape(noise)[0]) % num_classes)

    return presets.Setup(models=models, optimizers=optimizers, phases=phases,
                         latent_shape=(config.latent_dim,), sample=sample,
                         learning_rate_scales=scales, loss_weights=weights,
                         num_classes=num_classes, sample_labeled=sample_labeled)
