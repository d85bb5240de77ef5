"""A competent engineer's afternoon DCGAN: the strong baseline of `benchmarks/quality.py`.

The tutorial recipe (`tutorial_dcgan.py`) is still collapsed at short budgets, so beating it
says little. This is what a user who knows the DCGAN paper's advice writes instead:
G = dense 7x7x128 + batch norm + ReLU, a 4x4 stride-2 transposed convolution to 64 channels +
batch norm + ReLU, a 4x4 stride-2 transposed convolution to 1 channel with tanh;
D = a 4x4 stride-2 convolution to 64 + LeakyReLU 0.2, a 4x4 stride-2 convolution to 128 + batch
norm + LeakyReLU 0.2, a dense logit; the non-saturating loss, Adam 2e-4 with beta1 0.5 for both
models, batch 64, 64-d noise, and one discriminator update, then one generator update (on fresh
noise, through the updated discriminator) per step.

The loop, data and command line are `benchmarks/recipes.py`'s.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers  # noqa: E402

from benchmarks import recipes  # noqa: E402

BATCH_SIZE = 64
LATENT_DIM = 64
LEARNING_RATE, BETA_1 = 2e-4, 0.5


def make_generator() -> keras.Model:
    return keras.Sequential([
        keras.Input(shape=(LATENT_DIM,)),
        layers.Dense(7 * 7 * 128),
        layers.BatchNormalization(),
        layers.ReLU(),
        layers.Reshape((7, 7, 128)),
        layers.Conv2DTranspose(64, 4, strides=2, padding="same"),
        layers.BatchNormalization(),
        layers.ReLU(),
        layers.Conv2DTranspose(1, 4, strides=2, padding="same", activation="tanh"),
    ], name="strong_generator")


def make_discriminator() -> keras.Model:
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(64, 4, strides=2, padding="same"),
        layers.LeakyReLU(0.2),
        layers.Conv2D(128, 4, strides=2, padding="same"),
        layers.BatchNormalization(),
        layers.LeakyReLU(0.2),
        layers.Flatten(),
        layers.Dense(1),
    ], name="strong_discriminator")


class StrongDcgan:
    """The recipe's models, optimizers and alternating `train_step`."""

    batch_size, latent_dim = BATCH_SIZE, LATENT_DIM

    def __init__(self, seed: int):
        keras.utils.set_random_seed(seed)
        self.generator, self.discriminator = make_generator(), make_discriminator()
        self.cross_entropy = keras.losses.BinaryCrossentropy(from_logits=True)
        self.g_optimizer = keras.optimizers.Adam(LEARNING_RATE, beta_1=BETA_1)
        self.d_optimizer = keras.optimizers.Adam(LEARNING_RATE, beta_1=BETA_1)
        self.g_optimizer.build(self.generator.trainable_variables)
        self.d_optimizer.build(self.discriminator.trainable_variables)

    def train_step(self, images: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            fakes = self.generator(tf.random.normal([BATCH_SIZE, LATENT_DIM]), training=True)
            real_logits = self.discriminator(images, training=True)
            fake_logits = self.discriminator(fakes, training=True)
            d_loss = (self.cross_entropy(tf.ones_like(real_logits), real_logits)
                      + self.cross_entropy(tf.zeros_like(fake_logits), fake_logits))
        variables = self.discriminator.trainable_variables
        self.d_optimizer.apply_gradients(zip(tape.gradient(d_loss, variables), variables))
        with tf.GradientTape() as tape:
            fakes = self.generator(tf.random.normal([BATCH_SIZE, LATENT_DIM]), training=True)
            fake_logits = self.discriminator(fakes, training=True)
            g_loss = self.cross_entropy(tf.ones_like(fake_logits), fake_logits)
        variables = self.generator.trainable_variables
        self.g_optimizer.apply_gradients(zip(tape.gradient(g_loss, variables), variables))


if __name__ == "__main__":
    recipes.main(StrongDcgan, __doc__.split("\n\n")[0])
