"""Differentiable augmentation (DiffAugment, Zhao et al. 2020) for discriminator inputs.

DiffAugment applies the same policy of random transforms to every batch the discriminator
sees, real and fake, in both the discriminator and the generator step; each transform is
differentiable w.r.t. the images, so the generator is trained through it. Real and fake
batches get independent draws (the paper augments each call separately).

Randomness is an argument: every random op takes `uniform`, U[0, 1) draws of shape
(batch, k), one row per example, and maps them to that example's parameters. The trainer
passes `inputs.uniform([num_draws(policy)], salt=...)`: draws made for the global batch and
sliced per replica, so an example is transformed the same way whatever the replica count
(a per-replica seed would not give that). Use a different salt for each augmented batch.

Conventions (those of the paper's TensorFlow code): images are NHWC in [-1, 1] with a static
height and width; translation shifts by up to `ratio * size` pixels with zero fill; cutout
zeroes a square whose centre is uniform over the image, so it is clipped at the borders;
color is brightness + U[-0.5, 0.5], saturation x U[0, 2], contrast x U[0.5, 1.5], without
clipping. Every op keeps the input's dtype; color arithmetic runs in float32.
"""

import types
from typing import Callable, Mapping

import tensorflow as tf

Tensor = tf.Tensor


def translate(images: Tensor, dy: Tensor, dx: Tensor) -> Tensor:
    """Moves example b's content down by dy[b] and right by dx[b] pixels, filling with zeros.

    `dy`, `dx` are integer tensors of shape (batch,); any magnitude is valid (a shift beyond
    the image leaves zeros). Implemented as gathers, whose gradient is a scatter-add.
    """
    return _shift_axis(_shift_axis(images, dy, axis=1), dx, axis=2)


def _shift_axis(images: Tensor, shift: Tensor, axis: int) -> Tensor:
    size = images.shape[axis]
    paddings = [[0, 0]] * 4
    paddings[axis] = [1, 1]
    padded = tf.pad(images, paddings)
    # Output index i reads padded index i - shift + 1; indices 0 and size + 1 are the zeros.
    source = tf.range(size)[tf.newaxis, :] - tf.cast(shift, tf.int32)[:, tf.newaxis] + 1
    source = tf.clip_by_value(source, 0, size + 1)
    return tf.gather(padded, source, axis=axis, batch_dims=1)


def cut_out(images: Tensor, top: Tensor, left: Tensor, *, height: int, width: int) -> Tensor:
    """Zeroes rows [top, top + height) x columns [left, left + width) of each example.

    `top`, `left` are integer tensors of shape (batch,) and may lie partly outside the image:
    only the part of the rectangle inside it is zeroed.
    """
    rows = _inside(images.shape[1], top, height)
    columns = _inside(images.shape[2], left, width)
    keep = 1.0 - tf.cast(rows[:, :, tf.newaxis] & columns[:, tf.newaxis, :], images.dtype)
    return images * keep[..., tf.newaxis]


def _inside(size: int, start: Tensor, length: int) -> Tensor:
    """(batch, size) booleans: whether each index lies in [start, start + length)."""
    index = tf.range(size)[tf.newaxis, :]
    start = tf.cast(start, tf.int32)[:, tf.newaxis]
    return (index >= start) & (index < start + length)


def adjust_brightness(images: Tensor, delta: Tensor) -> Tensor:
    """Adds delta[b] to every pixel of example b."""
    return _per_example_color(lambda x, d: x + d, images, delta)


def adjust_saturation(images: Tensor, factor: Tensor) -> Tensor:
    """Scales each pixel's deviation from its channel mean by factor[b].

    For one-channel images the deviation is zero, so this is exactly the identity.
    """
    def scale(x, f):
        mean = tf.reduce_mean(x, axis=3, keepdims=True)
        return (x - mean) * f + mean

    return _per_example_color(scale, images, factor)


def adjust_contrast(images: Tensor, factor: Tensor) -> Tensor:
    """Scales each example's deviation from its mean over all pixels and channels by factor[b]."""
    def scale(x, f):
        mean = tf.reduce_mean(x, axis=[1, 2, 3], keepdims=True)
        return (x - mean) * f + mean

    return _per_example_color(scale, images, factor)


def _per_example_color(
    fn: Callable[[Tensor, Tensor], Tensor], images: Tensor, values: Tensor
) -> Tensor:
    values = tf.reshape(tf.cast(values, tf.float32), [-1, 1, 1, 1])
    return tf.cast(fn(tf.cast(images, tf.float32), values), images.dtype)


def _integers(uniform: Tensor, count: int) -> Tensor:
    """Maps U[0, 1) draws to integers 0..count-1, each with probability 1 / count."""
    index = tf.cast(tf.floor(tf.cast(uniform, tf.float32) * count), tf.int32)
    return tf.minimum(index, count - 1)


