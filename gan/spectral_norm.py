"""Spectral normalization as Miyato et al. (2018) define it: the layer computes with W / sigma(W),
and the gradient flows through sigma to the free kernel W.

Keras's own `keras.layers.SpectralNormalization` differs in the way that matters for training: a
training-mode call ASSIGNS W / sigma(W) to the kernel and then differentiates the layer as if
the normalized kernel were a plain variable. The kernel is put back on the unit sphere after
every update, so the optimizer's steps stay the same size relative to the weights for the
whole run. Through sigma, the gradient of a function of W / sigma(W) is orthogonal to W (the
function does not change when W is scaled), so every update lengthens the free kernel a little
and its later updates turn it less: the step size relative to the weights falls as training
goes on, as it does for weights behind batch norm. PyTorch's `torch.nn.utils.spectral_norm` and
the paper's code train this way.

The subclass keeps Keras's variables and their names (the wrapped layer's kernel, the
power-iteration vector `vector_u`), so checkpoints of either restore into the other: a kernel
Keras normalized in place has sigma 1 and computes the same here.
"""

import keras
from keras import ops

# The floor of sigma and of the power-iteration vectors' norms: an all-zero kernel stays zero,
# not NaN.
_MIN_SIGMA = 1e-12


@keras.saving.register_keras_serializable(package="gantry")
class SpectralNormalization(keras.layers.SpectralNormalization):
    """`keras.layers.SpectralNormalization` whose call computes with W / sigma(W) and leaves the
    kernel variable free (module docstring).

    A training-mode call runs `power_iterations` steps of power iteration and stores the new
    left vector in `vector_u` (as Keras does, on every replica alike); an inference call uses
    the stored vector. u and v are constants to the gradient, as in the paper, so sigma's
    gradient is v u^T.
    """

    def call(self, inputs, training=False):
        vector_u, kernel = self.normalized_weights(training)
        if training:
            self.vector_u.assign(vector_u)
        # The wrapped layer reads its kernel through the scope: it computes with the
        # normalized tensor, and the gradient reaches the free kernel through it.
        with keras.StatelessScope(state_mapping=[(self.kernel, kernel)]):
            output = self.layer(inputs)
        return ops.cast(output, inputs.dtype)

    def normalized_weights(self, training=True):
        """(u, W / sigma): u after `power_iterations` steps from the stored vector when
        training, else the stored vector; sigma = v^T W u estimates W's largest singular value.
        Unlike Keras's method of this name, the kernel is a function of W that the gradient
        passes through."""
        weights = ops.reshape(self.kernel, [-1, self.kernel_shape[-1]])
        vector_u = self.vector_u.value
        for _ in range(self.power_iterations if training else 1):
            vector_v = ops.normalize(ops.matmul(vector_u, ops.transpose(weights)),
                                     epsilon=_MIN_SIGMA)
            if training:
                vector_u = ops.normalize(ops.matmul(vector_v, weights), epsilon=_MIN_SIGMA)
        vector_u, vector_v = ops.stop_gradient(vector_u), ops.stop_gradient(vector_v)
        sigma = ops.reshape(ops.matmul(ops.matmul(vector_v, weights), ops.transpose(vector_u)), ())
        return vector_u, self.kernel / ops.maximum(sigma, _MIN_SIGMA)
