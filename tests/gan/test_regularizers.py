import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from gan import networks, regularizers
from trainers.engine.distribution import make_strategy


def test_interpolate_uses_one_weight_per_example():
    real = tf.ones((3, 2, 2, 1))
    fake = -tf.ones((3, 2, 2, 1))
    got = regularizers.interpolate(real, fake, tf.constant([0.0, 0.25, 1.0]))
    assert got.shape == (3, 2, 2, 1)
    # w * 1 + (1 - w) * -1 = 2w - 1
    np.testing.assert_allclose(got.numpy()[:, 0, 0, 0], [-1.0, -0.5, 1.0])
    np.testing.assert_allclose(np.ptp(got.numpy().reshape(3, -1), axis=1), [0.0, 0.0, 0.0])


def test_interpolate_flat_vectors():
    got = regularizers.interpolate(
        tf.constant([[2.0, 4.0]]), tf.constant([[0.0, 0.0]]), tf.constant([0.5])
    )
    np.testing.assert_allclose(got.numpy(), [[1.0, 2.0]])


def test_safe_norm_values():
    x = tf.constant([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(regularizers.safe_norm(x, axis=1).numpy(), [5.0, 0.0])


def test_safe_norm_gradient_is_finite_at_zero():
    x = tf.constant([[0.0, 0.0], [3.0, 4.0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        norm = regularizers.safe_norm(x, axis=1)
    grad = tape.gradient(norm, x).numpy()
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, [[0.0, 0.0], [0.6, 0.8]], rtol=1e-6)


def test_gradient_penalty_of_linear_critic_is_closed_form():
    a = tf.constant(np.arange(1, 13, dtype=np.float32).reshape(2, 3, 2) / 10.0)

    def critic(x):
        return tf.reduce_sum(a * x, axis=[1, 2, 3])

    points = tf.random.stateless_normal((4, 2, 3, 2), seed=(1, 2))
    norm_a = math.sqrt(sum((i / 10.0) ** 2 for i in range(1, 13)))
    got = regularizers.gradient_penalty(critic, points)
    assert got.shape == (4,) and got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), [(norm_a - 1.0) ** 2] * 4, rtol=1e-5)
    got_target = regularizers.gradient_penalty(critic, points, target_norm=2.0)
    np.testing.assert_allclose(got_target.numpy(), [(norm_a - 2.0) ** 2] * 4, rtol=1e-5)


def test_one_sided_gradient_penalty_costs_only_norms_above_one():
    # critic(x) = 0.5 ||x||^2 has gradient x; interpolating real = fake = x puts the point at x.
    def critic(x):
        return 0.5 * tf.reduce_sum(tf.square(x), axis=1)

    points = tf.constant([[3.0, 4.0], [0.3, 0.4], [0.6, 0.8], [0.0, 0.0]])
    got = regularizers.one_sided_gradient_penalty(critic, points, points, tf.constant([0.5] * 4))
    assert got.shape == (4,) and got.dtype == tf.float32
    # norms 5, 0.5, 1, 0: (5 - 1)^2, then 0 where the two-sided penalty has 0.25, 0 and 1
    np.testing.assert_allclose(got.numpy(), [16.0, 0.0, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(regularizers.gradient_penalty(critic, points).numpy(),
                               [16.0, 0.25, 0.0, 1.0], atol=1e-6)


def test_one_sided_gradient_penalty_is_taken_at_the_interpolates():
    # the linear critic's gradient is a everywhere: (||a|| - 1)^2 = (5 - 1)^2 at any point
    a = tf.constant([3.0, 4.0])
    w = tf.Variable(1.0)
    real, fake = tf.ones((2, 2)), -tf.ones((2, 2))
    with tf.GradientTape() as tape:
        got = regularizers.one_sided_gradient_penalty(
            lambda x: w * tf.reduce_sum(a * x, axis=1), real, fake, tf.constant([0.0, 0.7]))
    np.testing.assert_allclose(got.numpy(), [16.0, 16.0], rtol=1e-6)
    # d/dw (5w - 1)^2 = 2 * (5w - 1) * 5 per example, summed over the two
    np.testing.assert_allclose(tape.gradient(got, w).numpy(), 2 * 2 * 4.0 * 5.0, rtol=1e-6)


def test_gradient_penalty_of_quadratic_critic_at_known_points():
    # critic(x) = 0.5 ||x||^2 has gradient x, so the penalty is (||x|| - 1)^2 per example.
    def critic(x):
        return 0.5 * tf.reduce_sum(tf.square(x), axis=1, keepdims=True)

    points = tf.constant([[3.0, 4.0], [0.6, 0.8], [0.0, 0.0], [0.0, 0.5]])
    got = regularizers.gradient_penalty(critic, points)
    np.testing.assert_allclose(got.numpy(), [16.0, 0.0, 1.0, 0.25], rtol=1e-6, atol=1e-7)


def test_gradient_penalty_of_constant_critic_is_target_squared():
    got = regularizers.gradient_penalty(lambda x: tf.zeros((2, 1)), tf.ones((2, 3)))
    np.testing.assert_allclose(got.numpy(), [1.0, 1.0])


def test_gradient_penalty_is_differentiable_in_critic_variables():
    # critic(x) = w * sum(x) over n = 4 inputs: grad_x = w * ones(4), norm = 2|w|, so at w = 1.5
    # the penalty is (3 - 1)^2 = 4 and d/dw (2|w| - 1)^2 = 2 (2|w| - 1) * 2 = 8 per example.
    w = tf.Variable(1.5)
    points = tf.constant([[1.0, -2.0, 3.0, 0.5], [0.0, 1.0, 0.0, 0.0]])
    with tf.GradientTape() as tape:
        penalty = regularizers.gradient_penalty(lambda x: w * tf.reduce_sum(x, axis=1), points)
        total = tf.reduce_sum(penalty)
    np.testing.assert_allclose(penalty.numpy(), [4.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(total, w).numpy(), 16.0, rtol=1e-6)


def test_gradient_penalty_through_keras_model_under_tf_function():
    layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
    layer.build((None, 3))

    @tf.function
    def step(points):
        with tf.GradientTape() as tape:
            total = tf.reduce_sum(regularizers.gradient_penalty(layer, points))
        return total, tape.gradient(total, layer.kernel)

    total, grad = step(tf.zeros((2, 3)))
    # kernel = ones(3,1): norm sqrt(3); d/dk (||k|| - 1)^2 = 2 (||k|| - 1) k / ||k|| per example.
    norm = math.sqrt(3.0)
    np.testing.assert_allclose(total.numpy(), 2 * (norm - 1.0) ** 2, rtol=1e-6)
    expected = 2 * 2 * (norm - 1.0) / norm
    np.testing.assert_allclose(grad.numpy(), np.full((3, 1), expected), rtol=1e-5)


def test_gradient_penalty_is_float32_for_a_bfloat16_critic():
    layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", dtype="mixed_bfloat16")
    got = regularizers.gradient_penalty(layer, tf.zeros((2, 4)))
    assert got.dtype == tf.float32
    # ||ones(4)|| = 2, exact in bfloat16.
    np.testing.assert_allclose(got.numpy(), [1.0, 1.0])


def test_gradient_penalty_reaches_every_dcgan_critic_variable():
    critic = networks.wgan_critic(resolution=28, channels=1, width=4)
    real = tf.random.stateless_uniform((2, 28, 28, 1), seed=(5, 6), minval=-1, maxval=1)
    fake = tf.random.stateless_uniform((2, 28, 28, 1), seed=(7, 8), minval=-1, maxval=1)
    with tf.GradientTape() as tape:
        penalty = regularizers.wgan_gp_penalty(
            lambda x: critic(x, training=True), real, fake, tf.constant([0.3, 0.9])
        )
        total = tf.reduce_sum(penalty)
    variables = critic.trainable_variables
    grads = dict(zip([v.path for v in variables], tape.gradient(total, variables)))
    assert penalty.shape == (2,)
    # The input gradient of a piecewise-linear net depends on every kernel (second-order
    # terms through conv and LeakyReLU) but not on the output bias.
    for path in ("down0/kernel", "down1/kernel", "logits/kernel"):
        assert np.all(np.isfinite(grads[path].numpy())) and np.any(grads[path].numpy() != 0.0)
    assert grads["logits/bias"] is None


def test_wgan_gp_penalty_evaluates_at_interpolates():
    # critic(x) = 0.5 ||x||^2 -> penalty (||x_hat|| - 1)^2 with x_hat = w real + (1 - w) fake.
    def critic(x):
        return 0.5 * tf.reduce_sum(tf.square(x), axis=1)

    real = tf.constant([[6.0, 8.0], [6.0, 8.0]])
    fake = tf.zeros((2, 2))
    got = regularizers.wgan_gp_penalty(critic, real, fake, tf.constant([0.5, 0.1]))
    np.testing.assert_allclose(got.numpy(), [16.0, 0.0], rtol=1e-6, atol=1e-6)


def test_clip_weights_clips_every_variable():
    a = tf.Variable([-1.0, -0.005, 0.2])
    b = tf.Variable([[0.02, 0.0]])
    regularizers.clip_weights([a, b], 0.01)
    np.testing.assert_allclose(a.numpy(), [-0.01, -0.005, 0.01])
    np.testing.assert_allclose(b.numpy(), [[0.01, 0.0]])


def test_clip_weights_on_keras_variables():
    layer = keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="zeros")
    layer.build((None, 2))
    regularizers.clip_weights(layer.trainable_variables, 0.5)
    np.testing.assert_allclose(layer.kernel.numpy(), np.full((2, 2), 0.5))


@pytest.mark.parametrize("clip_value", [0.0, -0.01])
def test_clip_weights_rejects_non_positive_clip(clip_value):
    variable = tf.Variable([1.0])
    with pytest.raises(ValueError, match=f"got {clip_value!r}"):
        regularizers.clip_weights([variable], clip_value)
    np.testing.assert_array_equal(variable.numpy(), [1.0])


def test_gradient_penalty_rejects_negative_target():
    with pytest.raises(ValueError, match="-1.0"):
        regularizers.gradient_penalty(lambda x: x, tf.ones((1, 1)), target_norm=-1.0)


A = np.arange(1, 13, dtype=np.float32).reshape(2, 3, 2) / 10.0
NORM_A_SQUARED = float(np.sum(A.astype(np.float64) ** 2))  # 6.5


def _linear_critic(x):
    return tf.reduce_sum(tf.constant(A) * x, axis=[1, 2, 3])[:, tf.newaxis]


def _points(batch=4, seed=(1, 2)):
    return tf.random.stateless_normal((batch, 2, 3, 2), seed=seed)


@pytest.mark.parametrize("penalty", [regularizers.r1_penalty, regularizers.r2_penalty])
def test_r1_and_r2_of_linear_critic_are_the_squared_weight_norm(penalty):
    got = penalty(_linear_critic, _points())
    assert got.shape == (4,) and got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), [NORM_A_SQUARED] * 4, rtol=1e-6)


def test_r1_of_quadratic_critic_is_squared_input_norm_per_example():
    # critic(x) = 0.5 ||x||^2 has gradient x.
    def critic(x):
        return 0.5 * tf.reduce_sum(tf.square(x), axis=1, keepdims=True)

    points = tf.constant([[3.0, 4.0], [0.0, 0.0], [1.0, -2.0]])
    np.testing.assert_allclose(
        regularizers.r1_penalty(critic, points).numpy(), [25.0, 0.0, 5.0], rtol=1e-6)


def test_r1_is_differentiable_in_critic_variables():
    # critic(x) = w * sum(a * x): R1 = w^2 ||a||^2, dR1/dw = 2 w ||a||^2 per example.
    w = tf.Variable(1.5)
    with tf.GradientTape() as tape:
        penalty = regularizers.r1_penalty(lambda x: w * _linear_critic(x), _points(batch=3))
        total = tf.reduce_sum(penalty)
    np.testing.assert_allclose(penalty.numpy(), [2.25 * NORM_A_SQUARED] * 3, rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(total, w).numpy(), 3 * 3.0 * NORM_A_SQUARED, rtol=1e-6)


def test_r1_gradient_is_finite_and_zero_where_the_input_gradient_vanishes():
    # critic(x) = w * 0.5 ||x||^2 at x = 0: R1 = 0 and its w-gradient is 0, not NaN.
    w = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(regularizers.r1_penalty(
            lambda x: w * 0.5 * tf.reduce_sum(tf.square(x), axis=1), tf.zeros((2, 3))))
    assert tape.gradient(total, w).numpy() == 0.0


def test_r1_is_float32_for_a_bfloat16_critic():
    layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", dtype="mixed_bfloat16")
    got = regularizers.r1_penalty(layer, tf.zeros((2, 4)))
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), [4.0, 4.0])


