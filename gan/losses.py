"""Adversarial losses as pure, per-example functions.

Every function takes discriminator logits (pre-sigmoid scores) of shape (batch,) or
(batch, ...) and returns a float32 tensor of shape (batch,): the elementwise loss averaged over
the non-batch axes. The trainer, not the loss, reduces over the global batch
(`StepInputs.mean`: the sum over the replica's rows divided by the global batch, as
`tf.nn.compute_average_loss` does), which is what keeps the scale right under MirroredStrategy.

Inputs are cast to float32 before any arithmetic so that bfloat16/float16 logits from a
mixed-precision discriminator neither overflow in `softplus` nor lose the small differences the
losses are made of. Sigmoid cross-entropies are written with `softplus`, which is finite for any
finite logit (log(1 + exp(100)) would overflow if written naively).
"""

import dataclasses
import types
from typing import Callable, Mapping

import tensorflow as tf

Tensor = tf.Tensor


def _per_example(elementwise: Callable[..., Tensor], *logits: Tensor) -> Tensor:
    """Applies `elementwise` to float32 logits and means the result over non-batch axes."""
    logits32 = [tf.cast(x, tf.float32) for x in logits]
    values = elementwise(*logits32)
    return tf.reduce_mean(tf.reshape(values, (tf.shape(values)[0], -1)), axis=1)


def minimax_discriminator_loss(real_logits: Tensor, fake_logits: Tensor) -> Tensor:
    """-log D(x) - log(1 - D(G(z))), the cross-entropy of the original GAN."""
    return _per_example(
        lambda r, f: tf.nn.softplus(-r) + tf.nn.softplus(f), real_logits, fake_logits
    )


def minimax_generator_loss(fake_logits: Tensor) -> Tensor:
    """log(1 - D(G(z))), the saturating form of Goodfellow et al. (2014).

    Its gradient vanishes when the discriminator confidently rejects fakes, which is why it is
    kept: it is the baseline that `non_saturating` fixes.
    """
    return _per_example(lambda f: -tf.nn.softplus(f), fake_logits)


def non_saturating_discriminator_loss(real_logits: Tensor, fake_logits: Tensor) -> Tensor:
    """Same discriminator objective as minimax; only the generator side differs."""
    return minimax_discriminator_loss(real_logits, fake_logits)


def non_saturating_generator_loss(fake_logits: Tensor) -> Tensor:
    """-log D(G(z)): same fixed point as minimax but strong gradients early in training."""
    return _per_example(lambda f: tf.nn.softplus(-f), fake_logits)


def wasserstein_discriminator_loss(real_logits: Tensor, fake_logits: Tensor) -> Tensor:
    """Critic minimizes E[C(G(z))] - E[C(x)]; needs a Lipschitz constraint (clipping or GP)."""
    return _per_example(lambda r, f: f - r, real_logits, fake_logits)


def wasserstein_generator_loss(fake_logits: Tensor) -> Tensor:
    """Generator maximizes the critic score of its samples."""
    return _per_example(lambda f: -f, fake_logits)


def hinge_discriminator_loss(real_logits: Tensor, fake_logits: Tensor) -> Tensor:
    """max(0, 1 - D(x)) + max(0, 1 + D(G(z))): margin loss used by SN-GAN/BigGAN."""
    return _per_example(
        lambda r, f: tf.nn.relu(1.0 - r) + tf.nn.relu(1.0 + f), real_logits, fake_logits
    )


def hinge_generator_loss(fake_logits: Tensor) -> Tensor:
    """The hinge generator loss is the Wasserstein one: -D(G(z))."""
    return wasserstein_generator_loss(fake_logits)


def least_squares_discriminator_loss(real_logits: Tensor, fake_logits: Tensor) -> Tensor:
    """LSGAN with targets real=1, fake=0 (Mao et al. 2017, a-b-c = 0-1-1)."""
    return _per_example(
        lambda r, f: 0.5 * (tf.square(r - 1.0) + tf.square(f)), real_logits, fake_logits
    )


