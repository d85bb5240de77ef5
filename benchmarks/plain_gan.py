"""The plain GAN steps the trainer is measured against, written as a tutorial writes them.

The fused step is the TensorFlow DCGAN tutorial's: one generator forward pass, the
discriminator on the real and the fake batch, both losses under two gradient tapes, both
optimizers applied. The alternating step is what Gantry's trainer computes (a discriminator
update, then a generator update against the updated discriminator, each with its own fake
batch), without the trainer's machinery. Both run in replica context (call them through
`strategy.run`); losses are averaged over the global batch, so under MirroredStrategy the
optimizers' all-reduce (sum) gives the global mean gradient.

With `jit_compile=True` the same piece as in the trainer is compiled with XLA (see
`trainers.steps.make_replica_update`): the losses and gradients, not the optimizers' updates,
so that XLA on/off compares like with like.
"""

from __future__ import annotations

from typing import Callable

import keras
import tensorflow as tf

from gan import losses


def _optimizer(precision: str, model: keras.Model) -> keras.optimizers.Optimizer:
    optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)
    if precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)
    return optimizer


class PlainGan:
    """A generator, a discriminator, two Adam optimizers and the two plain steps.

    Args:
      generator, discriminator: built under `strategy`'s scope (and the precision's policy).
      strategy: where the steps run; the optimizers are created in its scope.
      precision: the Keras dtype policy the models were built under (mixed_float16 adds loss
        scaling, as the tutorial would need).
      global_batch_size: real examples per step over all replicas.
      latent_dim: generator input size.
      jit_compile: compile the losses and gradients of each step with XLA.
    """

    def __init__(self, *, generator: keras.Model, discriminator: keras.Model,
                 strategy: tf.distribute.Strategy, precision: str, global_batch_size: int,
                 latent_dim: int, jit_compile: bool):
        self.generator, self.discriminator = generator, discriminator
        self.loss = losses.get_loss("non_saturating")
        with strategy.scope():
            self.g_optimizer = _optimizer(precision, generator)
            self.d_optimizer = _optimizer(precision, discriminator)
        self.global_batch_size = global_batch_size
        self.replica_batch_size = global_batch_size // strategy.num_replicas_in_sync
        self.latent_dim = latent_dim
        compiled: Callable[[Callable], Callable] = (
            (lambda fn: tf.function(fn, jit_compile=True)) if jit_compile else (lambda fn: fn))
        self._fused_gradients = compiled(self._fused_gradients_fn)
        self._d_gradients = compiled(self._d_gradients_fn)
        self._g_gradients = compiled(self._g_gradients_fn)

    def fused_step(self, batch) -> None:
        """The tutorial's step: one generator forward shared by both tapes and both updates."""
        g_gradients, d_gradients = self._fused_gradients(batch["x"])
        self._apply(self.g_optimizer, g_gradients, self.generator)
        self._apply(self.d_optimizer, d_gradients, self.discriminator)

    def alternating_step(self, batch) -> None:
        """A discriminator update, then a generator update with a fresh fake batch."""
        self._apply(self.d_optimizer, self._d_gradients(batch["x"]), self.discriminator)
        self._apply(self.g_optimizer, self._g_gradients(), self.generator)

    @staticmethod
    def _apply(optimizer, gradients, model: keras.Model) -> None:
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))

    def _fake(self) -> tf.Tensor:
        noise = tf.random.normal([self.replica_batch_size, self.latent_dim])
        return self.generator(noise, training=True)

    def _mean(self, per_example: tf.Tensor) -> tf.Tensor:
        return tf.nn.compute_average_loss(tf.cast(per_example, tf.float32),
                                          global_batch_size=self.global_batch_size)

    def _d_loss(self, real_logits, fake_logits) -> tf.Tensor:
        return self.d_optimizer.scale_loss(
            self._mean(self.loss.discriminator(real_logits, fake_logits)))

    def _g_loss(self, fake_logits) -> tf.Tensor:
        return self.g_optimizer.scale_loss(self._mean(self.loss.generator(fake_logits)))

    def _fused_gradients_fn(self, real):
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            fake = self._fake()
            real_logits = self.discriminator(real, training=True)
            fake_logits = self.discriminator(fake, training=True)
            g_loss, d_loss = self._g_loss(fake_logits), self._d_loss(real_logits, fake_logits)
        return (g_tape.gradient(g_loss, self.generator.trainable_variables),
                d_tape.gradient(d_loss, self.discriminator.trainable_variables))

    def _d_gradients_fn(self, real):
        with tf.GradientTape() as tape:
            loss = self._d_loss(self.discriminator(real, training=True),
                                self.discriminator(self._fake(), training=True))
        return tape.gradient(loss, self.discriminator.trainable_variables)

    def _g_gradients_fn(self):
        with tf.GradientTape() as tape:
            loss = self._g_loss(self.discriminator(self._fake(), training=True))
        return tape.gradient(loss, self.generator.trainable_variables)
