"""The reference recipe of the TensorFlow DCGAN tutorial, trained for a wall-clock budget.

This is the baseline `benchmarks/quality.py` compares Gantry's presets against, written as the
tutorial (tensorflow.org/tutorials/generative/dcgan) writes it: its generator (Dense 7x7x256,
transposed convolutions 128, 64, 1 with 5x5 kernels, batch norm, LeakyReLU) and discriminator
(5x5 convolutions 64 and 128 with LeakyReLU and dropout 0.3, a dense logit), binary
cross-entropy on logits, Adam 1e-4 for both models, batch 256, and the fused train step (one
generator forward pass shared by both gradient tapes). Only the data differs: Fashion-MNIST
through Gantry's loader (the tutorial uses MNIST), already scaled to [-1, 1].

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

BATCH_SIZE = 256
LATENT_DIM = 100
LEARNING_RATE = 1e-4


def make_generator() -> keras.Model:
    return keras.Sequential([
        keras.Input(shape=(LATENT_DIM,)),
        layers.Dense(7 * 7 * 256, use_bias=False),
        layers.BatchNormalization(),
        layers.LeakyReLU(),
        layers.Reshape((7, 7, 256)),
        layers.Conv2DTranspose(128, (5, 5), strides=(1, 1), padding="same", use_bias=False),
        layers.BatchNormalization(),
        layers.LeakyReLU(),
        layers.Conv2DTranspose(64, (5, 5), strides=(2, 2), padding="same", use_bias=False),
        layers.BatchNormalization(),
        layers.LeakyReLU(),
        layers.Conv2DTranspose(1, (5, 5), strides=(2, 2), padding="same", use_bias=False,
                               activation="tanh"),
    ], name="tutorial_generator")


def make_discriminator() -> keras.Model:
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(64, (5, 5), strides=(2, 2), padding="same"),
        layers.LeakyReLU(),
        layers.Dropout(0.3),
        layers.Conv2D(128, (5, 5), strides=(2, 2), padding="same"),
        layers.LeakyReLU(),
        layers.Dropout(0.3),
        layers.Flatten(),
        layers.Dense(1),
    ], name="tutorial_discriminator")


class TutorialDcgan:
    """The tutorial's models, optimizers and fused `train_step`."""

    batch_size, latent_dim = BATCH_SIZE, LATENT_DIM

    def __init__(self, seed: int):
        keras.utils.set_random_seed(seed)
        self.generator, self.discriminator = make_generator(), make_discriminator()
        self.cross_entropy = keras.losses.BinaryCrossentropy(from_logits=True)
        self.g_optimizer = keras.optimizers.Adam(LEARNING_RATE)
        self.d_optimizer = keras.optimizers.Adam(LEARNING_RATE)
        self.g_optimizer.build(self.generator.trainable_variables)
        self.d_optimizer.build(self.discriminator.trainable_variables)

    def train_step(self, images: tf.Tensor) -> None:
        noise = tf.random.normal([BATCH_SIZE, LATENT_DIM])
        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            generated = self.generator(noise, training=True)
            real_output = self.discriminator(images, training=True)
            fake_output = self.discriminator(generated, training=True)
            gen_loss = self.cross_entropy(tf.ones_like(fake_output), fake_output)
            disc_loss = (self.cross_entropy(tf.ones_like(real_output), real_output)
                         + self.cross_entropy(tf.zeros_like(fake_output), fake_output))
        self.g_optimizer.apply_gradients(zip(
            gen_tape.gradient(gen_loss, self.generator.trainable_variables),
            self.generator.trainable_variables))
        self.d_optimizer.apply_gradients(zip(
            disc_tape.gradient(disc_loss, self.discriminator.trainable_variables),
            self.discriminator.trainable_variables))


if __name__ == "__main__":
    recipes.main(TutorialDcgan, __doc__.split("\n\n")[0])
