"""LeakyReLU whose gradient reads its output, so the convolution before it is fused.

Keras's LeakyReLU is differentiated by TensorFlow's LeakyReluGrad(gradients, features=x): the
backward pass reads the activation's input, which in a discriminator is a convolution's BiasAdd.
Grappler's remapper rewrites Conv2D + BiasAdd + LeakyRelu into one oneDNN kernel
(_FusedConv2D), which removes that BiasAdd; with the gradient still reading it, the rewrite
fails ("remapper failed: INVALID_ARGUMENT: Mutation::Apply error: fanout
'.../LeakyReluGrad' exist for missing node '.../BiasAdd'") and every remapper rewrite of the
traced step is dropped, not only that one. For a positive slope the output has the input's
sign (and is 0 where it is 0), so LeakyReluGrad(gradients, features=y) is the same gradient,
bit for bit, computed from y: the BiasAdd then has one reader and the fusion holds.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def leaky_relu(x: tf.Tensor, negative_slope: float) -> tf.Tensor:
    """tf.nn.leaky_relu(x, negative_slope), differentiated from its output (module docstring).
    `negative_slope` must be positive."""

    @tf.custom_gradient
    def forward(x):
        y = tf.nn.leaky_relu(x, alpha=negative_slope)

        def backward(upstream):
            return tf.raw_ops.LeakyReluGrad(gradients=upstream, features=y, alpha=negative_slope)

        return y, backward

    return forward(x)


@keras.saving.register_keras_serializable(package="gantry")
class LeakyReLU(keras.layers.LeakyReLU):
    """keras.layers.LeakyReLU computing the same values and gradients, with the gradient read
    from its output (module docstring). Only positive slopes, which keep the sign."""

    def __init__(self, negative_slope: float = 0.3, **kwargs):
        if not negative_slope > 0:
            raise ValueError(f"LeakyReLU needs a positive negative_slope, got {negative_slope!r}.")
        super().__init__(negative_slope=negative_slope, **kwargs)

    def call(self, inputs):
        return leaky_relu(inputs, self.negative_slope)
