"""Exponential moving average of the generator, defined by a half-life in images.

A half-life in thousands of images (StyleGAN2-ADA's `ema_kimg`) means the same smoothing
whatever the batch size; the optional ramp-up caps the half-life at `rampup` times the images
seen so far, so early, fast-changing weights are not averaged over a long past.
`tf.train.ExponentialMovingAverage` does not accept Keras 3 variables, hence plain `assign`.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def ema_beta(*, batch_size: int, halflife_kimg, images_seen, rampup: float = 0.0) -> tf.Tensor:
    """The decay applied per update: 0.5 ** (batch_size / half-life in images).

    `halflife_kimg` is a number (> 0), or a tensor of a half-life that moves over the run
    (`--ema_halflife_schedule`; at 0 the average is the model itself)."""
    if isinstance(halflife_kimg, tf.Tensor):
        halflife = tf.cast(halflife_kimg, tf.float32) * 1000.0
    elif halflife_kimg <= 0:
        raise ValueError(f"--ema_halflife_kimg={halflife_kimg} must be > 0 to use an EMA.")
    else:
        halflife = tf.constant(halflife_kimg * 1000.0, tf.float32)
    if rampup > 0:
        halflife = tf.minimum(halflife, tf.cast(images_seen, tf.float32) * rampup)
    return tf.pow(0.5, float(batch_size) / tf.maximum(halflife, 1e-8))


def update_ema(average: keras.Model, model: keras.Model, beta) -> None:
    """average <- model + (average - model) * beta for trainable weights; other state copied.

    Non-trainable variables (batch-norm statistics, seed states) are copied rather than
    averaged, as StyleGAN2-ADA does with buffers. The two models are paired variable by variable
    and `model`'s decides which is which, so a variable frozen in `model` alone
    (`--lr_multipliers` factor 0) is copied and the pairs stay aligned.
    """
    for target, source in zip(average.variables, model.variables, strict=True):
        if source.trainable:
            target.assign(source + (target - source) * tf.cast(beta, source.dtype))
        else:
            target.assign(source)

