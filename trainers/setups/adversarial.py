"""The phases of generator/discriminator training, built from a config: one builder for every
G/D setup, unconditional or class-conditional (`Conditioning`).

One discriminator phase (k = --d_updates updates) and one generator phase (--g_updates), with the
loss of `--loss`, an optional discriminator penalty (`--penalty`, one of `PENALTIES`: WGAN-GP,
its one-sided form, DRAGAN, R1, R2 or both), optional consistency regularization (bCR) and
differentiable augmentation (`--diffaugment`). A loss that pairs each fake with a real example
(`AdversarialLoss.pairs_real`: the relativistic loss) makes the generator phase draw a real
batch too and score it with D. With --penalty_final_factor the penalty's weight falls along a
half cosine over the run (R3GAN's gamma), following --train_cycles or --train_time.
With `--penalty_every=N > 1` the penalty becomes its own lazy phase that runs every N cycles
with its weight multiplied by N x k (the N cycles' k = --d_updates discriminator updates each had
the eager penalty), so its average strength is unchanged (StyleGAN2's lazy regularization); it
updates with the discriminator's optimizer (shared Adam moments, as in StyleGAN2).

`--update_order=simultaneous` replaces the two phases by one, "simultaneous": the TensorFlow DCGAN
tutorial's train_step. One generator pass and one discriminator pass on the real and on the fake
batch feed both losses; D's variables follow the D loss (with its penalty and consistency terms)
and G's the G loss, each with its own optimizer ("discriminator", "generator"), from one tape.
So G learns against the discriminator of the START of the cycle, not the freshly updated one,
and each cycle costs one forward pass of G and two of D fewer than alternating order. It reports
"simultaneous/loss_discriminator" and "simultaneous/loss_generator" (and "simultaneous/loss",
their sum), with per-optimizer "grad_norm_<model>" and "learning_rate_<model>". D runs in
training mode for both losses: with spectral normalization each training-mode call runs a power
iteration and stores its vector (`gan.spectral_norm`), so G's gradient flows through D
normalized by the fresh estimate, where alternating order's G step sees D in inference mode,
with the estimate the last D update left. A lazy penalty stays a phase of its own after it.

Random draws (stateless, replica-count independent) use fixed salts per purpose, so adding one
regularizer never changes the noise another one sees.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import keras
import tensorflow as tf

from gan import augment, conditional, losses, regularizers
from trainers.engine import schedules
from trainers.config.flags import Config
from trainers.engine.phases import LossOutput, Phase, Privacy, StepInputs

LATENT_SALT, INTERPOLATION_SALT, REAL_AUGMENT_SALT, FAKE_AUGMENT_SALT = 0, 1, 2, 3
DRAGAN_SALT, CONSISTENCY_SALT, GENERATOR_AUGMENT_SALT, LABEL_SALT = 4, 5, 6, 8
GENERATOR_REAL_AUGMENT_SALT = 9
CONSISTENCY_POLICY = "translation"


def augmenter(policy: str) -> Callable[[tf.Tensor, StepInputs, int], tf.Tensor]:
    """``augment(images, inputs, salt)``: DiffAugment with draws for the global batch."""
    if not policy:
        return lambda images, inputs, salt: images
    draws = augment.num_draws(policy)
    return lambda images, inputs, salt: augment.diff_augment(
        images, policy, inputs.uniform([draws], salt=salt))


@dataclasses.dataclass(frozen=True)
class Critics:
    """The discriminator as ``critic(images) -> logits`` (un-augmented, in training mode) at
    fixed labels: `real` at the real batch's labels, `fake` at the fakes' (the same function
    when unconditional). A penalty differentiates the one of the images it reads."""

    real: Callable[[tf.Tensor], tf.Tensor]
    fake: Callable[[tf.Tensor], tf.Tensor]


def _interpolated(penalty_fn):
    """A penalty at interpolates: `penalty_fn(critic, real, fake, weights)` with per-example
    interpolation weights drawn uniform in [0, 1), D bound to the real labels."""
    return lambda critics, real, fake, inputs: penalty_fn(
        critics.real, real, fake, inputs.uniform([], salt=INTERPOLATION_SALT))


def _dragan(critics, real, fake, inputs):
    del fake
    uniform = inputs.uniform(real.shape[1:], salt=DRAGAN_SALT)
    return regularizers.dragan_penalty(critics.real, real,
                                       regularizers.dragan_perturbation(real, uniform))


def _r1_r2(critics, real, fake, inputs):
    """R1 on the reals plus R2 on the fakes (R3GAN): one weight, gamma / 2, for both."""
    del inputs
    return regularizers.r1_penalty(critics.real, real) + regularizers.r2_penalty(critics.fake, fake)


# Each `--penalty` (but none): ``values(critics, real, fake, inputs)``, per example, unweighted.
PENALTIES = {
    "gradient_penalty": _interpolated(regularizers.wgan_gp_penalty),
    "one_sided_gradient_penalty": _interpolated(regularizers.one_sided_gradient_penalty),
    "dragan": _dragan,
    "r1": lambda critics, real, fake, inputs: regularizers.r1_penalty(critics.real, real),
    "r2": lambda critics, real, fake, inputs: regularizers.r2_penalty(critics.fake, fake),
    "r1_r2": _r1_r2,
}


def penalty_values(name: str, critics: Critics, real, fake, inputs: StepInputs) -> tf.Tensor:
    """The per-example penalty `name` (a `--penalty` but none) of `critics`, no weight applied."""
    return PENALTIES[name](critics, real, fake, inputs)


def lazy_penalty_gain(config: Config) -> int:
    """The factor on the weight of a lazy penalty: the discriminator updates it stands in for,
    --penalty_every cycles of --d_updates updates each, so the penalty's summed gradient over
    those cycles is the eager one's (StyleGAN2 counts its interval in discriminator updates)."""
    return config.penalty_every * config.d_updates