def _scaled_size(size: int, ratio: float) -> int:
    """round(size * ratio) with halves rounded up, as the reference code does."""
    return int(size * ratio + 0.5)


def translation(images: Tensor, uniform: Tensor, *, ratio: float = 0.125) -> Tensor:
    """Random translation by an integer in [-s, s] per axis, s = round(ratio * size).

    Consumes 2 draws per example: column 0 picks the vertical shift, column 1 the horizontal.
    A draw of 0.5 gives no shift.
    """
    _require_ratio("translation", ratio)
    uniform = _columns(uniform, images, 2)
    shifts = [_scaled_size(images.shape[axis], ratio) for axis in (1, 2)]
    dy, dx = (_integers(uniform[:, i], 2 * s + 1) - s for i, s in enumerate(shifts))
    return translate(images, dy, dx)


def cutout(images: Tensor, uniform: Tensor, *, ratio: float = 0.5) -> Tensor:
    """Random cutout of a round(ratio * H) x round(ratio * W) rectangle per example.

    Consumes 2 draws per example (row, then column of the centre). The centre is uniform over
    0..size (0..size-1 for an odd side), so near a border part of the square falls outside
    the image and fewer pixels are zeroed; at least a quarter of the square always remains.
    """
    _require_ratio("cutout", ratio)
    uniform = _columns(uniform, images, 2)
    sides = [_scaled_size(images.shape[axis], ratio) for axis in (1, 2)]
    starts = [
        _integers(uniform[:, i], images.shape[i + 1] + 1 - side % 2) - side // 2
        for i, side in enumerate(sides)
    ]
    return cut_out(images, starts[0], starts[1], height=sides[0], width=sides[1])


def color(images: Tensor, uniform: Tensor) -> Tensor:
    """Random brightness, then saturation, then contrast; 3 draws per example in that order.

    Draws of 0.5 give delta 0 and factors 1, i.e. the identity.
    """
    uniform = tf.cast(_columns(uniform, images, 3), tf.float32)
    images = adjust_brightness(images, uniform[:, 0] - 0.5)
    images = adjust_saturation(images, 2.0 * uniform[:, 1])
    return adjust_contrast(images, uniform[:, 2] + 0.5)


def _require_ratio(op: str, ratio: float) -> None:
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"{op} ratio must be in [0, 1], got {ratio!r}.")


def _columns(uniform: Tensor, images: Tensor, count: int) -> Tensor:
    uniform = tf.convert_to_tensor(uniform)
    if uniform.shape.rank != 2 or uniform.shape[1] != count:
        raise ValueError(
            f"Expected uniform draws of shape (batch, {count}), got {uniform.shape}; "
            "draw them with inputs.uniform([num_draws(policy)])."
        )
    if images.shape.rank != 4:
        raise ValueError(f"Expected NHWC images, got shape {images.shape}.")
    return uniform


# Each op and the number of U[0, 1) draws it consumes per example.
OPS: Mapping[str, tuple[Callable[[Tensor, Tensor], Tensor], int]] = types.MappingProxyType({
    "color": (color, 3),
    "translation": (translation, 2),
    "cutout": (cutout, 2),
})


def parse_policy(policy: str) -> tuple[str, ...]:
    """The op names of a `--diffaugment` policy such as "color,translation,cutout".

    An empty policy means no augmentation. Names are applied in the order given.
    """
    names = tuple(name.strip() for name in policy.split(",")) if policy.strip() else ()
    for name in names:
        if name not in OPS:
            raise ValueError(
                f"Unknown --diffaugment op {name!r} in {policy!r}; valid ops are "
                f"{', '.join(OPS)} (comma-separated, e.g. 'color,translation,cutout')."
            )
    return names


def num_draws(policy: str) -> int:
    """How many U[0, 1) draws per example `diff_augment` needs for `policy`."""
    return sum(OPS[name][1] for name in parse_policy(policy))


def diff_augment(images: Tensor, policy: str, uniform: Tensor) -> Tensor:
    """Applies the ops of `policy` in order, each with its own columns of `uniform`.

    `uniform` has shape (batch, num_draws(policy)); columns are consumed left to right.
    Returns the images unchanged for an empty policy.
    """
    names = parse_policy(policy)
    uniform = tf.convert_to_tensor(uniform)
    needed = num_draws(policy)
    if uniform.shape.rank != 2 or uniform.shape[1] != needed:
        raise ValueError(
            f"--diffaugment {policy!r} needs uniform draws of shape (batch, {needed}), got "
            f"{uniform.shape}; draw them with inputs.uniform([num_draws(policy)])."
        )
    start = 0
    for name in names:
        op, count = OPS[name]
        images = op(images, uniform[:, start:start + count])
        start += count
    return images