def test_dragan_perturbation_uses_the_std_of_the_whole_batch():
    real = tf.constant([[1.0, -1.0], [3.0, 5.0]])  # mean 2, std sqrt(5)
    uniform = tf.constant([[0.0, 0.5], [1.0, 0.25]])
    got = regularizers.dragan_perturbation(real, uniform)
    np.testing.assert_allclose(got.numpy(), 0.5 * np.sqrt(5.0) * uniform.numpy(), rtol=1e-6)
    images = _points(batch=3)
    np.testing.assert_allclose(
        regularizers.dragan_perturbation(images, tf.ones_like(images)).numpy(),
        np.full(images.shape, 0.5 * np.std(images.numpy())), rtol=1e-5)


def test_dragan_perturbation_is_the_global_batch_statistic_under_mirrored_strategy():
    strategy = make_strategy("mirrored", cpu_replicas=2)  # one instance per process: shared collective keys
    real = np.array([[1.0, -1.0], [3.0, 5.0], [0.0, 2.0], [7.0, -4.0]], dtype=np.float32)
    rows = strategy.experimental_distribute_values_from_function(
        lambda context: real[2 * context.replica_id_in_sync_group:][:2])

    @tf.function
    def perturb(values):
        return strategy.run(lambda x: regularizers.dragan_perturbation(x, tf.ones_like(x)),
                            args=(values,))

    got = np.concatenate([t.numpy() for t in strategy.experimental_local_results(perturb(rows))])
    np.testing.assert_allclose(got, np.full((4, 2), 0.5 * np.std(real)), rtol=1e-6)


