"""The R3GAN generator and discriminator (Huang et al., "The GAN is dead; long live the GAN!",
NeurIPS 2024), unconditional and class-conditional.

Both networks are stages of residual blocks, one stage per side: 4, 8, ..., resolution (7, 14,
28 at 28 px). A block is an inverted bottleneck, x + project(act(grouped3x3(act(expand(x))))):
a 1x1 convolution widens the stage's channels by `expansion`, a grouped 3x3 convolution with
`group_width` channels per group mixes space, a 1x1 convolution projects back. There is no
normalization: each convolution but the last adds a bias before its leaky ReLU (slope 0.2).

Fix-up initialisation: each block's last convolution starts at zero, so at step 0 every block is
its shortcut and the network is as deep as its transitions; the two others draw He-normal
weights scaled by L^(-1/(2m - 2)) = L^(-1/4) for the L blocks of the network and the m = 3
convolutions of a branch, so the sum of L branches keeps the variance of one as they grow.

Stages are joined by transitions without a branch: the generator projects 1x1 (when the width
changes) then upsamples, the discriminator downsamples then projects, both with the low-pass
[1, 2, 1] filter (`LowPassResample`). The generator starts from a learned constant basis
(side x side x channels) modulated per channel by a linear map of the latent, and ends in a 1x1
convolution to the image channels and tanh (Gantry's generator contract; R3GAN leaves the
output unbounded). The discriminator starts with a 1x1 convolution from the image and ends in a
depthwise convolution over the whole last side (4x4, 7x7 at 28 px), the features
(`FEATURES_LAYER`), and a linear layer to one float32 logit.

Widths: `width` channels at full resolution, doubling at every halving of the side up to
`MAX_WIDTH_MULTIPLIER` x width (R3GAN's FFHQ-256 table is 1, 2, 4, 8, 8, 8, 8 from the top down).

The grouped 3x3 convolution is `GroupedConv2D`. In training, in float32 and (through oneDNN)
bfloat16, it is TensorFlow's own grouped convolution (`native_grouped_convolution`); otherwise
it splits the groups and concatenates their outputs, with the same kernel: TensorFlow has no CPU
gradient for the grouped kernel in float16 (nor in bfloat16 without oneDNN), its TF.js
conversion fails, and its TFLite conversion is untested here, so samples, evaluations and
exports (which call the networks with training=False) compute the split form.

Conditioning as in R3GAN's conditional model: the generator reads the one-hot label next to the
latent (R3GAN concatenates a linear embedding of it; a linear map of both, the basis' input, is
the same family of functions), so cgan and acgan share that generator; the discriminators add
`gan.conditional`'s projection term or class head on the features.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from gan import conditional, networks

MAX_WIDTH_MULTIPLIER = 8
FEATURES_LAYER = "features"
CONVOLUTIONS_PER_BRANCH = 3
LOW_PASS_TAPS = (1.0, 2.0, 1.0)
_LEAKY_SLOPE = 0.2
_LEAKY_GAIN_SQUARED = 2.0 / (1.0 + _LEAKY_SLOPE ** 2)  # He's gain of a leaky ReLU, squared
_SEED_SIDE = 4


def low_pass_filter() -> np.ndarray:
    """The 3x3 filter [1, 2, 1]^T [1, 2, 1] / 16 (it sums to one)."""
    taps = np.asarray(LOW_PASS_TAPS, np.float32)
    kernel = np.outer(taps, taps)
    return kernel / kernel.sum()


@keras.saving.register_keras_serializable(package="gantry")
class LowPassResample(keras.layers.Layer):
    """Doubles ("up") or halves ("down") height and width through the low-pass filter, per
    channel, with no weights.

    "down" filters, then keeps the even pixels: out[i] = (x[2i-1] + 2 x[2i] + x[2i+1]) / 4 per
    axis. "up" puts x[i] at 2i with zeros between, then filters with gain 4: out[2i] = x[i],
    out[2i+1] = (x[i] + x[i+1]) / 2, linear interpolation on the same grid. Zero padding at
    the borders; static output shapes (the TFLite converter needs them).
    """

    def __init__(self, direction: str, **kwargs):
        super().__init__(**kwargs)
        if direction not in ("up", "down"):
            raise ValueError(f"LowPassResample direction must be 'up' or 'down', got {direction!r}.")
        self.direction = direction

    def _kernel(self, channels: int, dtype):
        gain = 4.0 if self.direction == "up" else 1.0
        kernel = np.tile((gain * low_pass_filter())[:, :, None, None], (1, 1, channels, 1))
        return keras.ops.convert_to_tensor(kernel, dtype=dtype)

    def call(self, inputs):
        _, height, width, channels = inputs.shape
        kernel = self._kernel(channels, inputs.dtype)
        if self.direction == "down":
            padded = keras.ops.pad(inputs, ((0, 0), (1, 0), (1, 0), (0, 0)))
            return keras.ops.depthwise_conv(padded, kernel, strides=2, padding="valid")
        zeros = keras.ops.zeros_like(inputs)
        rows = keras.ops.reshape(keras.ops.stack([inputs, zeros], axis=3),
                                 (-1, height, 2 * width, channels))
        spread = keras.ops.reshape(keras.ops.stack([rows, keras.ops.zeros_like(rows)], axis=2),
                                   (-1, 2 * height, 2 * width, channels))
        return keras.ops.depthwise_conv(spread, kernel, strides=1, padding="same")

    def compute_output_shape(self, input_shape):
        batch, height, width, channels = input_shape
        scale = 2 if self.direction == "up" else 0.5
        return batch, int(height * scale), int(width * scale), channels

    def get_config(self):
        return {**super().get_config(), "direction": self.direction}


def native_grouped_convolution(dtype) -> bool:
    """Whether TensorFlow's grouped convolution computes `dtype` with its gradients (twice over,
    as R1 and R2 need): float32, and bfloat16 where oneDNN is on (TF_ENABLE_ONEDNN_OPTS); not
    float16, whose CPU gradient kernel is missing."""
    name = keras.backend.standardize_dtype(dtype)
    if name == "bfloat16":
        from tensorflow.python.util import _pywrap_util_port  # TensorFlow's own oneDNN check
        return bool(_pywrap_util_port.IsMklEnabled())
    return name == "float32"


@keras.saving.register_keras_serializable(package="gantry")
class GroupedConv2D(keras.layers.Layer):
    """A biased, "same"-padded 3x3 convolution in `groups` groups.

    The kernel has Keras's grouped layout, (3, 3, channels / groups, filters), group g reading
    input channels [g c, (g+1) c) and writing output channels [g f, (g+1) f). Called with
    training=True in a dtype `native_grouped_convolution` accepts, it is one grouped
    convolution (an R3GAN training cycle about 1.3 times faster and quicker to trace,
    benchmarks/results/r3gan.md); otherwise each group is a plain convolution of its slice and
    the outputs are concatenated, the form every converter takes (module docstring). The same kernel serves both, so weights
    trained one way are read the other; tests/gan/test_r3gan.py pins both forms' values and
    gradients to a block-diagonal dense convolution.
    """

    def __init__(self, filters: int, groups: int, kernel_initializer="glorot_uniform",
                 kernel_size: int = 3, **kwargs):
        super().__init__(**kwargs)
        if filters % groups:
            raise ValueError(f"GroupedConv2D: {filters} filters do not split into {groups} groups.")
        self.filters, self.groups, self.kernel_size = filters, groups, kernel_size
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, input_shape):
        channels = input_shape[-1]
        if channels % self.groups:
            raise ValueError(f"GroupedConv2D: {channels} input channels do not split into "
                             f"{self.groups} groups.")
        self.kernel = self.add_weight(
            shape=(self.kernel_size, self.kernel_size, channels // self.groups, self.filters),
            initializer=self.kernel_initializer, name="kernel")
        self.bias = self.add_weight(shape=(self.filters,), initializer="zeros", name="bias")

    def call(self, inputs, training=None):
        if training and native_grouped_convolution(inputs.dtype):
            # tf.nn.conv2d, not keras.ops.conv: Keras compiles a grouped kernel with XLA.
            return tf.nn.conv2d(inputs, self.kernel, 1, "SAME") + self.bias
        parts = keras.ops.split(inputs, self.groups, axis=-1)
        kernels = keras.ops.split(self.kernel, self.groups, axis=-1)
        outputs = [keras.ops.conv(part, kernel, padding="same")
                   for part, kernel in zip(parts, kernels)]
        merged = outputs[0] if self.groups == 1 else keras.ops.concatenate(outputs, axis=-1)
        return merged + self.bias

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.filters)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "groups": self.groups,
                "kernel_size": self.kernel_size,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}


@keras.saving.register_keras_serializable(package="gantry")
class GenerativeBasis(keras.layers.Layer):
    """(batch, channels) -> (batch, side, side, channels): a learned basis (standard normal at
    initialisation) times each example's vector, channel by channel (R3GAN's generator input)."""

    def __init__(self, side: int, **kwargs):
        super().__init__(**kwargs)
        self.side = side

    def build(self, input_shape):
        self.basis = self.add_weight(shape=(self.side, self.side, input_shape[-1]),
                                     initializer=keras.initializers.RandomNormal(stddev=1.0),
                                     name="basis")

    def call(self, inputs):
        return self.basis[None] * inputs[:, None, None, :]

    def compute_output_shape(self, input_shape):
        return input_shape[0], self.side, self.side, input_shape[-1]

    def get_config(self):
        return {**super().get_config(), "side": self.side}


def stages(resolution: int) -> int:
    """Stages of both networks: one per side from 4 (7 at 28 px) up to `resolution`."""
    networks.require_resolution(resolution)
    return 3 if resolution == 28 else int(math.log2(resolution // _SEED_SIDE)) + 1


def widths(resolution: int, width: int) -> tuple[int, ...]:
    """Channels of each stage from the lowest side up: width * min(2 ** (stages - 1 - s), 8)."""
    count = stages(resolution)
    return tuple(width * min(2 ** (count - 1 - stage), MAX_WIDTH_MULTIPLIER)
                 for stage in range(count))


def groups(channels: int, expansion: int, group_width: int) -> int:
    """Groups of a block's 3x3 convolution: its expanded channels over `group_width`;
    ValueError when `group_width` does not divide them."""
    expanded = channels * expansion
    if expanded % group_width:
        raise ValueError(f"group_width {group_width} does not divide the {expanded} expanded "
                         f"channels ({channels} x expansion {expansion}).")
    return expanded // group_width


def _fan_in_normal(scale: float) -> keras.initializers.Initializer:
    """Normal weights of variance scale / fan_in (R3GAN's `MSRInitializer`, gain^2 = scale)."""
    return keras.initializers.VarianceScaling(scale=scale, mode="fan_in",
                                              distribution="untruncated_normal")


def _check(channels: int, width: int, blocks_per_stage: int, expansion: int,
           group_width: int) -> None:
    for name, value in (("channels", channels), ("width", width),
                        ("blocks_per_stage", blocks_per_stage), ("expansion", expansion),
                        ("group_width", group_width)):
        networks.require_positive(name, value)
    groups(width, expansion, group_width)  # the narrowest stage; the others are 2^k times it


def residual_block(x, *, name: str, expansion: int, group_width: int, total_blocks: int):
    """x + the inverted-bottleneck branch (module docstring), layers "<name>_expand",
    "<name>_conv", "<name>_project" (zero at initialisation) and "<name>_add"."""
    channels = x.shape[-1]
    scale = _LEAKY_GAIN_SQUARED * total_blocks ** (-1.0 / (CONVOLUTIONS_PER_BRANCH - 1))
    branch = keras.layers.Conv2D(channels * expansion, 1, kernel_initializer=_fan_in_normal(scale),
                                 name=f"{name}_expand")(x)
    branch = keras.layers.LeakyReLU(_LEAKY_SLOPE, name=f"{name}_expand_lrelu")(branch)
    branch = GroupedConv2D(channels * expansion, groups(channels, expansion, group_width),
                           kernel_initializer=_fan_in_normal(scale), name=f"{name}_conv")(branch)
    branch = keras.layers.LeakyReLU(_LEAKY_SLOPE, name=f"{name}_conv_lrelu")(branch)
    branch = keras.layers.Conv2D(channels, 1, use_bias=False, kernel_initializer="zeros",
                                 name=f"{name}_project")(branch)
    return keras.layers.Add(name=f"{name}_add")([x, branch])


def _stage(x, stage: int, options: dict, total_blocks: int):
    for block in range(options["blocks_per_stage"]):
        x = residual_block(x, name=f"stage{stage}_block{block}", total_blocks=total_blocks,
                           expansion=options["expansion"], group_width=options["group_width"])
    return x


def _project(x, filters: int, name: str):
    """The 1x1 projection of a transition, when the width changes (linear, bias-free)."""
    if x.shape[-1] == filters:
        return x
    return keras.layers.Conv2D(filters, 1, use_bias=False, kernel_initializer=_fan_in_normal(1.0),
                               name=name)(x)


def _generator_body(inputs, *, resolution: int, channels: int, width: int, options: dict):
    """Images in [-1, 1] from (batch, features): basis, stages joined by upsampling, tanh."""
    stage_widths = widths(resolution, width)
    total_blocks = len(stage_widths) * options["blocks_per_stage"]
    x = keras.layers.Dense(stage_widths[0], use_bias=False, kernel_initializer=_fan_in_normal(1.0),
                           name="basis_linear")(inputs)
    x = GenerativeBasis(resolution // 2 ** (len(stage_widths) - 1), name="basis")(x)
    for stage, filters in enumerate(stage_widths):
        if stage:
            x = _project(x, filters, f"up{stage}_project")
            x = LowPassResample("up", name=f"up{stage}_resample")(x)
        x = _stage(x, stage, options, total_blocks)
    x = keras.layers.Conv2D(channels, 1, kernel_initializer=_fan_in_normal(1.0),
                            name="to_image")(x)
    return keras.layers.Activation("tanh", dtype="float32", name="tanh")(x)


def generator(*, resolution: int, channels: int, latent_dim: int, width: int = 64,
              blocks_per_stage: int = 2, expansion: int = 2, group_width: int = 16,
              name: str = "generator") -> keras.Model:
    """The R3GAN generator (module docstring): latents (batch, latent_dim) -> images."""
    _check(channels, width, blocks_per_stage, expansion, group_width)
    networks.require_positive("latent_dim", latent_dim)
    latents = keras.Input(shape=(latent_dim,), name="latents")
    images = _generator_body(latents, resolution=resolution, channels=channels, width=width,
                             options=dict(blocks_per_stage=blocks_per_stage, expansion=expansion,
                                          group_width=group_width))
    return keras.Model(latents, images, name=name)


def conditional_generator(*, resolution: int, channels: int, latent_dim: int, num_classes: int,
                          width: int = 64, blocks_per_stage: int = 2, expansion: int = 2,
                          group_width: int = 16, name: str = "generator") -> keras.Model:
    """The R3GAN generator reading concat(latents, one_hot(label)) (cgan and acgan alike);
    inputs ``[latents, labels]``."""
    _check(channels, width, blocks_per_stage, expansion, group_width)
    networks.require_positive("latent_dim", latent_dim)
    conditional.require_classes(num_classes)
    latents, labels = keras.Input(shape=(latent_dim,), name="latents"), conditional.labels_input()
    x = keras.layers.Concatenate(name="latents_and_label")(
        [latents, conditional.one_hot(labels, num_classes)])
    images = _generator_body(x, resolution=resolution, channels=channels, width=width,
                             options=dict(blocks_per_stage=blocks_per_stage, expansion=expansion,
                                          group_width=group_width))
    return keras.Model([latents, labels], images, name=name)


def discriminator(*, resolution: int, channels: int, width: int = 64, pack: int = 1,
                  blocks_per_stage: int = 2, expansion: int = 2, group_width: int = 16,
                  name: str = "discriminator") -> keras.Model:
    """The R3GAN discriminator (module docstring): images -> float32 logits (batch, 1). With
    `pack` > 1 it judges packs of `pack` images stacked along the channels (PacGAN,
    `networks.PackSamples`), returning N / pack logits."""
    _check(channels, width, blocks_per_stage, expansion, group_width)
    options = dict(blocks_per_stage=blocks_per_stage, expansion=expansion, group_width=group_width)
    stage_widths = widths(resolution, width)[::-1]
    total_blocks = len(stage_widths) * blocks_per_stage
    images = keras.Input(shape=(resolution, resolution, channels), name="images")
    x = networks.PackSamples(pack, name="pack")(images) if pack > 1 else images
    x = keras.layers.Conv2D(stage_widths[0], 1, kernel_initializer=_fan_in_normal(1.0),
                            name="from_image")(x)
    for stage, filters in enumerate(stage_widths):
        if stage:
            x = LowPassResample("down", name=f"down{stage}_resample")(x)
            x = _project(x, filters, f"down{stage}_project")
        x = _stage(x, stage, options, total_blocks)
    x = keras.layers.DepthwiseConv2D(x.shape[1], use_bias=False,
                                     depthwise_initializer=_fan_in_normal(1.0), name="basis")(x)
    features = keras.layers.Flatten(dtype="float32", name=FEATURES_LAYER)(x)
    logits = keras.layers.Dense(1, dtype="float32", kernel_initializer=_fan_in_normal(1.0),
                                name="logits")(features)
    return keras.Model(images, logits, name=name)


def projection_discriminator(*, resolution: int, channels: int, num_classes: int, width: int = 64,
                             blocks_per_stage: int = 2, expansion: int = 2, group_width: int = 16,
                             name: str = "discriminator") -> keras.Model:
    """cGAN: the R3GAN discriminator plus `conditional.add_projection` on its features (R3GAN's
    conditional discriminator is the projection term alone); inputs ``[images, labels]``."""
    conditional.require_classes(num_classes)
    body = discriminator(resolution=resolution, channels=channels, width=width,
                         blocks_per_stage=blocks_per_stage, expansion=expansion,
                         group_width=group_width, name=name)
    return conditional.add_projection(body, body.get_layer(FEATURES_LAYER).output, num_classes)


def acgan_discriminator(*, resolution: int, channels: int, num_classes: int, width: int = 64,
                        blocks_per_stage: int = 2, expansion: int = 2, group_width: int = 16,
                        name: str = "discriminator") -> keras.Model:
    """AC-GAN: the R3GAN discriminator plus `conditional.add_class_head` on its features;
    outputs ``[logits, class_logits]``."""
    conditional.require_classes(num_classes)
    body = discriminator(resolution=resolution, channels=channels, width=width,
                         blocks_per_stage=blocks_per_stage, expansion=expansion,
                         group_width=group_width, name=name)
    return conditional.add_class_head(body, body.get_layer(FEATURES_LAYER).output, num_classes,
                                      spectral_norm=False)
