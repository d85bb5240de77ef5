"""CycleGAN's parts (Zhu et al. 2017), scaled for 28-256 px: the ResNet generator, the PatchGAN
discriminator, the L1 reconstruction loss and the history of generated images.

Generator (Johnson et al. 2016, as CycleGAN uses it): c7s1-w, d2w, d4w, R4w x n, u2w, uw,
c7s1-C with tanh. Two stride-2 convolutions bring 28 px to 7 (28 -> 14 -> 7 -> 14 -> 28),
32 to 8 and 64 to 16, so every supported resolution works unchanged; `DEFAULT_RESIDUAL_BLOCKS`
scales the paper's 6 residual blocks at 128 px (9 at 256) down to 4 at 28 and 32 px. Instance normalization is
`InstanceNormalization` below; the 7x7 and residual convolutions pad by reflection, as in the
paper, to keep borders free of artifacts.

Discriminator: the 70x70 PatchGAN's layer pattern (C64-C128-C256-C512, 4x4 kernels, instance
norm after all but the first, LeakyReLU 0.2, then a 1-channel convolution) with as many
stride-2 layers as bring the side to about 8: two at 28/32 px, three at 64 px, the last of
which is the original 70x70 receptive field, four at 128 and five at 256; the channels stop
doubling at 8 x width (the paper's C512), so the deeper ones do not grow wider. The output is
a map of logits, one per patch, of shape (batch, h, w, 1); the per-example losses of
`gan.losses` average over it.

The last layer of every model has dtype "float32", so under a mixed-precision policy the
outputs, and hence the losses, stay float32.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

DEFAULT_RESIDUAL_BLOCKS = {28: 4, 32: 4, 64: 6, 128: 6, 256: 9}
HISTORY_SIZE = 50
PATCH_MAX_WIDTH_MULTIPLIER = 8
_LEAKY_SLOPE = 0.2
# PyTorch's InstanceNorm2d epsilon, which the reference implementation uses.
_NORM_EPSILON = 1e-5


class ReflectionPadding2D(keras.layers.Layer):
    """Pads height and width by `padding` pixels, mirroring the border (no edge repeat)."""

    def __init__(self, padding: int, **kwargs):
        super().__init__(**kwargs)
        if padding < 1:
            raise ValueError(f"ReflectionPadding2D needs padding >= 1, got {padding!r}.")
        self.padding = padding

    def call(self, inputs):
        p = self.padding
        return keras.ops.pad(inputs, [[0, 0], [p, p], [p, p], [0, 0]], mode="reflect")

    def compute_output_shape(self, input_shape):
        batch, height, width, channels = input_shape
        grow = lambda side: None if side is None else side + 2 * self.padding  # noqa: E731
        return batch, grow(height), grow(width), channels

    def get_config(self):
        return {**super().get_config(), "padding": self.padding}


class InstanceNormalization(keras.layers.Layer):
    """Normalizes each example's channels over height and width, then scales and shifts each
    channel (Ulyanov et al. 2016), computing in float32 under any precision policy.

    The same function as keras.layers.GroupNormalization(groups=-1), in a sixth of the graph
    ops: a CycleGAN update calls generators six times, and GroupNormalization's reshapes made
    tracing the generator phase take a minute on a CPU.
    """

    def __init__(self, epsilon: float = _NORM_EPSILON, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        channels = input_shape[-1]
        self.gamma = self.add_weight(shape=(channels,), initializer="ones", name="gamma",
                                     autocast=False)
        self.beta = self.add_weight(shape=(channels,), initializer="zeros", name="beta",
                                    autocast=False)

    def call(self, inputs):
        x = keras.ops.cast(inputs, "float32")
        mean, variance = keras.ops.moments(x, axes=(1, 2), keepdims=True)
        scale = self.gamma * keras.ops.rsqrt(variance + self.epsilon)
        return keras.ops.cast(x * scale + (self.beta - mean * scale), self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


def _instance_norm(name: str) -> keras.layers.Layer:
    return InstanceNormalization(name=name)


def _conv_norm_relu(x, filters: int, kernel: int, *, strides: int = 1, reflect: int = 0,
                    transpose: bool = False, name: str):
    if reflect:
        x = ReflectionPadding2D(reflect, name=f"{name}_pad")(x)
    layer = keras.layers.Conv2DTranspose if transpose else keras.layers.Conv2D
    # Bias-free: instance normalization subtracts each channel's mean, which would cancel it.
    x = layer(filters, kernel, strides=strides, padding="valid" if reflect else "same",
              use_bias=False, name=name)(x)
    x = _instance_norm(f"{name}_norm")(x)
    return keras.layers.ReLU(name=f"{name}_relu")(x)


def _require_positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value!r}.")


def resnet_generator(*, resolution: int, channels: int, width: int = 64,
                     residual_blocks: int | None = None, name: str = "generator") -> keras.Model:
    """Image-to-image generator (see the module docstring): (N, R, R, C) -> (N, R, R, C) in
    [-1, 1]. `resolution` must be divisible by 4; `residual_blocks` None takes
    DEFAULT_RESIDUAL_BLOCKS (6 for sizes it does not list)."""
    _require_positive("resolution", resolution)
    _require_positive("channels", channels)
    _require_positive("width", width)
    if resolution % 4:
        raise ValueError(f"resnet_generator needs a resolution divisible by 4 (two stride-2 "
                         f"downsamplings), got {resolution!r}; use e.g. 28, 32, 64, 128 or 256.")
    blocks = DEFAULT_RESIDUAL_BLOCKS.get(resolution, 6) if residual_blocks is None else residual_blocks
    _require_positive("residual_blocks", blocks)

    images = keras.Input(shape=(resolution, resolution, channels), name="images")
    x = _conv_norm_relu(images, width, 7, reflect=3, name="stem")
    x = _conv_norm_relu(x, 2 * width, 3, strides=2, name="down0")
    x = _conv_norm_relu(x, 4 * width, 3, strides=2, name="down1")
    for index in range(blocks):
        shortcut = x
        x = _conv_norm_relu(x, 4 * width, 3, reflect=1, name=f"res{index}_a")
        x = ReflectionPadding2D(1, name=f"res{index}_b_pad")(x)
        x = keras.layers.Conv2D(4 * width, 3, use_bias=False, name=f"res{index}_b")(x)
        x = _instance_norm(f"res{index}_b_norm")(x)
        x = keras.layers.Add(name=f"res{index}_add")([shortcut, x])
    x = _conv_norm_relu(x, 2 * width, 3, strides=2, transpose=True, name="up0")
    x = _conv_norm_relu(x, width, 3, strides=2, transpose=True, name="up1")
    x = ReflectionPadding2D(3, name="to_image_pad")(x)
    x = keras.layers.Conv2D(channels, 7, name="to_image")(x)
    outputs = keras.layers.Activation("tanh", dtype="float32", name="tanh")(x)
    return keras.Model(images, outputs, name=name)


def patch_downsamplings(resolution: int) -> int:
    """Stride-2 layers of the PatchGAN at `resolution`: the count that brings the side nearest
    to 8 (2 at 28 and 32 px, 3 at 64), at least 1."""
    _require_positive("resolution", resolution)
    return max(1, round(math.log2(resolution / 8)))


def patch_discriminator(*, resolution: int, channels: int, width: int = 64,
                        name: str = "discriminator") -> keras.Model:
    """PatchGAN discriminator (see the module docstring): (N, R, R, C) images -> (N, h, w, 1)
    logits with h = w = ceil(R / 2**patch_downsamplings(R)): 7x7 at 28 px, 8x8 at 32 and 64."""
    _require_positive("channels", channels)
    _require_positive("width", width)
    downsamplings = patch_downsamplings(resolution)
    images = keras.Input(shape=(resolution, resolution, channels), name="images")
    x = images
    # Stride 2 `downsamplings` times, then one stride-1 layer, doubling the channels each time.
    for index in range(downsamplings + 1):
        strides = 2 if index < downsamplings else 1
        normalized = index > 0
        x = keras.layers.Conv2D(width * min(2 ** index, PATCH_MAX_WIDTH_MULTIPLIER), 4,
                                strides=strides, padding="same",
                                use_bias=not normalized, name=f"conv{index}")(x)
        if normalized:
            x = _instance_norm(f"conv{index}_norm")(x)
        x = keras.layers.LeakyReLU(negative_slope=_LEAKY_SLOPE, name=f"conv{index}_lrelu")(x)
    logits = keras.layers.Conv2D(1, 4, padding="same", dtype="float32", name="logits")(x)
    return keras.Model(images, logits, name=name)


def reconstruction_loss(target: tf.Tensor, output: tf.Tensor) -> tf.Tensor:
    """Per-example L1 distance, mean |target - output| over the non-batch axes, float32 (batch,).

    The cycle-consistency loss (x against F(G(x))) and the identity loss (y against G(y)) are
    both this distance; the reference implementation's L1Loss is its mean over the batch.
    """
    difference = tf.abs(tf.cast(target, tf.float32) - tf.cast(output, tf.float32))
    return tf.reduce_mean(tf.reshape(difference, (tf.shape(difference)[0], -1)), axis=1)


class ImageHistory(keras.Model):
    """The history of generated images that a discriminator is shown (Shrivastava et al. 2017;
    CycleGAN keeps 50): it damps oscillation by letting D see older fakes too.

    The buffer and its fill count are non-trainable variables of this model, so checkpoints
    hold them and a resumed run continues with the same history. `exchange` is the reference
    implementation's query with its random draws passed in, so the result is a pure function
    of the state and the draws.
    """

    def __init__(self, *, image_shape: tuple[int, int, int], size: int = HISTORY_SIZE,
                 name: str = "history"):
        super().__init__(name=name)
        _require_positive("size", size)
        self.size = size
        # Written in replica context with identical values on every replica: the first one's
        # value is kept, which is every replica's.
        self.images = self.add_weight(shape=(size, *image_shape), initializer="zeros",
                                      dtype="float32", trainable=False,
                                      aggregation="only_first_replica", name="images")
        self.count = self.add_weight(shape=(), initializer="zeros", dtype="int32",
                                     trainable=False, aggregation="only_first_replica",
                                     name="count")

    def exchange(self, images: tf.Tensor, draws: tf.Tensor) -> tf.Tensor:
        """Returns what D sees in place of `images` [N, H, W, C] and updates the history.

        Image by image, in order: while the history is not full the image is stored and
        returned; once full, with probability 1/2 (draws[i, 0] < 0.5) a stored image at the
        random slot floor(draws[i, 1] * size) is returned and replaced by it, otherwise the
        image itself is returned. `draws` is [N, 2] uniform in [0, 1).
        """
        images = tf.cast(tf.stop_gradient(images), tf.float32)
        count = images.shape[0]
        if draws.shape != (count, 2):
            raise ValueError(f"ImageHistory.exchange needs draws of shape ({count}, 2) for "
                             f"{count} images, got {draws.shape}.")

        def step(index, stored, filled, outputs):
            image = images[index]
            full = filled >= self.size
            swap = tf.logical_and(full, draws[index, 0] < 0.5)
            random_slot = tf.minimum(tf.cast(draws[index, 1] * self.size, tf.int32), self.size - 1)
            slot = tf.where(full, random_slot, filled)
            previous = stored[slot]
            outputs = outputs.write(index, tf.where(swap, previous, image))
            kept = tf.where(tf.logical_and(full, tf.logical_not(swap)), previous, image)
            stored = tf.tensor_scatter_nd_update(stored, [[slot]], [kept])
            return index + 1, stored, tf.minimum(filled + 1, self.size), outputs

        _, stored, filled, outputs = tf.while_loop(
            lambda index, *_: index < count, step,
            (tf.constant(0), tf.convert_to_tensor(self.images), tf.convert_to_tensor(self.count),
             tf.TensorArray(tf.float32, size=count, element_shape=images.shape[1:])))
        self.images.assign(stored)
        self.count.assign(filled)
        return outputs.stack()
