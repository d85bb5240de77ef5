"""DP-SGD updates: per-example clipping, noise of std S*C/B added once per global batch, the
same update on 2 replicas as on 1, and the epsilon spent against `dp-accounting` directly.

The model is y = w.x with w = (1, 1, 1), so the gradient of one example's y is its row x: the
norms of the per-example gradients are the norms of the rows, and SGD at rate 1 moves w by minus
the private gradient.
"""

import dataclasses

import dp_accounting
import keras
import numpy as np
import pytest
import tensorflow as tf

from trainers.engine import privacy
from trainers.engine.distribution import make_strategy
from trainers.engine.phases import LossOutput, Phase, Privacy, update_seed
from trainers.engine.steps import make_replica_update

# Per-example gradient norms 5, 0.5, 10 and 0.2.
ROWS = np.array([[3.0, 0.0, 4.0], [0.3, 0.0, 0.4], [0.0, 6.0, 8.0], [0.0, 0.0, 0.2]], np.float32)


def linear_loss(models, inputs):
    return LossOutput(loss=inputs.mean(tf.reshape(models["d"](inputs.real["x"]), [-1])))


def shift(models, inputs):
    """A `Privacy.prepare`: rows made once for the replica's batch, split with the real rows."""
    return {"shift": 2.0 * inputs.normal([3], salt=2)}


def noisy_input_loss(models, inputs):
    """Reads the global noise draws and the prepared rows too: each microbatch must see its own
    rows of both."""
    shifted = inputs.real["x"] + inputs.normal([3], salt=1) + inputs.real["shift"]
    value = tf.reshape(models["d"](shifted), [-1])
    return LossOutput(loss=inputs.mean(value), metrics={"score": inputs.mean(value ** 2)})


def private_step(rows, setting: Privacy, *, strategy=None, loss=linear_loss, metrics=(),
                 prepare=None, cycle=0):
    """The private gradient of one SGD update at rate 1 on `rows` (w moved from (1, 1, 1) by
    minus it), and the reported loss."""
    strategy = strategy or make_strategy("default")
    with strategy.scope():
        inputs = keras.Input((3,))
        model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False,
                                                       kernel_initializer="ones")(inputs))
        optimizer = keras.optimizers.SGD(1.0)
        optimizer.build(model.trainable_variables)
    phase = Phase(name="d", models=("d",), loss=loss, metrics=metrics,
                  privacy=dataclasses.replace(setting, prepare=prepare))
    update = make_replica_update(phase, models={"d": model}, optimizers={"d": optimizer},
                                 global_batch_size=len(rows),
                                 num_replicas=strategy.num_replicas_in_sync)
    data = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices({"x": rows}).batch(len(rows)))
    seed = update_seed(0, tf.constant(cycle), 0, 0)

    @tf.function
    def step(batch):
        result = strategy.run(update, args=(batch, seed))
        return strategy.reduce("SUM", result.shares["loss"], axis=None)

    loss_value = step(next(iter(data)))
    return 1.0 - model.trainable_variables[0].numpy().ravel(), float(loss_value)


def test_clip_bounds_the_global_norm_and_keeps_small_gradients():
    large = privacy.clip([tf.constant([3.0, 0.0]), tf.constant([4.0])], 1.0)
    assert float(tf.linalg.global_norm(large)) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(large[0].numpy(), [0.6, 0.0], atol=1e-6)
    small = privacy.clip([tf.constant([0.3, 0.0]), tf.constant([0.4])], 1.0)
    np.testing.assert_allclose(small[0].numpy(), [0.3, 0.0], atol=1e-7)


def test_each_examples_gradient_is_clipped_before_the_mean():
    gradient, loss = private_step(ROWS, Privacy(l2_clip=1.0, noise_multiplier=0.0))
    norms = np.linalg.norm(ROWS, axis=1)
    clipped = ROWS * np.minimum(1.0, 1.0 / norms)[:, None]
    assert np.linalg.norm(clipped, axis=1).max() <= 1.0 + 1e-6
    np.testing.assert_allclose(gradient, clipped.mean(axis=0), atol=1e-6)
    assert loss == pytest.approx(ROWS.sum(axis=1).mean(), rel=1e-6)  # the global mean of w.x