def least_squares_generator_loss(fake_logits: Tensor) -> Tensor:
    """LSGAN generator pulls fake scores to the real target 1."""
    return _per_example(lambda f: 0.5 * tf.square(f - 1.0), fake_logits)


def relativistic_discriminator_loss(real_logits: Tensor, fake_logits: Tensor) -> Tensor:
    """softplus(-(D(x_i) - D(G(z_i)))): the relativistic pairing loss (RpGAN, Jolicoeur-Martineau
    2019; R3GAN's loss, Huang et al. 2024), example i of the real batch paired with fake i.

    D learns how much more real x_i looks than its partner fake, not an absolute score, so no
    region of the data can be dropped while the fakes sit elsewhere: R3GAN shows it covers modes
    the classic loss loses (with R1 and R2).
    """
    return _per_example(lambda r, f: tf.nn.softplus(f - r), real_logits, fake_logits)


def relativistic_generator_loss(fake_logits: Tensor, real_logits: Tensor) -> Tensor:
    """softplus(-(D(G(z_i)) - D(x_i))): the pairing reversed, so G's update reads a real batch."""
    return _per_example(lambda f, r: tf.nn.softplus(r - f), fake_logits, real_logits)


def top_k_weights(fake_logits: Tensor, fraction) -> Tensor:
    """Per-example weights of top-k generator training (Sinha et al. 2020), shape (batch,).

    The generator learns only from the round(fraction * batch) fakes (at least one) that the
    discriminator scores as most real: the gradients of the others mostly push samples towards
    whatever the discriminator currently likes least, not towards the data. Kept examples weigh
    batch / k and the rest 0, so a batch mean of ``weights * loss`` is the mean over the kept
    ones. Ties keep the earlier example. Shapes stay static (a rank mask, not `tf.math.top_k`
    with a moving k), so a decaying fraction neither retraces nor breaks XLA.
    """
    scores = tf.reduce_mean(tf.reshape(tf.cast(fake_logits, tf.float32), (tf.shape(fake_logits)[0], -1)),
                            axis=1)
    rows = tf.cast(tf.shape(scores)[0], tf.float32)
    k = tf.maximum(1.0, tf.round(tf.cast(fraction, tf.float32) * rows))
    order = tf.argsort(scores, direction="DESCENDING", stable=True)
    ranks = tf.cast(tf.math.invert_permutation(order), tf.float32)
    return tf.cast(ranks < k, tf.float32) * (rows / k)


@dataclasses.dataclass(frozen=True)
class AdversarialLoss:
    """The two halves of one adversarial objective, selected together by `--loss`.

    `generator` takes the fakes' logits; with `pairs_real` it takes ``(fake_logits,
    real_logits)``, the discriminator's logits of a real batch paired example by example with
    the fakes, so the generator's update reads a real batch too (the relativistic loss).
    """

    discriminator: Callable[[Tensor, Tensor], Tensor]
    generator: Callable[..., Tensor]
    pairs_real: bool = False


LOSSES: Mapping[str, AdversarialLoss] = types.MappingProxyType({
    "minimax": AdversarialLoss(minimax_discriminator_loss, minimax_generator_loss),
    "non_saturating": AdversarialLoss(
        non_saturating_discriminator_loss, non_saturating_generator_loss
    ),
    "wasserstein": AdversarialLoss(wasserstein_discriminator_loss, wasserstein_generator_loss),
    "hinge": AdversarialLoss(hinge_discriminator_loss, hinge_generator_loss),
    "least_squares": AdversarialLoss(
        least_squares_discriminator_loss, least_squares_generator_loss
    ),
    "relativistic": AdversarialLoss(
        relativistic_discriminator_loss, relativistic_generator_loss, pairs_real=True
    ),
})


def get_loss(name: str) -> AdversarialLoss:
    """Looks up the loss pair for a `--loss` flag value."""
    if name not in LOSSES:
        raise ValueError(f"Unknown --loss {name!r}; choose one of {', '.join(sorted(LOSSES))}.")
    return LOSSES[name]
