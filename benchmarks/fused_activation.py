"""Does fusing the discriminator's convolutions with their LeakyReLU pay? Keras's LeakyReLU
against one differentiated from its output, side by side.

Keras's LeakyReLU is differentiated by LeakyReluGrad(gradients, features=x), reading the
activation's input: the convolution's BiasAdd. Grappler's remapper would fuse Conv2D + BiasAdd
+ LeakyRelu into one oneDNN kernel (_FusedConv2D), which removes that BiasAdd, so in a training
step it gives up ("remapper failed: INVALID_ARGUMENT: Mutation::Apply error: fanout
'.../LeakyReluGrad' exist for missing node '.../BiasAdd'", the line `run.py` filters). For a
positive slope the output has the input's sign, so the same gradient can be read from the
output (`OutputGradientLeakyReLU` below): then the three fuse (Grappler's optimized graph of
the float32 step holds _FusedConv2D nodes with fused_ops [BiasAdd, LeakyRelu]), and the values
change only in the last bits of the fused kernel's arithmetic. This script times one training
step of the dcgan preset's networks with each, interleaved in one process (both sets of weights
equal), for float32 and mixed bfloat16 at the preset's batch (32) and at 64: the
discriminator's update alone, and a whole non-saturating cycle (one discriminator and one
generator update). It prints milliseconds per step (medians of `--repeats` rounds) and the
ratio keras / fused, with the CPU's bfloat16 flags.

    .venv/bin/python benchmarks/fused_activation.py            # about 3 minutes
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from gan import networks  # noqa: E402

LATENT_DIM = 100


class OutputGradientLeakyReLU(keras.layers.LeakyReLU):
    """keras.layers.LeakyReLU whose gradient reads its output (see the module docstring)."""

    def call(self, inputs):
        slope = self.negative_slope

        @tf.custom_gradient
        def forward(x):
            y = tf.nn.leaky_relu(x, alpha=slope)
            return y, lambda upstream: tf.raw_ops.LeakyReluGrad(gradients=upstream, features=y,
                                                                alpha=slope)

        return forward(inputs)


def build(activation, precision: str):
    """The dcgan preset's generator and discriminator (28 px, width 64) with `activation` as
    the discriminator's LeakyReLU, seeded alike, and an Adam optimizer each."""
    keras.mixed_precision.set_global_policy(precision)
    original = keras.layers.LeakyReLU
    networks.keras.layers.LeakyReLU = activation  # what gan.networks builds with
    try:
        keras.utils.set_random_seed(0)
        generator = networks.dcgan_generator(resolution=28, channels=1, latent_dim=LATENT_DIM)
        discriminator = networks.dcgan_discriminator(resolution=28, channels=1)
    finally:
        networks.keras.layers.LeakyReLU = original
    optimizers = [keras.optimizers.Adam(2e-4, beta_1=0.5) for _ in range(2)]
    optimizers[0].build(discriminator.trainable_variables)
    optimizers[1].build(generator.trainable_variables)
    return generator, discriminator, optimizers


def steps(generator, discriminator, optimizers):
    """(discriminator update, whole cycle) as compiled functions of (real, noise)."""
    d_optimizer, g_optimizer = optimizers

    def d_update(real, noise):
        with tf.GradientTape() as tape:
            fake = generator(noise, training=True)
            real_logits = discriminator(real, training=True)
            fake_logits = discriminator(fake, training=True)
            loss = tf.reduce_mean(tf.nn.softplus(-real_logits) + tf.nn.softplus(fake_logits))
        variables = discriminator.trainable_variables
        d_optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    def g_update(noise):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.softplus(-discriminator(generator(noise, training=True),
                                                                training=True)))
        variables = generator.trainable_variables
        g_optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    def cycle(real, noise):
        return d_update(real, noise) + g_update(noise)

    return tf.function(d_update), tf.function(cycle)


def time_step(step, real, noise, count: int) -> float:
    """Milliseconds per call of `step` over `count` calls."""
    step(real, noise).numpy()
    start = time.perf_counter()
    for _ in range(count):
        result = step(real, noise)
    result.numpy()
    return (time.perf_counter() - start) / count * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round")
    parser.add_argument("--batches", default="32,64")
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    args = parser.parse_args()
    flags = subprocess.run("grep -o 'avx512_bf16\\|amx_bf16' /proc/cpuinfo | sort -u",
                           shell=True, capture_output=True, text=True).stdout.split()
    print(f"CPU flags: {', '.join(flags) or 'neither avx512_bf16 nor amx_bf16'}; "
          f"load before: {os.getloadavg()[0]:.1f}")
    variants = {"keras": keras.layers.LeakyReLU, "fused": OutputGradientLeakyReLU}
    print(f"{'precision':<16}{'batch':>6}{'step':>7}{'keras ms':>10}{'fused ms':>10}"
          f"{'keras/fused':>13}")
    for precision in args.precisions.split(","):
        built = {name: steps(*build(layer, precision)) for name, layer in variants.items()}
        for batch in map(int, args.batches.split(",")):
            real = tf.random.uniform([batch, 28, 28, 1], -1, 1)
            noise = tf.random.normal([batch, LATENT_DIM])
            for index, label in enumerate(("D", "cycle")):
                times = {name: [] for name in variants}
                for _ in range(args.repeats):  # interleaved: load changes both alike
                    for name in variants:
                        times[name].append(time_step(built[name][index], real, noise, args.steps))
                medians = {name: statistics.median(values) for name, values in times.items()}
                print(f"{precision:<16}{batch:>6}{label:>7}{medians['keras']:>10.2f}"
                      f"{medians['fused']:>10.2f}{medians['keras'] / medians['fused']:>13.2f}")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