def test_dragan_penalty_of_linear_critic():
    real = _points()
    noise = regularizers.dragan_perturbation(real, tf.random.stateless_uniform(real.shape, (3, 4)))
    expected = (np.sqrt(NORM_A_SQUARED) - 1.0) ** 2
    np.testing.assert_allclose(
        regularizers.dragan_penalty(_linear_critic, real, noise).numpy(), [expected] * 4, rtol=1e-5)


def test_dragan_penalty_is_evaluated_at_the_perturbed_points():
    # critic(x) = 0.5 ||x||^2 -> (||x + noise|| - k)^2.
    def critic(x):
        return 0.5 * tf.reduce_sum(tf.square(x), axis=1)

    real = tf.constant([[3.0, 0.0], [0.0, 0.0]])
    noise = tf.constant([[0.0, 4.0], [0.5, 0.0]])
    got = regularizers.dragan_penalty(critic, real, noise, target_norm=2.0)
    np.testing.assert_allclose(got.numpy(), [9.0, 2.25], rtol=1e-6)


def test_consistency_loss_of_linear_critic():
    images = _points(batch=3)
    augmented = _points(batch=3, seed=(9, 9))
    got = regularizers.consistency_loss(_linear_critic, images, augmented)
    expected = np.sum(A * (images.numpy() - augmented.numpy()), axis=(1, 2, 3)) ** 2
    assert got.shape == (3,) and got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(
        regularizers.consistency_loss(
            _linear_critic, images, augmented, logits=_linear_critic(images)).numpy(),
        expected, rtol=1e-5)
    np.testing.assert_array_equal(
        regularizers.consistency_loss(_linear_critic, images, images).numpy(), [0.0] * 3)


def test_consistency_loss_is_differentiable_in_critic_variables():
    # critic = w * sum(a * x): loss = w^2 s^2 with s = sum(a * (x - T(x))), d/dw = 2 w s^2.
    images, augmented = _points(batch=2), _points(batch=2, seed=(9, 9))
    s = np.sum(A * (images.numpy() - augmented.numpy()), axis=(1, 2, 3))
    w = tf.Variable(0.5)
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(
            regularizers.consistency_loss(lambda x: w * _linear_critic(x), images, augmented))
    np.testing.assert_allclose(tape.gradient(total, w).numpy(), np.sum(2 * 0.5 * s**2), rtol=1e-5)


def test_consistency_loss_is_float32_for_a_bfloat16_critic():
    layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", dtype="mixed_bfloat16")
    got = regularizers.consistency_loss(layer, tf.ones((2, 4)), tf.zeros((2, 4)))
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), [16.0, 16.0])
