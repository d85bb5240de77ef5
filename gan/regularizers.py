"""Lipschitz regularizers for critics: the WGAN-GP gradient penalty and WGAN weight clipping.

The penalty functions return PER-EXAMPLE values of shape (batch,), like the losses; the
trainer weights them (lambda) and averages them over the global batch. They are correct only
for critics whose output for one example does not depend on the other examples in the batch,
so a critic used with a gradient penalty must not use batch normalization.
"""

from typing import Callable, Iterable, Sequence

import tensorflow as tf

Tensor = tf.Tensor


def interpolate(real: Tensor, fake: Tensor, weights: Tensor) -> Tensor:
    """Returns weights * real + (1 - weights) * fake, one weight per example.

    `weights` has shape (batch,) and is broadcast over the remaining axes of `real`/`fake`.
    """
    weights = tf.cast(weights, real.dtype)
    weights = tf.reshape(weights, [-1] + [1] * (real.shape.rank - 1))
    return weights * real + (1.0 - weights) * fake


def safe_norm(x: Tensor, axis: int | Sequence[int]) -> Tensor:
    """Euclidean norm of `x` over `axis` whose gradient is finite (zero) where the norm is 0.

    d||x||/dx = x / ||x|| is 0/0 at x = 0, and TF turns it into NaN, which would poison a
    gradient penalty whenever the critic's input gradient vanishes for one example. The usual
    fix sqrt(sum(x^2) + eps) biases every norm and its gradient; instead the "double where"
    trick feeds sqrt a harmless 1 where the squared norm is 0 and selects 0 there, so the value
    is exact everywhere and the gradient at 0 is 0 (a valid subgradient).
    """
    squared = tf.reduce_sum(tf.square(x), axis=axis)
    positive = squared > 0.0
    safe_squared = tf.where(positive, squared, tf.ones_like(squared))
    return tf.where(positive, tf.sqrt(safe_squared), tf.zeros_like(squared))


def gradient_penalty(
    critic_fn: Callable[[Tensor], Tensor], points: Tensor, target_norm: float = 1.0
) -> Tensor:
    """Per-example (||grad_x critic(x)|| - target_norm)^2 at `points`, shape (batch,).

    `critic_fn` maps a batch to logits of shape (batch, 1) or (batch,). The input gradient is
    taken with an inner tape, so the result stays differentiable with respect to the critic's
    variables when this is called under the trainer's (outer) tape. Differentiating the sum of
    the logits gives every example's own gradient because examples do not interact (no batch
    norm). The norm is over all non-batch axes and computed in float32.

    If `points` depend on the generator (e.g. interpolates with un-stopped fakes), the outer
    tape will also reach the generator; the caller decides whether that is wanted.
    """
    if target_norm < 0:
        raise ValueError(f"target_norm must be >= 0, got {target_norm!r}.")
    points = tf.convert_to_tensor(points)
    with tf.GradientTape() as tape:
        tape.watch(points)
        logits = critic_fn(points)
    grads = tape.gradient(logits, points, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    grads = tf.cast(grads, tf.float32)
    norms = safe_norm(tf.reshape(grads, (tf.shape(grads)[0], -1)), axis=1)
    return tf.square(norms - target_norm)


def wgan_gp_penalty(
    critic_fn: Callable[[Tensor], Tensor], real: Tensor, fake: Tensor, weights: Tensor
) -> Tensor:
    """The WGAN-GP penalty of Gulrajani et al. (2017) at random interpolates, shape (batch,).

    `weights` must be drawn uniform in [0, 1] per example, by the caller from its own RNG so
    that runs are reproducible and resumable. (The popular Keras WGAN-GP example draws them
    from a normal distribution, which puts most points outside the segment real-fake.)
    """
    return gradient_penalty(critic_fn, interpolate(real, fake, weights))


def clip_weights(variables: Iterable[tf.Variable], clip_value: float) -> None:
    """Clips every variable in place to [-clip_value, clip_value] (the original WGAN).

    Call it after each critic update. Usable inside tf.function: the assignments are stateful
    ops that run in order.
    """
    if clip_value <= 0:
        raise ValueError(
            f"clip_value must be > 0, got {clip_value!r}; the WGAN paper uses 0.01."
        )
    for variable in variables:
        variable.assign(tf.clip_by_value(variable, -clip_value, clip_value))