def generator_adversarial_loss(loss: losses.AdversarialLoss, fake_logits, inputs: StepInputs, *,
                               real_logits=None, topk: float = 1.0,
                               topk_decay_cycles: int = 0) -> tf.Tensor:
    """G's adversarial loss on its fakes' logits (paired with `real_logits` when the loss
    `pairs_real`): the replica's share of the global mean, over only the fakes (pairs) top-k
    training keeps when `topk` < 1 (--topk, --topk_decay_cycles).

    Each replica keeps the top fraction of its own fakes (Sinha et al. keep the top of the whole
    batch): ranking across replicas would need an all-gather of the scores in every generator
    update. With one replica the two are the same.
    """
    per_example = (loss.generator(fake_logits, real_logits) if loss.pairs_real
                   else loss.generator(fake_logits))
    if topk < 1:
        fraction = schedules.top_k_fraction(inputs.cycle, topk, topk_decay_cycles)
        per_example = per_example * losses.top_k_weights(fake_logits, fraction)
    return inputs.mean(per_example)


@dataclasses.dataclass(frozen=True)
class Conditioning:
    """How labels enter a generator/discriminator pair: none (`num_classes` 0), or class labels
    fed to both networks. cgan: G([noise, labels]), projection D([images, labels]). acgan
    (`classifier`): G([noise, labels]), D(images) -> (logits, class logits), with the auxiliary
    class losses weighted by `aux_weight`."""

    num_classes: int = 0
    classifier: bool = False

    def __post_init__(self):
        if self.num_classes < 0 or (self.classifier and not self.num_classes):
            raise ValueError(f"Conditioning needs num_classes >= 0, and > 0 for a classifier; got "
                             f"num_classes={self.num_classes!r}, classifier={self.classifier!r}.")

    def labeled_sampler(self, generator: keras.Model):
        """``sample(noise, labels)`` of `generator` in inference mode; None when unconditional."""
        if not self.num_classes:
            return None
        return lambda noise, labels: generator([noise, tf.cast(labels, tf.int32)], training=False)

    def sampler(self, generator: keras.Model):
        """``sample(noise)`` of `generator` in inference mode; a conditional one draws the
        balanced labels ``range(N) % num_classes``."""
        labeled = self.labeled_sampler(generator)
        if labeled is None:
            return lambda noise: generator(noise, training=False)
        return lambda noise: labeled(noise, tf.range(tf.shape(noise)[0]) % self.num_classes)


