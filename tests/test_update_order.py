"""`--update_order=simultaneous`: the TensorFlow DCGAN tutorial's train_step as one Gantry phase.

Checked against a hand-written tutorial step (same weights, same batches, same noise, one
GradientTape pair), for update counts with a lazy penalty and an EMA generator, with a
spectrally normalized discriminator, through the Keras fit path, its flag validation, and
end to end through run.py.
"""

import numpy as np
import pytest
import tensorflow as tf

from gan import losses
from tests.cli import TINY, run
from tests.trainers.tiny import IMAGE_INFO, build, synthetic_dataset_fn, tiny_config
from trainers.outputs import summaries
from trainers.setups.adversarial import LATENT_SALT
from trainers.setups import building, registry
from trainers.config.flags import ConfigError
from trainers.engine.distribution import make_strategy
from trainers.fit.model import AdversarialModel
from trainers.engine.phases import optimizer_updates_after, update_seed
from trainers.engine.state import TrainingState
from trainers.engine.trainer import Trainer

PHASE_METRICS = {"loss", "adversarial", "real_score", "fake_score", "loss_discriminator",
                 "loss_generator", "grad_norm_discriminator", "grad_norm_generator",
                 "learning_rate_discriminator", "learning_rate_generator", "nonfinite"}


def copy_weights(source, target):
    for name, model in source.items():
        for a, b in zip(model.variables, target[name].variables):
            b.assign(a)


def test_simultaneous_update_equals_the_tutorial_train_step():
    """SGD rather than the preset's Adam: Adam's first steps barely depend on the gradient's size."""
    config = tiny_config(update_order="simultaneous")
    strategy = make_strategy("default")
    setup = building.build_run(registry.get(config.setup), config, IMAGE_INFO, strategy)
    optimizers = {name: tf.keras.optimizers.SGD(0.05) for name in ("discriminator", "generator")}
    for name, optimizer in optimizers.items():
        optimizer.build(setup.models[name].trainable_variables)
    trainer = Trainer(strategy=strategy, phases=setup.phases, global_batch_size=8, seed=config.seed,
                      state=TrainingState.create(models=setup.models, optimizers=optimizers),
                      make_dataset=synthetic_dataset_fn(strategy, config))
    assert [phase.name for phase in trainer.phases] == ["simultaneous"]
    reference = building.build_run(registry.get(config.setup), config, IMAGE_INFO, strategy).models
    copy_weights(trainer.state.models, reference)
    generator, discriminator = reference["generator"], reference["discriminator"]
    g_optimizer, d_optimizer = tf.keras.optimizers.SGD(0.05), tf.keras.optimizers.SGD(0.05)
    loss = losses.get_loss("non_saturating")
    batches = iter(synthetic_dataset_fn(strategy, config)(0))

    def mean(per_example):
        return tf.nn.compute_average_loss(per_example, global_batch_size=8)

    logged = []
    for cycle in range(2):
        real = next(batches)["x"]
        key = tf.random.experimental.stateless_fold_in(
            update_seed(config.seed, tf.constant(cycle, tf.int64), 0, 0), LATENT_SALT)
        noise = tf.random.stateless_normal([8, config.latent_dim], seed=key)
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            fake = generator(noise, training=True)
            real_logits = discriminator(real, training=True)
            fake_logits = discriminator(fake, training=True)
            g_loss = mean(loss.generator(fake_logits))
            d_loss = mean(loss.discriminator(real_logits, fake_logits))
        g_optimizer.apply(g_tape.gradient(g_loss, generator.trainable_variables),
                          generator.trainable_variables)
        d_optimizer.apply(d_tape.gradient(d_loss, discriminator.trainable_variables),
                          discriminator.trainable_variables)
        logged.append((float(d_loss), float(g_loss)))

    start = [v.numpy().copy() for v in trainer.state.models["generator"].trainable_variables]
    metrics = trainer.train(2).metrics
    moved = [v.numpy() - s for v, s in zip(trainer.state.models["generator"].trainable_variables, start)]
    assert min(float(np.max(np.abs(m))) for m in moved) > 1e-4  # 100 x the tolerance
    for name in ("generator", "discriminator"):
        for a, b in zip(reference[name].variables, trainer.state.models[name].variables):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-6, err_msg=a.path)
    assert set(metrics) == {f"simultaneous/{key}" for key in PHASE_METRICS}
    d_mean, g_mean = np.mean(logged, axis=0)
    assert metrics["simultaneous/loss_discriminator"] == pytest.approx(d_mean, rel=1e-5)
    assert metrics["simultaneous/loss_generator"] == pytest.approx(g_mean, rel=1e-5)
    assert metrics["simultaneous/loss"] == pytest.approx(d_mean + g_mean, rel=1e-5)
    assert int(optimizers["discriminator"].iterations.numpy()) == 2
    assert int(optimizers["generator"].iterations.numpy()) == 2


