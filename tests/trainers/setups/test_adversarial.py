"""The G/D phase builder (`adversarial_phases`): presets and discriminator regularizers wired
into phases (lsgan, sngan, r1 lazy, DRAGAN, R2, consistency regularization, DiffAugment, top-k)
on tiny models and synthetic data, and with class conditioning (cgan, acgan) the losses on
known logits and the fake labels."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from gan import losses
from tests.trainers.tiny import build, build_run, tiny_config
from trainers.setups.adversarial_flags import PENALTIES
from trainers.engine.phases import StepInputs
from trainers.setups import adversarial
from trainers.setups.adversarial import Conditioning

CLASSES = 3


@pytest.mark.parametrize("gan", ["lsgan", "sngan", "r1"])
def test_new_presets_train_with_finite_metrics(gan):
    trainer = build(tiny_config(setup=gan))
    output = trainer.train(2)
    assert output.metrics and all(np.isfinite(v) for v in output.metrics.values())
    assert output.metrics["discriminator/nonfinite"] == 0.0


def test_sngan_generator_step_leaves_the_spectrally_normalized_discriminator_alone():
    trainer = build(tiny_config(setup="sngan"), phase_names={"generator"})
    discriminator = trainer.state.models["discriminator"]
    assert any("vector_u" in v.path for v in discriminator.non_trainable_variables)
    before = [v.numpy().copy() for v in discriminator.variables]
    trainer.train(2)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, discriminator.variables))


def test_lazy_r1_runs_every_nth_cycle_on_the_shared_discriminator_optimizer():
    config = tiny_config(setup="r1", penalty_every=2)
    trainer = build(config)
    optimizers = trainer.state.optimizers
    assert sorted(optimizers) == ["discriminator", "generator"]
    assert [phase.optimizers for phase in trainer.phases] == [(), ("discriminator",), ()]
    assert set(trainer.state.learning_rate_scales) == {"discriminator", "generator"}
    first = trainer.train(1)   # cycle 0: the penalty phase runs
    second = trainer.train(1)  # cycle 1: it does not
    trainer.train(2)
    assert int(optimizers["discriminator"].iterations.numpy()) == 4 + 2
    assert int(optimizers["generator"].iterations.numpy()) == 4
    # the preset's weight x interval 2 on the reported (unweighted) R1 value
    assert config.penalty_weight > 0
    assert first.metrics["penalty/loss"] == pytest.approx(
        config.penalty_weight * 2 * first.metrics["penalty/r1"], rel=1e-5)
    assert "penalty/loss" not in second.metrics
    assert "discriminator/r1" not in first.metrics


def test_lazy_gradient_penalty_runs_every_4th_cycle_standing_in_for_its_k_updates():
    config = tiny_config(setup="wgan_gp", d_updates=5, penalty_every=4)
    assert (config.penalty, config.d_updates, config.penalty_weight) == ("gradient_penalty", 5, 10.0)
    trainer = build(config)
    assert [(phase.name, phase.every) for phase in trainer.phases] == [
        ("discriminator", 1), ("penalty", 4), ("generator", 1)]
    ran = [("penalty/loss" in trainer.train(1).metrics) for _ in range(6)]
    assert ran == [True, False, False, False, True, False]
    assert int(trainer.state.optimizers["discriminator"].iterations.numpy()) == 6 * 5 + 2
    assert adversarial.lazy_penalty_gain(config) == 4 * 5


@pytest.mark.parametrize("penalty", ["gradient_penalty", "one_sided_gradient_penalty"])
def test_lazy_gradient_penalty_is_its_gain_times_the_eager_one_on_the_same_batch(penalty):
    """Loss and gradient of the lazy phase are N x k times the eager penalty term of the
    discriminator loss, at the same models, batch and draws."""
    lazy_config = tiny_config(setup="wgan_gp", d_updates=5, penalty=penalty, penalty_every=4)
    eager_config = dataclasses.replace(lazy_config, penalty_every=1)
    built, trainer = build_run(lazy_config)
    models = trainer.state.models
    lazy_phase = {phase.name: phase for phase in built.phases}["penalty"]
    eager_phase = adversarial.adversarial_phases(eager_config, eager_config.latent_dim)[0]
    assert eager_phase.name == "discriminator" and penalty in eager_phase.metrics
    inputs = step_inputs({"x": tf.random.stateless_uniform([8, 28, 28, 1], seed=[1, 2]) * 2 - 1})
    variables = models["discriminator"].trainable_variables
    for variable in variables:  # input-gradient norms above 1, where the one-sided penalty acts
        variable.assign(variable * 3.0)
    with tf.GradientTape(persistent=True) as tape:
        lazy = lazy_phase.loss(models, inputs)
        eager = eager_phase.loss(models, inputs)
        eager_term = 10.0 * eager.metrics[penalty]
    value = float(eager.metrics[penalty])
    assert value > 0
    assert float(lazy.metrics[penalty]) == pytest.approx(value, rel=1e-6)
    assert float(lazy.loss) == pytest.approx(20 * 10.0 * value, rel=1e-6)
    lazy_grads = tape.gradient(lazy.loss, variables)
    eager_grads = tape.gradient(eager_term, variables)
    # the last bias does not move an input gradient: no gradient from either
    assert [g is None for g in lazy_grads] == [g is None for g in eager_grads] != [True] * len(variables)
    for lazy_grad, eager_grad in zip(lazy_grads, eager_grads):
        if lazy_grad is not None:
            np.testing.assert_allclose(lazy_grad.numpy(), 20 * eager_grad.numpy(), rtol=1e-4, atol=1e-6)


def test_the_wgan_gp_preset_runs_its_penalty_every_4th_cycle_beside_one_critic_update():
    trainer = build(tiny_config(setup="wgan_gp"))
    assert [(phase.name, phase.every) for phase in trainer.phases] == [
        ("discriminator", 1), ("penalty", 4), ("generator", 1)]
    trainer.train(5)  # cycles 0-4: one critic update each, the penalty on cycles 0 and 4
    assert int(trainer.state.optimizers["discriminator"].iterations.numpy()) == 5 + 2


def test_gradient_penalty_every_cycle_is_inside_each_critic_update():
    """--penalty_every=1 (the paper's WGAN-GP): the penalty inside each of the k discriminator
    updates, no penalty phase."""
    eager = tiny_config(setup="wgan_gp", d_updates=5, penalty_every=1)
    trainer = build(eager)
    assert [phase.name for phase in trainer.phases] == ["discriminator", "generator"]
    metrics = trainer.train(2).metrics
    assert metrics["discriminator/loss"] == pytest.approx(
        metrics["discriminator/adversarial"] + 10.0 * metrics["discriminator/gradient_penalty"],
        rel=1e-5)
    assert int(trainer.state.optimizers["discriminator"].iterations.numpy()) == 2 * 5


def test_the_penalty_registry_holds_every_penalty_choice():
    assert sorted(adversarial.PENALTIES) == sorted(set(PENALTIES) - {"none"})


@pytest.mark.parametrize("penalty", ["dragan", "r1", "r2", "r1_r2", "one_sided_gradient_penalty"])
def test_penalty_in_every_update_adds_its_weighted_value(penalty):
    trainer = build(tiny_config(penalty=penalty, penalty_weight=3.0))
    metrics = trainer.train(1).metrics
    assert metrics[f"discriminator/{penalty}"] >= 0
    assert metrics["discriminator/loss"] == pytest.approx(
        metrics["discriminator/adversarial"] + 3.0 * metrics[f"discriminator/{penalty}"], rel=1e-5)


def test_consistency_regularization_and_diffaugment():
    trainer = build(tiny_config(consistency_weight=10.0, diffaugment="color,translation,cutout"))
    metrics = trainer.train(2).metrics
    assert metrics["discriminator/consistency"] > 0
    assert metrics["discriminator/loss"] == pytest.approx(
        metrics["discriminator/adversarial"] + 10.0 * metrics["discriminator/consistency"], rel=1e-5)


def test_augmentation_changes_what_the_discriminator_sees():
    plain = build(tiny_config()).train(1).metrics
    augmented = build(tiny_config(diffaugment="translation,cutout")).train(1).metrics
    assert plain["discriminator/real_score"] != augmented["discriminator/real_score"]


def test_top_k_generator_loss_is_the_replica_share_of_the_mean_over_the_kept_fakes():
    config = tiny_config(topk=0.5, topk_decay_cycles=4)
    logits = tf.constant([0.3, -2.0, 1.5, 0.0, 4.0, -0.5, 2.5, -1.0])
    inputs = StepInputs(real=None, seed=tf.constant([0, 0], tf.int64), global_batch_size=16,
                        replica_batch_size=8, replica_index=0, cycle=tf.constant(2))
    loss = losses.get_loss(config.loss)

    share = adversarial.generator_adversarial_loss(
        loss, logits, inputs, topk=config.topk, topk_decay_cycles=config.topk_decay_cycles)

    # cycle 2 of 4: fraction 0.75, so the 6 highest of 8 logits; this replica holds half the batch
    kept = tf.gather(loss.generator(logits), [0, 2, 3, 4, 5, 6])
    assert float(share) == pytest.approx(float(tf.reduce_mean(kept)) / 2, rel=1e-6)
    assert float(adversarial.generator_adversarial_loss(loss, logits, inputs)) == pytest.approx(
        float(tf.reduce_mean(loss.generator(logits))) / 2, rel=1e-6)


@pytest.mark.parametrize("overrides, replicas", [({}, 1), ({"update_order": "simultaneous"}, 1), ({}, 2)])
def test_top_k_training_runs_in_both_update_orders_and_on_two_replicas(overrides, replicas):
    trainer = build(tiny_config(topk=0.5, topk_decay_cycles=2, **overrides), replicas=replicas)
    output = trainer.train(3)
    assert all(np.isfinite(v) for v in output.metrics.values())
    assert int(trainer.state.step.numpy()) == 3


# -- class conditioning ---------------------------------------------------------------------

def conditional_phases(config):
    return adversarial.adversarial_phases(
        config, config.latent_dim,
        conditioning=Conditioning(num_classes=CLASSES, classifier=config.setup == "acgan"))


def step_inputs(real, seed=(5, 6)) -> StepInputs:
    size = int(real["x"].shape[0])
    return StepInputs(real=real, seed=tf.constant(seed, tf.int64), global_batch_size=size,
                      replica_batch_size=size, replica_index=0, cycle=tf.constant(0, tf.int64))


def softplus(x):
    return np.log1p(np.exp(x))


def cross_entropy(labels, logits):
    logits = np.asarray(logits, np.float64)
    return np.log(np.exp(logits).sum(axis=1)) - logits[np.arange(len(labels)), labels]


def test_acgan_losses_on_known_logits():
    """D: adversarial + aux * (CE real + CE fake); G: adversarial + aux * CE (its labels).

    The stand-in discriminator reads one pixel v of each image and answers logit v and class
    logits (v, 0, -v); real images hold r_i, the stand-in generator's fakes f_i.
    """
    r = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    f = np.array([-1.0, 0.25, 2.0, -0.5], np.float32)
    real_labels = np.array([0, 2, 1, 1])

    def discriminator(images, training):
        v = images[:, 0, 0, :]
        return v, tf.concat([v, tf.zeros_like(v), -v], axis=1)

    def generator(inputs, training):
        return tf.reshape(tf.constant(f), [-1, 1, 1, 1]) * tf.ones([4, 28, 28, 1])

    models = {"generator": generator, "discriminator": discriminator}
    d_phase, g_phase = conditional_phases(tiny_config(setup="acgan", aux_weight=0.5))
    inputs = step_inputs({"x": tf.reshape(tf.constant(r), [-1, 1, 1, 1]) * tf.ones([4, 28, 28, 1]),
                          "label": tf.constant(real_labels, tf.int64)})
    fake_labels = adversarial.fake_labels(inputs, CLASSES).numpy()
    real_classes = np.stack([r, 0 * r, -r], axis=1)
    fake_classes = np.stack([f, 0 * f, -f], axis=1)

    d = d_phase.loss(models, inputs)
    adversarial_loss = np.mean(softplus(-r) + softplus(f))
    real_ce = np.mean(cross_entropy(real_labels, real_classes))
    fake_ce = np.mean(cross_entropy(fake_labels, fake_classes))
    assert float(d.loss) == pytest.approx(adversarial_loss + 0.5 * (real_ce + fake_ce), rel=1e-5)
    assert float(d.metrics["adversarial"]) == pytest.approx(adversarial_loss, rel=1e-5)
    assert float(d.metrics["real_class_loss"]) == pytest.approx(real_ce, rel=1e-5)
    assert float(d.metrics["fake_class_loss"]) == pytest.approx(fake_ce, rel=1e-5)
    assert float(d.metrics["real_accuracy"]) == pytest.approx(
        np.mean(real_classes.argmax(1) == real_labels))

    g = g_phase.loss(models, inputs)
    g_expected = np.mean(softplus(-f)) + 0.5 * fake_ce
    assert float(g.metrics["adversarial"]) == pytest.approx(np.mean(softplus(-f)), rel=1e-5)
    assert float(g.loss) == pytest.approx(g_expected, rel=1e-5)
    assert float(g.metrics["accuracy"]) == pytest.approx(np.mean(fake_classes.argmax(1) == fake_labels))

    [both] = conditional_phases(tiny_config(setup="acgan", aux_weight=0.5, update_order="simultaneous"))
    output = both.loss(models, inputs)
    assert both.models == ("discriminator", "generator") and both.per_model_losses
    assert float(output.model_losses["discriminator"]) == pytest.approx(float(d.loss), rel=1e-6)
    assert float(output.model_losses["generator"]) == pytest.approx(g_expected, rel=1e-5)


def test_cgan_discriminator_scores_real_images_with_their_labels_and_fakes_with_drawn_ones():
    seen = []

    def discriminator(inputs, training):
        images, labels = inputs
        seen.append(labels.numpy())
        return tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)

    def generator(inputs, training):
        return tf.zeros([4, 28, 28, 1])

    d_phase, _ = conditional_phases(tiny_config(setup="cgan"))
    inputs = step_inputs({"x": tf.zeros([4, 28, 28, 1]), "label": tf.constant([2, 2, 1, 0], tf.int64)})
    output = d_phase.loss({"generator": generator, "discriminator": discriminator}, inputs)
    fake_labels = adversarial.fake_labels(inputs, CLASSES).numpy()
    np.testing.assert_array_equal(seen[0], [2, 2, 1, 0])
    np.testing.assert_array_equal(seen[1], fake_labels)
    # hinge: relu(1 - D(real)) + relu(1 + D(fake)), with D = the label
    expected = np.mean(np.maximum(0, 1 - np.array([2, 2, 1, 0])) + np.maximum(0, 1 + fake_labels))
    assert float(output.loss) == pytest.approx(expected)


def test_fake_labels_are_uniform_over_the_classes():
    inputs = step_inputs({"x": tf.zeros([10_000, 1])})
    labels = adversarial.fake_labels(inputs, 10).numpy()
    counts = np.bincount(labels, minlength=10)
    assert labels.dtype == np.int32 and len(counts) == 10
    assert counts.min() > 900 and counts.max() < 1100
    # Another update's key draws other labels.
    other = adversarial.fake_labels(step_inputs({"x": tf.zeros([10_000, 1])}, seed=(7, 8)), 10)
    assert np.mean(other.numpy() != labels) > 0.8


# -- the losses alone, from explicit settings ---------------------------------------------------

def test_hinge_losses_from_settings_built_by_hand_on_known_logits():
    """D = mean(relu(1 - r) + relu(1 + f)), G = mean(-f): the stand-in discriminator reads one
    pixel of each image, real images hold r_i and the stand-in generator's fakes f_i."""
    r = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    f = np.array([-1.0, 0.25, 2.0, -0.5], np.float32)
    models = {"generator": lambda noise, training: tf.reshape(tf.constant(f), [-1, 1, 1, 1]),
              "discriminator": lambda images, training: images[:, 0, 0, :]}
    settings = adversarial.LossSettings(loss=losses.get_loss("hinge"), latent_dim=2)
    inputs = step_inputs({"x": tf.reshape(tf.constant(r), [-1, 1, 1, 1])})

    d = adversarial.discriminator_loss(settings, models, inputs)
    assert float(d.loss) == pytest.approx(np.mean(np.maximum(0, 1 - r) + np.maximum(0, 1 + f)))
    assert tuple(d.metrics) == adversarial.discriminator_metrics(settings) == (
        "adversarial", "real_score", "fake_score")
    assert float(d.metrics["real_score"]) == pytest.approx(np.mean(r))
    g = adversarial.generator_loss(settings, models, inputs)
    assert float(g.loss) == pytest.approx(np.mean(-f)) and not g.metrics


def test_loss_settings_put_a_lazy_penalty_in_its_own_phase_and_an_eager_one_in_the_d_loss():
    lazy = adversarial.loss_settings(tiny_config(setup="wgan_gp", d_updates=5, penalty_every=4), 8,
                                     Conditioning())
    assert (lazy.penalty, lazy.lazy_gain, lazy.eager_penalty) == ("gradient_penalty", 20, False)
    assert "gradient_penalty" not in adversarial.discriminator_metrics(lazy)
    eager_config = dataclasses.replace(tiny_config(setup="wgan_gp", d_updates=5, penalty_every=1),
                                       aux_weight=0.25)
    eager = adversarial.loss_settings(eager_config, 8, Conditioning(), penalty_weight=tf.Variable(2.0))
    assert (eager.lazy_gain, eager.eager_penalty) == (0, True)
    assert adversarial.discriminator_metrics(eager)[-1] == "gradient_penalty"
    # a given weight variable replaces --penalty_weight; --aux_weight is the default
    assert (float(eager.penalty_weight), eager.aux_weight) == (2.0, 0.25)


# -- r3gan: the relativistic loss, R1 + R2, the falling penalty weight -------------------------

def test_relativistic_losses_from_settings_pair_each_fake_with_a_real_in_both_phases():
    """D = mean softplus(f - r), G = mean softplus(r - f): the generator's loss reads the real
    batch (the stand-in D reads one pixel: real image i holds r_i, fake i holds f_i)."""
    r = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    f = np.array([-1.0, 0.25, 2.0, -0.5], np.float32)
    models = {"generator": lambda noise, training: tf.reshape(tf.constant(f), [-1, 1, 1, 1]),
              "discriminator": lambda images, training: images[:, 0, 0, :]}
    settings = adversarial.LossSettings(loss=losses.get_loss("relativistic"), latent_dim=2)
    inputs = step_inputs({"x": tf.reshape(tf.constant(r), [-1, 1, 1, 1])})
    d = adversarial.discriminator_loss(settings, models, inputs)
    assert float(d.loss) == pytest.approx(np.mean(softplus(f - r)), rel=1e-6)
    g = adversarial.generator_loss(settings, models, inputs)
    assert float(g.loss) == pytest.approx(np.mean(softplus(r - f)), rel=1e-6)
    both = adversarial.simultaneous_loss(settings, models, inputs)
    assert float(both.model_losses["generator"]) == pytest.approx(np.mean(softplus(r - f)), rel=1e-6)


@pytest.mark.parametrize("setup, generator_reads_data", [("r3gan", True), ("dcgan", False),
                                                          ("r1", False)])
def test_only_a_loss_pairing_reals_makes_the_generator_phase_draw_a_real_batch(
        setup, generator_reads_data):
    phases = {phase.name: phase for phase in adversarial.adversarial_phases(tiny_config(setup=setup), 8)}
    assert phases["generator"].uses_data is generator_reads_data
    assert phases["discriminator"].uses_data


def _linear_critic(weights):
    """D(x) = w.x + 0.5, whose input gradient is w at every x: ||grad||^2 = |w|^2."""
    return lambda images: tf.reduce_sum(weights * images, axis=[1, 2, 3])[:, tf.newaxis] + 0.5


def test_r1_r2_is_r1_on_reals_plus_r2_on_fakes_each_at_its_own_labels_critic():
    w_real = tf.reshape(tf.constant([1.0, -2.0, 0.5, 3.0]), [1, 2, 2, 1])
    w_fake = tf.reshape(tf.constant([0.0, 1.0, -1.0, 2.0]), [1, 2, 2, 1])
    real = tf.random.stateless_normal([3, 2, 2, 1], seed=[1, 2])
    fake = tf.random.stateless_normal([3, 2, 2, 1], seed=[3, 4])
    critics = adversarial.Critics(real=_linear_critic(w_real), fake=_linear_critic(w_fake))
    inputs = step_inputs({"x": real})
    values = adversarial.penalty_values("r1_r2", critics, real, fake, inputs)
    np.testing.assert_allclose(values.numpy(), [14.25 + 6.0] * 3, rtol=1e-6)
    np.testing.assert_allclose(adversarial.penalty_values("r1", critics, real, fake, inputs).numpy(),
                               [14.25] * 3, rtol=1e-6)
    np.testing.assert_allclose(adversarial.penalty_values("r2", critics, real, fake, inputs).numpy(),
                               [6.0] * 3, rtol=1e-6)


def test_lazy_r1_r2_is_weighted_by_its_interval_as_r1_is():
    config = tiny_config(setup="r3gan", penalty_every=4, penalty_final_factor=1.0)
    first = build(config).train(1).metrics
    assert first["penalty/loss"] == pytest.approx(
        config.penalty_weight * 4 * first["penalty/r1_r2"], rel=1e-5)


@pytest.mark.parametrize("cycle, time_share, factor", [
    (0, None, 1.0), (50, None, 0.55), (100, None, 0.1), (150, None, 0.1),
    (0, 0.5, 0.55), (75, 0.5, 0.1 + 0.9 * 0.5 * (1 + np.cos(0.75 * np.pi))), (10, 1.0, 0.1)])
def test_the_penalty_weight_falls_along_a_half_cosine_over_cycles_or_the_time_budget(
        cycle, time_share, factor):
    time_progress = None if time_share is None else tf.Variable(time_share)
    settings = adversarial.LossSettings(
        loss=losses.get_loss("relativistic"), latent_dim=2, penalty="r1_r2", penalty_weight=2.0,
        penalty_final_factor=0.1, total_cycles=100, time_progress=time_progress)
    inputs = dataclasses.replace(step_inputs({"x": tf.zeros([1, 1, 1, 1])}), cycle=tf.constant(cycle))
    assert float(adversarial.penalty_weight_now(settings, inputs)) == pytest.approx(2.0 * factor, rel=1e-5)


def test_the_r3gan_preset_computes_a_gradient_for_every_variable_in_one_cycle():
    config = tiny_config(setup="r3gan")
    built, trainer = build_run(config)
    models = built.models
    settings = adversarial.loss_settings(config, config.latent_dim, Conditioning())
    inputs = step_inputs({"x": tf.random.stateless_uniform([8, 28, 28, 1], seed=[1, 1]) * 2 - 1})
    for loss, model in ((adversarial.discriminator_loss, "discriminator"),
                        (adversarial.generator_loss, "generator")):
        with tf.GradientTape() as tape:
            value = loss(settings, models, inputs).loss
        variables = models[model].trainable_variables
        gradients = tape.gradient(value, variables)
        assert all(g is not None for g in gradients), model
        # The loss reads only D(x) - D(G(z)) and the penalties input gradients, so the output
        # bias of D gets exactly 0; every other variable a gradient.
        zero = [v.path for v, g in zip(variables, gradients) if not np.any(g.numpy() != 0)]
        assert zero == ([variables[-1].path] if model == "discriminator" else []), zero
    before = {name: [v.numpy().copy() for v in models[name].trainable_variables]
              for name in ("generator", "discriminator")}
    output = trainer.train(1)
    # the preset's R1 + R2 is lazy (every 4 cycles): its own phase, due in the first cycle
    assert config.penalty_every == 4
    assert {"penalty/r1_r2", "discriminator/adversarial"} <= set(output.metrics)
    assert "discriminator/r1_r2" not in output.metrics
    for name, values in before.items():
        changed = [np.any(a != v.numpy()) for a, v in zip(values, models[name].trainable_variables)]
        assert changed == [True] * (len(changed) - (name == "discriminator")) + [False] * (
            name == "discriminator")
    # the EMA generator follows a half-life rising from 0: after cycle 0 it is the generator
    for ema, model in zip(models["generator_ema"].variables, models["generator"].variables):
        np.testing.assert_array_equal(ema.numpy(), model.numpy())