def fake_labels(inputs: StepInputs, num_classes: int) -> tf.Tensor:
    """Labels for this replica's fakes, uniform over the classes (int32, [replica_batch])."""
    drawn = tf.floor(inputs.uniform([], salt=LABEL_SALT) * num_classes)
    return tf.minimum(tf.cast(drawn, tf.int32), num_classes - 1)


@dataclasses.dataclass(frozen=True, eq=False)
class LossSettings:
    """What the G/D losses below read: the few flags they use, not the whole config, so each
    loss is a function of (settings, models, inputs) that a test can call alone.

    `penalty_weight` and `aux_weight` may be variables (callbacks change them); the penalty's
    weight is ramped in over `penalty_ramp_cycles` cycles inside the compiled step.
    `lazy_gain` is 0 when the penalty (if any) is inside every discriminator update,
    else the gain of its lazy phase (`lazy_penalty_gain`). With `penalty_final_factor` != 1
    the weight also moves along a half cosine to that multiple of itself at the run's end
    (`total_cycles`, or `time_progress`, the share of --train_time used).
    """

    loss: losses.AdversarialLoss
    latent_dim: int
    conditioning: Conditioning = Conditioning()
    diffaugment: str = ""
    penalty: str = "none"
    penalty_weight: float | tf.Variable = 0.0
    penalty_ramp_cycles: int = 0
    lazy_gain: int = 0
    consistency_weight: float = 0.0
    aux_weight: float | tf.Variable = 0.0
    topk: float = 1.0
    topk_decay_cycles: int = 0
    d_spectral_norm: bool = False
    penalty_final_factor: float = 1.0
    total_cycles: int | None = None
    time_progress: tf.Variable | None = None

    @property
    def eager_penalty(self) -> bool:
        """Whether the penalty is a term of every discriminator update."""
        return self.penalty != "none" and not self.lazy_gain


def loss_settings(config: Config, latent_dim: int, conditioning: Conditioning,
                  penalty_weight: tf.Variable | None = None,
                  aux_weight: tf.Variable | None = None,
                  time_progress: tf.Variable | None = None) -> LossSettings:
    """The `LossSettings` of `config`; the weights default to --penalty_weight and --aux_weight;
    `time_progress` is the run's share of --train_time used (`building.train_time_progress`)."""
    lazy = config.penalty != "none" and config.penalty_every > 1
    return LossSettings(
        loss=losses.get_loss(config.loss), latent_dim=latent_dim, conditioning=conditioning,
        diffaugment=config.diffaugment, penalty=config.penalty,
        penalty_weight=config.penalty_weight if penalty_weight is None else penalty_weight,
        penalty_ramp_cycles=config.penalty_ramp_cycles,
        lazy_gain=lazy_penalty_gain(config) if lazy else 0,
        consistency_weight=config.consistency_weight,
        aux_weight=config.aux_weight if aux_weight is None else aux_weight,
        topk=config.topk, topk_decay_cycles=config.topk_decay_cycles,
        d_spectral_norm=config.d_spectral_norm, penalty_final_factor=config.penalty_final_factor,
        total_cycles=config.train_cycles, time_progress=time_progress)


def generate(settings: LossSettings, models, inputs: StepInputs):
    """(fakes, their labels or None) for this replica: labels drawn uniformly (LABEL_SALT)."""
    noise = inputs.normal([settings.latent_dim], salt=LATENT_SALT)
    num_classes = settings.conditioning.num_classes
    if not num_classes:
        return models["generator"](noise, training=True), None
    labels = fake_labels(inputs, num_classes)
    return models["generator"]([noise, labels], training=True), labels


def real_labels(conditioning: Conditioning, inputs: StepInputs):
    """The real batch's dataset labels (int32), or None when unconditional."""
    return tf.cast(inputs.real["label"], tf.int32) if conditioning.num_classes else None


def scores(conditioning: Conditioning, discriminator, images, labels, *, training: bool):
    """(adversarial logits, class logits or None)."""
    if conditioning.classifier:
        return discriminator(images, training=training)
    if conditioning.num_classes:
        return discriminator([images, labels], training=training), None
    return discriminator(images, training=training), None


def critic(conditioning: Conditioning, discriminator, labels):
    """D as a function of images alone, at fixed labels (what the regularizers take)."""
    return lambda images: scores(conditioning, discriminator, images, labels, training=True)[0]