def test_lazy_penalty_and_ema_generator_with_the_simultaneous_order():
    config = tiny_config(setup="r1", penalty_every=2, update_order="simultaneous",
                         ema_halflife_kimg=0.01, train_cycles=5)
    trainer = build(config)
    assert [phase.name for phase in trainer.phases] == ["simultaneous", "penalty"]
    models, optimizers = trainer.state.models, trainer.state.optimizers
    start = [v.numpy() for v in models["generator"].trainable_variables]
    first = trainer.train(1)
    beta = 0.5 ** (8 / 10.0)  # ema_beta of 8 images at a 10-image half-life
    for before, current, average in zip(start, models["generator"].trainable_variables,
                                        models["generator_ema"].trainable_variables):
        np.testing.assert_allclose(average.numpy(), current.numpy() + (before - current.numpy()) * beta,
                                   rtol=1e-5, atol=1e-7)
    assert "penalty/r1" in first.metrics
    trainer.train(2)  # cycles 1, 2: the penalty runs in cycle 2
    assert int(optimizers["discriminator"].iterations.numpy()) == 3 + 2
    assert int(optimizers["generator"].iterations.numpy()) == 3
    # the learning-rate schedules span each optimizer's updates: 5 cycles + 3 lazy penalties
    assert optimizer_updates_after(trainer.phases, 5) == {"discriminator": 8, "generator": 5}


def test_spectral_norm_discriminator_in_the_shared_pass():
    trainer = build(tiny_config(setup="sngan", update_order="simultaneous"))
    discriminator = trainer.state.models["discriminator"]
    vectors = [v for v in discriminator.non_trainable_variables if "vector_u" in v.path]
    before = [v.numpy().copy() for v in vectors]
    g_before = trainer.state.models["generator"].trainable_variables[0].numpy().copy()
    metrics = trainer.train(2).metrics
    assert all(np.isfinite(value) for value in metrics.values())
    assert metrics["simultaneous/nonfinite"] == 0.0
    # training-mode D calls ran their power iterations; G learnt through that D
    assert all(not np.array_equal(a, v.numpy()) for a, v in zip(before, vectors))
    assert not np.array_equal(g_before, trainer.state.models["generator"].trainable_variables[0].numpy())


def test_keras_fit_path_matches_the_trainer_in_simultaneous_order():
    config = tiny_config(update_order="simultaneous")
    trainer = build(config)
    model = AdversarialModel.from_gantry_config(config, IMAGE_INFO)
    copy_weights(trainer.state.models, model.models)
    assert sorted(model.phase_optimizers) == ["discriminator", "generator"]
    examples = synthetic_dataset_fn(make_strategy("default"), config)(0).unbatch()
    history = model.fit(examples.batch(config.batch_size), epochs=1, steps_per_epoch=2,
                        shuffle=False, verbose=0)
    metrics = trainer.train(2).metrics
    for name in ("generator", "discriminator"):
        for a, b in zip(trainer.state.models[name].variables, model.models[name].variables):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.path)
    assert history.history["simultaneous/loss_generator"][0] == pytest.approx(
        metrics["simultaneous/loss_generator"], rel=1e-5)


@pytest.mark.parametrize("overrides, message", [
    (dict(setup="wgan_gp", d_updates=5), "--d_updates=5 is invalid: --update_order=simultaneous"),
    (dict(g_updates=2), "--g_updates=2 is invalid: .* use --d_updates=1 --g_updates=1"),
    (dict(setup="wgan", d_updates=1), "--clip_value=0.05 is invalid: WGAN weight clipping"),
    (dict(d_clip_global_norm=1.0), r"--d_clip_global_norm=1.0 is invalid: .*--g_clip_global_norm=0.0"),
])
def test_flags_that_cannot_be_simultaneous_are_rejected(overrides, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(update_order="simultaneous", **overrides)


def test_run_py_trains_in_simultaneous_order(tmp_path):
    logdir = tmp_path / "run"
    result = run(*TINY, "--update_order=simultaneous", f"--logdir={logdir}", "--train_cycles=4",
                 "--image_every=4", "--histogram_every=4")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "step 4/4" in result.stdout
    tags = summaries.read_event_tags(str(logdir))
    assert {"simultaneous/loss_discriminator", "simultaneous/loss_generator",
            "simultaneous/grad_norm_generator", "simultaneous/learning_rate_discriminator"} <= tags["scalars"]
    assert any(tag.startswith("gradients/simultaneous/") for tag in tags["histograms"])
    checkpoint = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    iterations = {name.split("/")[1]: int(tf.train.load_variable(checkpoint, name))
                  for name, _ in tf.train.list_variables(checkpoint)
                  if name.startswith("optimizers/") and "iteration" in name}
    assert iterations == {"discriminator": 4, "generator": 4}
