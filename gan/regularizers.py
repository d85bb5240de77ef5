"""Regularizers for discriminators/critics: gradient penalties (WGAN-GP and its one-sided form,
R1/R2, DRAGAN), consistency regularization, and WGAN weight clipping.

The penalty functions return PER-EXAMPLE float32 values of shape (batch,), like the losses;
the trainer weights them and averages them over the global batch. They return the bare
penalty, never a weight times it: the caller owns every coefficient (lambda, gamma / 2, a lazy
interval). Gradient penalties are correct only for critics whose output for one example does
not depend on the other examples in the batch, so such a critic must not use batch norm.

Randomness (interpolation weights, DRAGAN perturbations) is always an argument: the caller
draws it from its per-update stateless key, which keeps runs reproducible and resumable.
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


def _input_gradients(critic_fn: Callable[[Tensor], Tensor], points: Tensor) -> Tensor:
    """Per-example float32 gradients of the critic w.r.t. its input, flattened to (batch, -1).

    Taken with an inner tape, so they stay differentiable w.r.t. the critic's variables under
    the trainer's outer tape. Differentiating the sum of the logits gives every example its
    own gradient because examples do not interact (no batch norm).
    """
    points = tf.convert_to_tensor(points)
    with tf.GradientTape() as tape:
        tape.watch(points)
        logits = critic_fn(points)
    grads = tape.gradient(logits, points, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return tf.reshape(tf.cast(grads, tf.float32), (tf.shape(grads)[0], -1))


def gradient_penalty(
    critic_fn: Callable[[Tensor], Tensor], points: Tensor, target_norm: float = 1.0
) -> Tensor:
    """Per-example (||grad_x critic(x)|| - target_norm)^2 at `points`, shape (batch,).

    `critic_fn` maps a batch to logits of shape (batch, 1) or (batch,). The result stays
    differentiable w.r.t. the critic's variables under the trainer's (outer) tape. The norm is
    over all non-batch axes and computed in float32.

    If `points` depend on the generator (e.g. interpolates with un-stopped fakes), the outer
    tape will also reach the generator; the caller decides whether that is wanted.
    """
    if target_norm < 0:
        raise ValueError(f"target_norm must be >= 0, got {target_norm!r}.")
    norms = safe_norm(_input_gradients(critic_fn, points), axis=1)
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


def one_sided_gradient_penalty(
    critic_fn: Callable[[Tensor], Tensor], real: Tensor, fake: Tensor, weights: Tensor
) -> Tensor:
    """WGAN-GP's penalty made one-sided: max(0, ||grad|| - 1)^2 at the same interpolates.

    Gulrajani et al. (2017, appendix) try it; Petzka et al. (2018, WGAN-LP) argue for it: a
    1-Lipschitz critic only needs gradient norms at most 1, so norms below 1 cost nothing
    here while the two-sided penalty pushes them up to 1. `weights` as in `wgan_gp_penalty`.
    """
    norms = safe_norm(_input_gradients(critic_fn, interpolate(real, fake, weights)), axis=1)
    return tf.square(tf.nn.relu(norms - 1.0))


def r1_penalty(critic_fn: Callable[[Tensor], Tensor], real: Tensor) -> Tensor:
    """R1 of Mescheder et al. (2018): per-example ||grad_x D(x)||^2 on real data, shape (batch,).

    Returns the bare squared norm. The paper's regularizer is gamma / 2 times its mean; with
    lazy regularization (StyleGAN2: every N discriminator updates) the caller also multiplies
    by N. The squared norm is summed directly (no square root), so it is smooth everywhere,
    including where the gradient vanishes.
    """
    return tf.reduce_sum(tf.square(_input_gradients(critic_fn, real)), axis=1)


def r2_penalty(critic_fn: Callable[[Tensor], Tensor], fake: Tensor) -> Tensor:
    """R2 of Mescheder et al. (2018): R1's squared input-gradient norm on generated data.

    Pass fakes with `tf.stop_gradient` unless the generator should be pushed by the penalty.
    Same convention as `r1_penalty`: the bare squared norm, shape (batch,).
    """
    return r1_penalty(critic_fn, fake)


def dragan_perturbation(real: Tensor, uniform: Tensor) -> Tensor:
    """DRAGAN's noise 0.5 * std(real) * uniform, std over every element of the global batch.

    This is the reference implementation's perturbation (Kodali et al. 2017 code: `X + 0.5 *
    X.std() * np.random.random(X.shape)`); `uniform` has the shape of `real` and holds U[0, 1)
    draws from the caller's stateless key. In replica context the standard deviation is
    all-reduced over replicas, so it is the statistic of the global batch and does not depend
    on the replica count; call it on every replica (it is a collective). The scale is a
    constant of the data (gradient stopped). Returns a tensor of `real`'s dtype.
    """
    real32 = tf.cast(real, tf.float32)
    count = tf.cast(tf.size(real32), tf.float32)
    total = _sum_over_replicas(tf.stack([tf.reduce_sum(real32), count]))
    mean = total[0] / total[1]
    variance = _sum_over_replicas(tf.reduce_sum(tf.square(real32 - mean))) / total[1]
    scale = tf.stop_gradient(0.5 * tf.sqrt(variance))
    return tf.cast(scale * tf.cast(uniform, tf.float32), real.dtype)


def _sum_over_replicas(value: Tensor) -> Tensor:
    context = tf.distribute.get_replica_context()
    if context is None:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def dragan_penalty(
    critic_fn: Callable[[Tensor], Tensor], real: Tensor, noise: Tensor, *, target_norm: float = 1.0
) -> Tensor:
    """DRAGAN (Kodali et al. 2017): (||grad D(x + noise)|| - target_norm)^2, shape (batch,).

    `noise` is usually `delta = dragan_perturbation(real, uniform)`. The reference code
    evaluates the gradient at a random point of the segment [x, x + delta] (alpha ~ U[0, 1)
    per example); to reproduce it pass `noise = alpha * delta`, alpha broadcast per example.
    """
    return gradient_penalty(critic_fn, real + tf.cast(noise, real.dtype), target_norm)


def consistency_loss(
    critic_fn: Callable[[Tensor], Tensor],
    images: Tensor,
    augmented: Tensor,
    *,
    logits: Tensor | None = None,
) -> Tensor:
    """Consistency regularization (CR-GAN, Zhang et al. 2020; bCR, Zhao et al. 2020).

    Per-example squared L2 distance ||D(x) - D(T(x))||^2 over the non-batch axes of the
    logits, float32, shape (batch,). `augmented` is T(images), e.g. from `gan.augment`. Pass
    `logits` = D(images) when the caller already has them to save a forward pass (and, with
    dropout, to compare against the same forward pass the adversarial loss used). Gradients
    flow through both terms, as in the papers. bCR applies this to reals and to fakes with
    separate weights; the caller owns those weights.
    """
    clean = critic_fn(images) if logits is None else logits
    difference = tf.cast(clean, tf.float32) - tf.cast(critic_fn(augmented), tf.float32)
    return tf.reduce_sum(tf.reshape(tf.square(difference), (tf.shape(difference)[0], -1)), axis=1)


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