def test_microbatches_clip_the_mean_gradient_of_each_microbatch():
    gradient, _ = private_step(ROWS, Privacy(l2_clip=1.0, noise_multiplier=0.0, microbatches=2))
    halves = ROWS.reshape(2, 2, 3).mean(axis=1)
    clipped = halves * np.minimum(1.0, 1.0 / np.linalg.norm(halves, axis=1))[:, None]
    np.testing.assert_allclose(gradient, clipped.mean(axis=0), atol=1e-6)


def test_the_noise_has_std_noise_multiplier_times_clip_over_the_batch():
    setting = Privacy(l2_clip=0.5, noise_multiplier=2.0)
    zeros = [tf.zeros([200, 100])]
    seed = update_seed(0, tf.constant(3), 0, 0)
    drawn = privacy.noised_mean(zeros, seed, setting, microbatches=4)[0].numpy()
    assert drawn.std() == pytest.approx(2.0 * 0.5 / 4, rel=0.02)  # 20,000 draws
    assert abs(drawn.mean()) < 0.01
    np.testing.assert_array_equal(drawn, privacy.noised_mean(zeros, seed, setting, 4)[0].numpy())
    # Through the update: zero data gradients, so w moves by exactly the noise of its seed.
    gradient, _ = private_step(np.zeros([4, 3], np.float32), setting, cycle=3)
    expected = privacy.noised_mean([tf.zeros([3, 1])], seed, setting, 4)[0].numpy().ravel()
    np.testing.assert_allclose(gradient, expected, atol=1e-7)


@pytest.mark.parametrize("microbatches", [0, 2])
def test_two_replicas_make_the_same_private_update_as_one(microbatches):
    setting = Privacy(l2_clip=1.0, noise_multiplier=1.0, microbatches=microbatches)
    kwargs = dict(loss=noisy_input_loss, metrics=("score",), prepare=shift, cycle=1)
    one, loss_one = private_step(ROWS, setting, **kwargs)
    two, loss_two = private_step(ROWS, setting, strategy=make_strategy("mirrored", cpu_replicas=2),
                                 **kwargs)
    np.testing.assert_allclose(two, one, atol=1e-6)
    assert loss_two == pytest.approx(loss_one, rel=1e-6)


def test_epsilon_is_dp_accountings_for_the_schedules_private_updates():
    setting = Privacy(l2_clip=1.0, noise_multiplier=1.1)
    phases = (Phase(name="discriminator", models=("d",), loss=linear_loss, repeats=2,
                    privacy=setting),
              Phase(name="generator", models=("g",), loss=linear_loss, uses_data=False))
    spent = privacy.spent(phases, 150, global_batch_size=64, num_examples=60_000)
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(64 / 60_000, dp_accounting.GaussianDpEvent(1.1)), 300))
    assert spent["steps"] == 300  # two private updates per cycle
    assert spent["epsilon"] == pytest.approx(accountant.get_epsilon(1 / 60_000), rel=1e-9)
    assert spent["delta"] == 1 / 60_000 and spent["sampling_rate"] == 64 / 60_000
    assert privacy.spent(phases, 0, global_batch_size=64, num_examples=60_000)["epsilon"] == 0.0
    assert privacy.spent(phases[1:], 150, global_batch_size=64, num_examples=60_000) is None


def test_what_a_private_phase_prepares_is_not_part_of_its_mechanism():
    plain = Privacy(l2_clip=1.0, noise_multiplier=1.1)
    prepared = dataclasses.replace(plain, prepare=shift)
    assert prepared == plain and hash(prepared) == hash(plain) and "prepare" not in repr(prepared)
    phases = (Phase(name="a", models=("d",), loss=linear_loss, privacy=plain),
              Phase(name="b", models=("d",), loss=linear_loss, privacy=prepared))
    assert privacy.spent(phases, 10, global_batch_size=64, num_examples=60_000)["steps"] == 20
    with pytest.raises(ValueError, match="cannot be accounted as one mechanism"):
        privacy.spent((phases[0], Phase(name="c", models=("d",), loss=linear_loss,
                                         privacy=dataclasses.replace(prepared, l2_clip=2.0))),
                      10, global_batch_size=64, num_examples=60_000)
