"""Mode coverage of a generator of stacked images (`datasets.stacked`): how many of the 1,000
modes its samples reach, and how far their histogram is from uniform.

A sample's mode is the class triple the domain evaluator assigns to its three channels, read as
one number (`datasets.stacked.mode_index`); the per-channel evaluator (`gan.per_channel`) gives
it directly as the argmax of its joint logits. The two numbers are those StackedMNIST is
reported with (VEEGAN, PacGAN, R3GAN): modes covered, the count of modes with at least one
sample, and KL(q || p), the KL divergence of the empirical mode distribution q from the
uniform p = 1 / num_modes: sum over modes with q > 0 of q log(q / p), in nats. 0 is a
perfectly uniform histogram, log(num_modes) a generator with one mode. A finite sample of a
uniform generator is above 0: about (num_modes - 1) / (2 N) for N samples (0.019 for 1,000
modes and 26,000 samples).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import tensorflow as tf

from gan import evaluation
from gan.features import FeatureExtractor


@dataclasses.dataclass(frozen=True)
class Coverage:
    """Modes with at least one sample, and KL(mode histogram || uniform) in nats."""

    covered: int
    kl: float


def histogram(modes, num_modes: int) -> np.ndarray:
    """Samples per mode [num_modes] of mode indices `modes` [N] in [0, num_modes)."""
    modes = np.asarray(modes).reshape(-1)
    if modes.size and (modes.min() < 0 or modes.max() >= num_modes):
        raise ValueError(f"Mode indices must be in [0, {num_modes}); got {modes.min()}.."
                         f"{modes.max()}.")
    return np.bincount(modes, minlength=num_modes)


def kl_from_uniform(counts) -> float:
    """KL(q || uniform) of the histogram `counts` [num_modes]: sum of q log(q num_modes) over
    the modes with q > 0 (module docstring)."""
    counts = np.asarray(counts, np.float64)
    if counts.ndim != 1 or counts.sum() <= 0 or counts.min() < 0:
        raise ValueError(f"counts must be a histogram: non-negative, [num_modes], not all zero; "
                         f"got shape {counts.shape} and total {counts.sum()}.")
    q = counts[counts > 0] / counts.sum()
    return float(np.sum(q * np.log(q * counts.size)))


def coverage(modes, num_modes: int) -> Coverage:
    """Modes covered and KL from uniform of the samples' modes `modes` [N]."""
    counts = histogram(modes, num_modes)
    return Coverage(covered=int(np.count_nonzero(counts)), kl=kl_from_uniform(counts))


def classified_modes(images, extractor: FeatureExtractor) -> np.ndarray:
    """The modes [N] a per-channel extractor (`gan.per_channel`) assigns to `images`."""
    return np.argmax(extractor.logits(images), axis=1)


def generated_coverage(sample: Callable[[tf.Tensor], tf.Tensor], *, latent_shape: tuple[int, ...],
                       extractor: FeatureExtractor, num_samples: int, seed: int = 0,
                       batch_size: int = 250) -> Coverage:
    """The coverage of `num_samples` images `sample(noise)` draws from the evaluation noise
    keyed by `seed` (`gan.evaluation.generate`), classified by `extractor` into its
    `num_classes` modes."""
    modes = [classified_modes(images, extractor) for images in evaluation.generate(
        sample, latent_shape, num_samples, batch_size, seed)]
    return coverage(np.concatenate(modes), extractor.num_classes)
