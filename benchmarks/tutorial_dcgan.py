"""The reference recipe of the TensorFlow DCGAN tutorial, trained for a wall-clock budget.

This is the baseline `benchmarks/quality.py` compares Gantry's presets against, written as the
tutorial (tensorflow.org/tutorials/generative/dcgan) writes it: its generator (Dense 7x7x256,
transposed convolutions 128, 64, 1 with 5x5 kernels, batch norm, LeakyReLU) and discriminator
(5x5 convolutions 64 and 128 with LeakyReLU and dropout 0.3, a dense logit), binary
cross-entropy on logits, Adam 1e-4 for both models, batch 256, and the fused train step (one
generator forward pass shared by both gradient tapes). Only the data differs: Fashion-MNIST
through Gantry's loader (the tutorial uses MNIST), already scaled to [-1, 1].

Run alone it trains until `--deadline` (a Unix time, so that the budget counts from when the
benchmark started the process, as it does for Gantry's run) and writes `--num_samples` samples
as uint8 NHWC to `--output` and a JSON record of steps and seconds beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers  # noqa: E402

from datasets import registry  # noqa: E402
from trainers.outputs.images import save_samples  # noqa: E402

BATCH_SIZE = 256
LATENT_DIM = 100
LEARNING_RATE = 1e-4
BUFFER_SIZE = 60_000
STEPS_PER_CALL = 20  # steps per compiled call between deadline checks


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


def training_batches(seed: int) -> tf.data.Dataset:
    """Fashion-MNIST as the tutorial batches MNIST: shuffle 60,000, batch 256, repeated."""
    images = registry.load_split("fashion_mnist", split="train", data_dir=None,
                                 fashion_mnist_dir=None, resolution=None, seed=seed)
    return (images.map(lambda example: example["x"]).cache().shuffle(BUFFER_SIZE, seed=seed)
            .batch(BATCH_SIZE, drop_remainder=True).repeat().prefetch(tf.data.AUTOTUNE))


def train_until(model: TutorialDcgan, batches: tf.data.Dataset, deadline: float) -> int:
    """Runs compiled calls of STEPS_PER_CALL steps until `deadline`; returns the step count."""
    iterator = iter(batches)

    @tf.function
    def steps():
        for _ in tf.range(STEPS_PER_CALL):
            model.train_step(next(iterator))

    done = 0
    while time.time() < deadline:
        steps()
        done += STEPS_PER_CALL
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deadline", type=float, required=True, help="Unix time to stop at")
    parser.add_argument("--output", required=True, help=".npy file for the uint8 samples")
    parser.add_argument("--num_samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.time()
    model = TutorialDcgan(args.seed)
    steps = train_until(model, training_batches(args.seed), args.deadline)
    trained_seconds = time.time() - started
    noise = tf.random.stateless_normal([args.num_samples, LATENT_DIM], seed=[args.seed, 1])
    samples = np.concatenate([model.generator(noise[start:start + 500], training=False).numpy()
                              for start in range(0, args.num_samples, 500)])
    save_samples(samples, args.output)
    with open(os.path.splitext(args.output)[0] + ".json", "w") as file:
        json.dump({"steps": steps, "images": steps * BATCH_SIZE, "seconds": trained_seconds}, file)


if __name__ == "__main__":
    main()
