"""Controls of the update step: clipping, the NaN guard, mixed precision, EMA, schedules and
loss weights changed without retracing."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.trainers.tiny import build, tiny_config
from trainers.engine.distribution import make_strategy
from trainers.engine.phases import LossOutput, Phase
from trainers.engine.state import TrainingState
from trainers.engine.trainer import Trainer


def linear_setup(loss_scale: tf.Variable, *, clip_norm=0.0):
    """A one-variable model y = w.x trained by SGD(lr=1) on loss = scale * mean(w.x)."""
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False)(inputs))
    model.trainable_variables[0].assign([[1.0], [1.0], [1.0]])

    def loss(models, step_inputs):
        return LossOutput(loss=step_inputs.mean(loss_scale * tf.reshape(models["m"](step_inputs.real), [-1])))

    phase = Phase(name="fit", models=("m",), loss=loss, clip_norm=clip_norm)
    optimizer = keras.optimizers.SGD(1.0)
    optimizer.build(model.trainable_variables)
    strategy = make_strategy("default")
    state = TrainingState.create(models={"m": model}, optimizers={"fit": optimizer})

    def make(done):
        data = tf.data.Dataset.from_tensors(tf.constant([[3.0, 0.0, 4.0]] * 2)).repeat()
        return strategy.distribute_datasets_from_function(lambda context: data)

    trainer = Trainer(strategy=strategy, state=state, phases=(phase,), make_dataset=make,
                      global_batch_size=2, seed=0)
    return trainer, model.trainable_variables[0], optimizer


def test_global_norm_clipping_limits_the_update_and_logs_the_norm_before_clipping():
    trainer, weight, _ = linear_setup(tf.Variable(1.0), clip_norm=0.5)
    output = trainer.train(1)
    # gradient of mean(w.x) is x = (3, 0, 4), norm 5; clipped to norm 0.5 -> (0.3, 0, 0.4)
    assert output.metrics["fit/grad_norm"] == pytest.approx(5.0)
    np.testing.assert_allclose(weight.numpy().ravel(), [0.7, 1.0, 0.6], rtol=1e-6)


def test_without_clipping_the_full_gradient_is_applied():
    trainer, weight, _ = linear_setup(tf.Variable(1.0))
    trainer.train(1)
    np.testing.assert_allclose(weight.numpy().ravel(), [-2.0, 1.0, -3.0], rtol=1e-6)


def test_non_finite_loss_skips_the_update_and_is_counted():
    scale = tf.Variable(float("nan"))
    trainer, weight, optimizer = linear_setup(scale)
    output = trainer.train(2)
    np.testing.assert_array_equal(weight.numpy().ravel(), [1.0, 1.0, 1.0])
    assert int(optimizer.iterations.numpy()) == 0
    assert output.metrics["fit/nonfinite"] == 1.0
    scale.assign(1.0)  # the weight is a variable: no retrace, and training resumes
    output = trainer.train(1)
    assert output.metrics["fit/nonfinite"] == 0.0
    assert int(optimizer.iterations.numpy()) == 1
    assert trainer.traces == 1


def test_penalty_weight_variable_and_ramp_act_inside_the_compiled_step():
    trainer = build(tiny_config(setup="wgan_gp", d_updates=1, penalty_every=1, penalty_ramp_cycles=2))
    first = trainer.train(1)   # cycle 0: ramp factor 0
    assert first.metrics["discriminator/loss"] == pytest.approx(first.metrics["discriminator/adversarial"], abs=1e-6)
    second = trainer.train(1)  # cycle 1: factor 0.5 of weight 10
    expected = second.metrics["discriminator/adversarial"] + 5.0 * second.metrics["discriminator/gradient_penalty"]
    assert second.metrics["discriminator/loss"] == pytest.approx(expected, rel=1e-4)
    trainer.state.loss_weights["penalty"].assign(0.0)
    third = trainer.train(1)
    assert third.metrics["discriminator/loss"] == pytest.approx(third.metrics["discriminator/adversarial"], abs=1e-6)
    assert trainer.traces == 1


def test_learning_rate_schedule_and_warmup_reach_the_optimizer():
    config = tiny_config(train_cycles=4, g_lr_schedule="linear", d_lr_schedule="cosine",
                         lr_warmup_cycles=2, g_lr=3e-4, d_lr=2e-4)
    trainer = build(config)
    first = trainer.train(1)
    assert first.metrics["generator/learning_rate"] == pytest.approx(3e-4 * 0.5, rel=1e-5)
    second = trainer.train(1)  # update 1 of 4: linear 0.75, warm-up done
    assert second.metrics["generator/learning_rate"] == pytest.approx(3e-4 * 0.75, rel=1e-5)
    assert second.metrics["discriminator/learning_rate"] == pytest.approx(
        2e-4 * 0.5 * (1 + np.cos(np.pi / 4)), rel=1e-5)


def test_ema_generator_follows_the_closed_form():
    config = tiny_config(ema_halflife_kimg=0.01)
    trainer = build(config)
    models = trainer.state.models
    start = [v.numpy() for v in models["generator"].trainable_variables]
    np.testing.assert_array_equal(start[0], models["generator_ema"].trainable_variables[0].numpy())
    trainer.train(1)
    beta = 0.5 ** (8 / 10.0)
    for before, current, average in zip(start, models["generator"].trainable_variables,
                                        models["generator_ema"].trainable_variables):
        np.testing.assert_allclose(average.numpy(), current.numpy() + (before - current.numpy()) * beta,
                                   rtol=1e-5, atol=1e-7)
    assert not np.array_equal(models["generator"].trainable_variables[0].numpy(), start[0])


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_float32_outputs_losses_and_weights(precision):
    trainer = build(tiny_config(precision=precision))
    models = trainer.state.models
    assert models["generator"].layers[1].compute_dtype == precision.split("_")[1]
    assert all(v.dtype == "float32" for v in models["generator"].trainable_variables)
    assert models["generator"](tf.zeros([2, 8])).dtype == tf.float32
    output = trainer.train(2)
    assert all(np.isfinite(v) for v in output.metrics.values())
    if precision == "mixed_float16":
        assert isinstance(trainer.state.optimizers["generator"], keras.optimizers.LossScaleOptimizer)
        assert output.metrics["generator/loss_scale"] > 1
        assert output.metrics["discriminator/grad_norm"] > 0
    else:
        assert "generator/loss_scale" not in output.metrics
    assert keras.mixed_precision.global_policy().name == "float32"


def test_a_phase_whose_loss_ignores_its_models_is_rejected():
    trainer, _, _ = linear_setup(tf.Variable(1.0))
    phase = trainer.phases[0]
    ignoring = dataclasses.replace(
        phase, loss=lambda models, inputs: LossOutput(loss=inputs.mean(tf.reduce_sum(inputs.real, axis=1))))
    broken = Trainer(strategy=trainer.strategy, state=trainer.state, phases=(ignoring,),
                     make_dataset=trainer._make_dataset, global_batch_size=2, seed=0)
    with pytest.raises(ValueError, match="depends on none of the variables"):
        broken.train(1)