def penalty(settings: LossSettings, models, inputs: StepInputs, real, fake, labels) -> tf.Tensor:
    """The replica's share of the mean --penalty, unweighted: the discriminator is bound to
    the real labels on real images, to the fakes' `labels` on fakes (`Critics`)."""
    conditioning, discriminator = settings.conditioning, models["discriminator"]
    critics = Critics(real=critic(conditioning, discriminator, real_labels(conditioning, inputs)),
                      fake=critic(conditioning, discriminator, labels))
    return inputs.mean(penalty_values(settings.penalty, critics, real, fake, inputs))


def penalty_weight_now(settings: LossSettings, inputs: StepInputs) -> tf.Tensor:
    """The penalty's weight at this cycle, ramped in over `penalty_ramp_cycles` and, with a
    `penalty_final_factor` != 1, moving along a half cosine to that multiple at the run's end."""
    weight = settings.penalty_weight * schedules.linear_ramp(inputs.cycle, settings.penalty_ramp_cycles)
    if settings.penalty_final_factor == 1:
        return weight
    progress = schedules.run_progress(inputs.cycle, total=settings.total_cycles,
                                      time_progress=settings.time_progress)
    return weight * schedules.cosine_between(progress, 1.0, settings.penalty_final_factor)


def class_metrics(inputs: StepInputs, labels_of_real, real_classes, labels, fake_classes) -> dict:
    """acgan's discriminator class losses and accuracies on the real and the fake batch."""
    return dict(
        real_class_loss=inputs.mean(conditional.classification_loss(labels_of_real, real_classes)),
        fake_class_loss=inputs.mean(conditional.classification_loss(labels, fake_classes)),
        real_accuracy=inputs.mean(conditional.classification_accuracy(labels_of_real, real_classes)),
        fake_accuracy=inputs.mean(conditional.classification_accuracy(labels, fake_classes)))


def discriminator_terms(settings: LossSettings, models, inputs: StepInputs, fake, labels):
    """D's loss on the real batch and one fake batch with its regularizers:
    (total, metrics, the reals' logits, the fakes' logits); acgan's metrics include
    `fake_class_loss`."""
    conditioning, augmented = settings.conditioning, augmenter(settings.diffaugment)
    discriminator = models["discriminator"]
    real, labels_of_real = inputs.real["x"], real_labels(conditioning, inputs)
    real_logits, real_classes = scores(
        conditioning, discriminator, augmented(real, inputs, REAL_AUGMENT_SALT), labels_of_real,
        training=True)
    fake_logits, fake_classes = scores(
        conditioning, discriminator, augmented(fake, inputs, FAKE_AUGMENT_SALT), labels, training=True)
    total = adversarial = inputs.mean(settings.loss.discriminator(real_logits, fake_logits))
    metrics = {"adversarial": adversarial,
               "real_score": inputs.mean(tf.reshape(real_logits, [-1])),
               "fake_score": inputs.mean(tf.reshape(fake_logits, [-1]))}
    if conditioning.classifier:
        metrics.update(class_metrics(inputs, labels_of_real, real_classes, labels, fake_classes))
        total = total + settings.aux_weight * (metrics["real_class_loss"] + metrics["fake_class_loss"])
    if settings.eager_penalty:
        metrics[settings.penalty] = penalty(settings, models, inputs, real, fake, labels)
        total = total + penalty_weight_now(settings, inputs) * metrics[settings.penalty]
    if settings.consistency_weight > 0:
        metrics["consistency"] = inputs.mean(regularizers.consistency_loss(
            critic(conditioning, discriminator, labels_of_real), real,
            augmenter(CONSISTENCY_POLICY)(real, inputs, CONSISTENCY_SALT)))
        total = total + settings.consistency_weight * metrics["consistency"]
    return total, metrics, real_logits, fake_logits


def discriminator_loss(settings: LossSettings, models, inputs: StepInputs) -> LossOutput:
    """D's loss on the real batch and fakes it generates."""
    fake, labels = generate(settings, models, inputs)
    total, metrics, _, _ = discriminator_terms(settings, models, inputs, fake, labels)
    return LossOutput(loss=total, metrics=metrics)


