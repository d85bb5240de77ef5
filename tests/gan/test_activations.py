"""The LeakyReLU differentiated from its output (`gan.activations`): the same values and
gradients as Keras's, and the discriminator's convolutions fused with it in a training step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from gan import activations, networks
from tests.gan.grappler import optimized_nodes


def _gradients(layer, x):
    """The layer's output, its input gradient and the second derivative of a first-order
    quantity (as R1 takes it), for a fixed upstream weighting."""
    weights = tf.random.stateless_normal(x.shape, seed=[1, 2], dtype=x.dtype)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = layer(x)
            total = tf.reduce_sum(tf.cast(y * weights, tf.float32))
        first = inner.gradient(total, x)
        penalty = tf.reduce_sum(tf.cast(first * weights, tf.float32) ** 2)
    second = outer.gradient(penalty, x)
    return y, first, second


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_values_and_gradients_equal_keras_leaky_relu_bit_for_bit(dtype):
    x = tf.random.stateless_normal([4, 6, 6, 3], seed=[0, 1], dtype=dtype)
    x = tf.tensor_scatter_nd_update(x, [[0, 0, 0, 0], [1, 2, 3, 1]], tf.zeros([2], dtype))  # x = 0
    ours = _gradients(activations.LeakyReLU(negative_slope=0.2, dtype=dtype.name), x)
    keras_own = _gradients(keras.layers.LeakyReLU(negative_slope=0.2, dtype=dtype.name), x)
    for got, expected in zip(ours, keras_own):
        assert got is not None and expected is not None
        np.testing.assert_array_equal(tf.cast(got, tf.float32).numpy(),
                                      tf.cast(expected, tf.float32).numpy())
    assert float(tf.reduce_max(tf.abs(tf.cast(ours[1], tf.float32)))) > 0


def test_only_positive_slopes_and_the_layer_round_trips_its_config():
    with pytest.raises(ValueError, match="positive negative_slope, got 0.0"):
        activations.LeakyReLU(negative_slope=0.0)
    layer = activations.LeakyReLU(negative_slope=0.2, name="act")
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(again) is activations.LeakyReLU and again.get_config() == layer.get_config()


def test_a_discriminator_step_fuses_each_convolution_with_its_activation():
    """Grappler fuses Conv2D + BiasAdd + LeakyRelu into one kernel in the training step (with
    Keras's LeakyReLU the rewrite failed and left the activations apart)."""
    discriminator = networks.dcgan_discriminator(resolution=28, channels=1, width=8)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(discriminator.trainable_variables)

    @tf.function
    def step(images):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(discriminator(images, training=True))
        gradients = tape.gradient(loss, discriminator.trainable_variables)
        optimizer.apply_gradients(zip(gradients, discriminator.trainable_variables))
        return loss

    nodes = optimized_nodes(step, tf.TensorSpec([8, 28, 28, 1]))
    fused = [list(node.attr["fused_ops"].list.s) for node in nodes if node.op == "_FusedConv2D"]
    assert fused == [[b"BiasAdd", b"LeakyRelu"]] * 2
    assert not [node for node in nodes if node.op in ("Conv2D", "LeakyRelu")]
