"""How fast each discriminator learns to tell real Fashion-MNIST images from blends of two real
ones, outside any GAN: the relativistic pairing loss (reals paired with blends), Adam with
betas (0, 0.9), optionally R1 + R2, the same batches for every case.

Usage, from the repository root:

    python benchmarks/discriminator_probe.py            # dcgan against R3GAN's narrow D
    python benchmarks/discriminator_probe.py --case "r3gan w16 b1, lr 8e-4: r3gan,16,1,8e-4,0.05"

A blend (x1 + x2) / 2 has the mean of the real images, so no linear function separates it from
them: a falling loss means the network has grown nonlinear features. It isolates the question
"is this discriminator a slow learner?" from the generator it would face in a GAN.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # read when TensorFlow is first imported

DEFAULT_CASES = ("dcgan: dcgan,64,1,2e-4,0.05", "r3gan w16 b1: r3gan,16,1,2e-4,0.05",
                 "r3gan w16 b1, no penalty: r3gan,16,1,2e-4,0",
                 "r3gan w16 b1, lr 8e-4: r3gan,16,1,8e-4,0.05")
WINDOWS = ((0, 50), (100, 150), (200, 250), (350, 400))


def parse_case(text: str) -> tuple[str, str, int, int, float, float]:
    """'LABEL: ARCH,WIDTH,BLOCKS,LR,GAMMA' -> (label, arch, width, blocks, lr, gamma)."""
    label, _, spec = text.partition(":")
    parts = spec.strip().split(",")
    if not label.strip() or len(parts) != 5 or parts[0] not in ("dcgan", "r3gan"):
        raise argparse.ArgumentTypeError(
            f"--case {text!r}: give 'LABEL: ARCH,WIDTH,BLOCKS,LR,GAMMA', ARCH dcgan or r3gan.")
    return label.strip(), parts[0], int(parts[1]), int(parts[2]), float(parts[3]), float(parts[4])


def window_means(losses: list[float], windows=WINDOWS) -> list[float]:
    """The mean loss over each [start, end) window of steps."""
    return [float(np.mean(losses[start:end])) for start, end in windows]


def real_images(data_dir: str | None, fashion_mnist_dir: str | None) -> np.ndarray:
    """Fashion-MNIST's training images in [-1, 1], (60000, 28, 28, 1), as run.py reads them."""
    from datasets import registry

    examples = registry.load_split("fashion_mnist", split="train", data_dir=data_dir,
                                   fashion_mnist_dir=fashion_mnist_dir)
    return np.concatenate(list(examples.map(lambda example: example["x"])
                               .batch(10_000).as_numpy_iterator()))


def build(arch: str, width: int, blocks: int):
    from gan import networks, r3gan

    if arch == "dcgan":
        return networks.dcgan_discriminator(resolution=28, channels=1, width=width)
    return r3gan.discriminator(resolution=28, channels=1, width=width, blocks_per_stage=blocks)


def probe(arch: str, width: int, blocks: int, lr: float, gamma: float, images: np.ndarray,
          steps: int, batch: int, seed: int) -> list[float]:
    """The pairing loss at every step of training a fresh discriminator for `steps` steps."""
    import keras
    import tensorflow as tf

    from gan import losses, regularizers

    keras.utils.set_random_seed(seed)
    critic = build(arch, width, blocks)
    optimizer = keras.optimizers.Adam(lr, beta_1=0.0, beta_2=0.9)
    score = lambda x: critic(x, training=True)

    @tf.function
    def step(real, fake):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(losses.relativistic_discriminator_loss(score(real), score(fake)))
            penalty = (tf.reduce_mean(regularizers.r1_penalty(score, real)
                                      + regularizers.r2_penalty(score, fake)) if gamma else 0.0)
            total = loss + gamma / 2 * penalty
        gradients = tape.gradient(total, critic.trainable_variables)
        optimizer.apply_gradients(zip(gradients, critic.trainable_variables))
        return loss

    draws = np.random.default_rng(seed).integers(0, len(images), (steps, 3, batch))
    return [float(step(images[d[0]], 0.5 * (images[d[1]] + images[d[2]]))) for d in draws]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", type=parse_case,
                        help="'LABEL: ARCH,WIDTH,BLOCKS,LR,GAMMA' (repeatable)")
    parser.add_argument("--steps", type=int, default=WINDOWS[-1][1])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data_dir", default=None, help="as run.py's --data_dir")
    parser.add_argument("--fashion_mnist_dir", default=None, help="as run.py's --fashion_mnist_dir")
    args = parser.parse_args(argv)
    windows = [w for w in WINDOWS if w[1] <= args.steps] or [(0, args.steps)]
    images = real_images(args.data_dir, args.fashion_mnist_dir)
    print("| case | " + " | ".join(f"loss, steps {a}-{b}" for a, b in windows) + " | seconds |")
    print("| --- |" + " ---: |" * (len(windows) + 1))
    for label, arch, width, blocks, lr, gamma in args.case or map(parse_case, DEFAULT_CASES):
        started = time.time()
        losses_ = probe(arch, width, blocks, lr, gamma, images, args.steps, args.batch, args.seed)
        means = " | ".join(f"{m:.3f}" for m in window_means(losses_, windows))
        print(f"| {label} | {means} | {time.time() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