def prepared_fakes(settings: LossSettings, models, inputs: StepInputs) -> dict:
    """The private discriminator phase's `Privacy.prepare`: this replica's fakes (and labels), made
    once for the whole batch, so the generator's batch norm sees it whole."""
    fake, labels = generate(settings, models, inputs)
    return {"fake": fake} if labels is None else {"fake": fake, "fake_label": labels}


def private_discriminator_loss(settings: LossSettings, models, inputs: StepInputs) -> LossOutput:
    """D's loss on one microbatch of real examples and of the prepared fakes."""
    total, metrics, _, _ = discriminator_terms(
        settings, models, inputs, inputs.real["fake"], inputs.real.get("fake_label"))
    return LossOutput(loss=total, metrics=metrics)


def simultaneous_loss(settings: LossSettings, models, inputs: StepInputs) -> LossOutput:
    """D's and G's losses from one pass; acgan's G class loss is then D's fake-class loss,
    the same cross-entropy on the same logits."""
    fake, labels = generate(settings, models, inputs)
    d_loss, metrics, real_logits, fake_logits = discriminator_terms(
        settings, models, inputs, fake, labels)
    g_loss = generator_adversarial_loss(settings.loss, fake_logits, inputs, real_logits=real_logits,
                                        topk=settings.topk, topk_decay_cycles=settings.topk_decay_cycles)
    if settings.conditioning.classifier:
        g_loss = g_loss + settings.aux_weight * metrics["fake_class_loss"]
    return LossOutput(loss=d_loss + g_loss, metrics=metrics,
                      model_losses={"discriminator": d_loss, "generator": g_loss})


def lazy_penalty_loss(settings: LossSettings, models, inputs: StepInputs) -> LossOutput:
    """The lazy penalty phase's loss: the penalty x its ramped weight x `lazy_gain`."""
    fake, labels = generate(settings, models, inputs)
    value = penalty(settings, models, inputs, inputs.real["x"], fake, labels)
    weighted = penalty_weight_now(settings, inputs) * value * float(settings.lazy_gain)
    return LossOutput(loss=weighted, metrics={settings.penalty: value})


def paired_real_logits(settings: LossSettings, models, inputs: StepInputs, *, training: bool):
    """D's logits of the generator phase's real batch, for a loss that `pairs_real`; else None."""
    if not settings.loss.pairs_real:
        return None
    conditioning = settings.conditioning
    real = augmenter(settings.diffaugment)(inputs.real["x"], inputs, GENERATOR_REAL_AUGMENT_SALT)
    return scores(conditioning, models["discriminator"], real, real_labels(conditioning, inputs),
                  training=training)[0]


def generator_loss(settings: LossSettings, models, inputs: StepInputs) -> LossOutput:
    """G's loss on fakes it generates (with acgan's class loss on their drawn labels), paired
    with a real batch's logits when the loss `pairs_real`.

    Spectral normalization stores a power-iteration vector on every training-mode call: the
    generator step calls D in inference mode then, so it changes no discriminator variable.
    (The simultaneous phase has one D pass, in training mode, for both losses: see the module
    docstring.)
    """
    conditioning = settings.conditioning
    fake, labels = generate(settings, models, inputs)
    training = not settings.d_spectral_norm
    logits, classes = scores(conditioning, models["discriminator"],
                             augmenter(settings.diffaugment)(fake, inputs, GENERATOR_AUGMENT_SALT),
                             labels, training=training)
    total = adversarial = generator_adversarial_loss(
        settings.loss, logits, inputs,
        real_logits=paired_real_logits(settings, models, inputs, training=training),
        topk=settings.topk, topk_decay_cycles=settings.topk_decay_cycles)
    if not conditioning.classifier:
        return LossOutput(loss=total)
    class_loss = inputs.mean(conditional.classification_loss(labels, classes))
    return LossOutput(loss=total + settings.aux_weight * class_loss, metrics={
        "adversarial": adversarial, "class_loss": class_loss,
        "accuracy": inputs.mean(conditional.classification_accuracy(labels, classes))})


def discriminator_metrics(settings: LossSettings) -> tuple[str, ...]:
    """The metrics `discriminator_terms` reports, in order."""
    names = ("adversarial", "real_score", "fake_score")
    if settings.conditioning.classifier:
        names += ("real_class_loss", "fake_class_loss", "real_accuracy", "fake_accuracy")
    names += (settings.penalty,) if settings.eager_penalty else ()
    return names + (("consistency",) if settings.consistency_weight > 0 else ())


def adversarial_phases(config: Config, latent_dim: int, *,
                       conditioning: Conditioning = Conditioning(),
                       penalty_weight: tf.Variable | None = None,
                       aux_weight: tf.Variable | None = None,
                       generator_after_update=None,
                       time_progress: tf.Variable | None = None) -> tuple[Phase, ...]:
    """The phases of one cycle (see the module docstring), unconditional or conditioned.

    `penalty_weight` (a variable, so callbacks may change it) is ramped in over
    --penalty_ramp_cycles cycles inside the compiled step; `aux_weight` (acgan) defaults to
    --aux_weight. A conditional discriminator sees real images with their dataset labels and
    fakes generated for labels drawn uniformly over the classes (LABEL_SALT); the generator step
    draws its own labels and noise. Penalties bind the discriminator to the real labels (the
    fake ones for R2). `time_progress` (`building.train_time_progress`) is what a penalty weight
    falling over a --train_time run follows.
    """
    settings = loss_settings(config, latent_dim, conditioning, penalty_weight, aux_weight,
                             time_progress)
    private = config.dp_l2_clip > 0
    return assemble_phases(
        config,
        discriminator_loss=functools.partial(
            private_discriminator_loss if private else discriminator_loss, settings),
        discriminator_prepare=functools.partial(prepared_fakes, settings) if private else None,
        generator_loss=functools.partial(generator_loss, settings),
        simultaneous_loss=functools.partial(simultaneous_loss, settings),
        lazy_penalty_loss=(functools.partial(lazy_penalty_loss, settings)
                           if settings.lazy_gain else None),
        d_metrics=discriminator_metrics(settings),
        g_metrics=("adversarial", "class_loss", "accuracy") if conditioning.classifier else (),
        generator_after_update=generator_after_update,
        generator_uses_data=settings.loss.pairs_real)


def assemble_phases(config: Config, *, discriminator_loss, generator_loss, simultaneous_loss,
                    lazy_penalty_loss, discriminator_prepare=None, d_metrics: tuple[str, ...], g_metrics: tuple[str, ...] = (),
                    generator_after_update=None, generator_uses_data: bool = False) -> tuple[Phase, ...]:
    """The phase list of a generator/discriminator setup from its losses, in `--update_order`.

    Alternating: discriminator (k = --d_updates), the lazy penalty when `lazy_penalty_loss` is
    given, then generator. Simultaneous: one phase updating both models from one forward pass
    (`simultaneous_loss` returns per-model losses), then the lazy penalty. Shared by every
    G/D setup, unconditional or conditional, so they schedule identically. WGAN weight
    clipping (--clip_value) runs after every discriminator update. With --dp_l2_clip the
    discriminator phase is private (DP-SGD, `engine.privacy`): the one phase whose gradients
    read real images (the flags checks refuse the penalties and bCR that would read them too);
    `discriminator_prepare` is its `Privacy.prepare`. The generator phase draws a real batch
    per update only with `generator_uses_data` (a loss pairing fakes with reals).
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
        privacy = (Privacy(l2_clip=config.dp_l2_clip, noise_multiplier=config.dp_noise_multiplier,
                           microbatches=config.dp_microbatches, prepare=discriminator_prepare)
                   if config.dp_l2_clip else None)
        phases = [Phase(name="discriminator", models=("discriminator",), loss=discriminator_loss,
                        metrics=d_metrics, repeats=config.d_updates, after_update=clip,
                        clip_norm=config.d_clip_global_norm, privacy=privacy)]
    if lazy_penalty_loss is not None:
        phases.append(Phase(name="penalty", models=("discriminator",), loss=lazy_penalty_loss,
                            metrics=(config.penalty,), every=config.penalty_every,
                            after_update=clip, clip_norm=config.d_clip_global_norm,
                            optimizers=("discriminator",)))
    if config.update_order != "simultaneous":
        phases.append(Phase(name="generator", models=("generator",), loss=generator_loss,
                            metrics=g_metrics, repeats=config.g_updates,
                            uses_data=generator_uses_data,
                            after_update=generator_after_update,
                            clip_norm=config.g_clip_global_norm))
    return tuple(phases)
