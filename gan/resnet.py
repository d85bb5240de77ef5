"""ResNet generators and discriminators of SN-GAN (Miyato et al. 2018) and BigGAN (Brock et al.
2019), unconditional and class-conditional.

Generator: Dense to a 4x4 seed (7x7 at 28 px) of `generator_widths(...)[0]` channels, then one
residual up-block per doubling, each BN-ReLU-upsample(nearest)-conv3x3-BN-ReLU-conv3x3 with an
upsample + conv1x1 shortcut, then BN-ReLU-conv3x3-tanh. Discriminator: SN-GAN's optimized first
block (conv3x3-ReLU-conv3x3-avgpool, shortcut avgpool-conv1x1), residual down-blocks
(ReLU-conv3x3-ReLU-conv3x3-avgpool, shortcut conv1x1-avgpool), ReLU, global sum pooling, Dense
logit; `spectral_norm` wraps every one of its convolutions and the logit layer. Both have
log2(resolution / 4) blocks (two at 28 px: 7 -> 14 -> 28).

Widths follow BigGAN's tables (its 64, 128 and 256 px architectures): the generator's channels
halve at every doubling down to `width` at full resolution, the discriminator's double at every
halving from `width`, and both multipliers are capped at 16 (BigGAN's widest), so a 256 px
generator is 16w, 16w, 16w, 8w, 4w, 2w, w and never 64w at its seed.

The conditional variants use `gan.conditional`'s conditioning unchanged: cgan replaces every
generator batch norm by a `ConditionalBatchNorm` and adds the projection term to the pooled
features; acgan feeds the one-hot label next to the noise and adds a class head. As in
`gan.networks`, the last layer of every model (and the sum pooling the logits read) has dtype
"float32", so under a mixed-precision policy outputs and losses stay float32.
"""

from __future__ import annotations

import math
from typing import Callable

import keras

from gan import conditional, networks

MAX_WIDTH_MULTIPLIER = 16
FEATURES_LAYER = "sum_pool"
_SEED_SIDE = 4


@keras.saving.register_keras_serializable(package="gantry")
class GlobalSumPooling2D(keras.layers.Layer):
    """(batch, H, W, C) -> (batch, C), the sum over height and width (SN-GAN's D pools so)."""

    def call(self, inputs):
        return keras.ops.sum(inputs, axis=(1, 2))

    def compute_output_shape(self, input_shape):
        return input_shape[0], input_shape[-1]


def blocks(resolution: int) -> int:
    """Residual blocks of both networks: log2(resolution / 4), or 2 at 28 px (7 -> 14 -> 28)."""
    networks.require_resolution(resolution)
    return 2 if resolution == 28 else int(math.log2(resolution // _SEED_SIDE))


def generator_widths(resolution: int, width: int) -> tuple[int, ...]:
    """Channels of the seed and of each up-block's output, from the lowest side up:
    width * min(2 ** (blocks - level), 16), ending in `width` at full resolution."""
    count = blocks(resolution)
    return tuple(width * min(2 ** (count - level), MAX_WIDTH_MULTIPLIER)
                 for level in range(count + 1))


def discriminator_widths(resolution: int, width: int) -> tuple[int, ...]:
    """Channels of each down-block's output, from full resolution down: width * min(2 ** i, 16)."""
    return tuple(width * min(2 ** index, MAX_WIDTH_MULTIPLIER) for index in range(blocks(resolution)))


def _generator_body(latents, *, resolution: int, channels: int, width: int,
                    batch_norm: Callable[[str], Callable]):
    """Images in [-1, 1] from a (batch, features) tensor; `batch_norm(name)` gives each
    normalization (plain or class-conditional) as a callable on features."""
    widths = generator_widths(resolution, width)
    side = resolution // 2 ** blocks(resolution)
    x = keras.layers.Dense(side * side * widths[0], name="seed")(latents)
    x = keras.layers.Reshape((side, side, widths[0]), name="seed_reshape")(x)
    for index, filters in enumerate(widths[1:]):
        block = f"up{index}"
        shortcut = networks.Resize2x("nearest", name=f"{block}_shortcut_resize")(x)
        shortcut = keras.layers.Conv2D(filters, 1, name=f"{block}_shortcut")(shortcut)
        x = batch_norm(f"{block}_bn0")(x)
        x = keras.layers.ReLU(name=f"{block}_relu0")(x)
        x = networks.Resize2x("nearest", name=f"{block}_resize")(x)
        # Bias-free: the batch norm that follows replaces it.
        x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False, name=f"{block}_conv0")(x)
        x = batch_norm(f"{block}_bn1")(x)
        x = keras.layers.ReLU(name=f"{block}_relu1")(x)
        x = keras.layers.Conv2D(filters, 3, padding="same", name=f"{block}_conv1")(x)
        x = keras.layers.Add(name=f"{block}_add")([shortcut, x])
    x = batch_norm("to_image_bn")(x)
    x = keras.layers.ReLU(name="to_image_relu")(x)
    x = keras.layers.Conv2D(channels, 3, padding="same", name="to_image")(x)
    return keras.layers.Activation("tanh", dtype="float32", name="tanh")(x)


def _require(channels: int, latent_dim: int, width: int) -> None:
    networks.require_positive("channels", channels)
    networks.require_positive("latent_dim", latent_dim)
    networks.require_positive("width", width)


def generator(*, resolution: int, channels: int, latent_dim: int, width: int = 64,
              name: str = "generator") -> keras.Model:
    """The ResNet generator (module docstring): latents (batch, latent_dim) -> images."""
    _require(channels, latent_dim, width)
    latents = keras.Input(shape=(latent_dim,), name="latents")
    images = _generator_body(latents, resolution=resolution, channels=channels, width=width,
                             batch_norm=networks.batch_norm)
    return keras.Model(latents, images, name=name)


def conditional_generator(*, resolution: int, channels: int, latent_dim: int, num_classes: int,
                          width: int = 64, name: str = "generator") -> keras.Model:
    """cGAN: the ResNet generator with every batch norm a `ConditionalBatchNorm`; inputs
    ``[latents, labels]``."""
    _require(channels, latent_dim, width)
    conditional.require_classes(num_classes)
    latents, labels = keras.Input(shape=(latent_dim,), name="latents"), conditional.labels_input()

    def batch_norm(layer_name: str) -> Callable:
        return lambda x: conditional.ConditionalBatchNorm(num_classes, name=layer_name)([x, labels])

    images = _generator_body(latents, resolution=resolution, channels=channels, width=width,
                             batch_norm=batch_norm)
    return keras.Model([latents, labels], images, name=name)


def acgan_generator(*, resolution: int, channels: int, latent_dim: int, num_classes: int,
                    width: int = 64, name: str = "generator") -> keras.Model:
    """AC-GAN: the ResNet generator fed concat(latents, one_hot(label)); inputs
    ``[latents, labels]``."""
    _require(channels, latent_dim, width)
    conditional.require_classes(num_classes)
    latents, labels = keras.Input(shape=(latent_dim,), name="latents"), conditional.labels_input()
    x = keras.layers.Concatenate(name="latents_and_label")(
        [latents, conditional.one_hot(labels, num_classes)])
    images = _generator_body(x, resolution=resolution, channels=channels, width=width,
                             batch_norm=networks.batch_norm)
    return keras.Model([latents, labels], images, name=name)


def discriminator(*, resolution: int, channels: int, width: int = 64, spectral_norm: bool = False,
                  pack: int = 1, name: str = "discriminator") -> keras.Model:
    """The ResNet discriminator (module docstring): images -> float32 logits (batch, 1). With
    `pack` > 1 it judges packs of `pack` images stacked along the channels (PacGAN,
    `networks.PackSamples`), returning N / pack logits. Its pooled features are the layer
    `FEATURES_LAYER`."""
    networks.require_positive("channels", channels)
    networks.require_positive("width", width)
    images = keras.Input(shape=(resolution, resolution, channels), name="images")
    x = networks.PackSamples(pack, name="pack")(images) if pack > 1 else images
    conv = lambda filters, kernel, layer_name: networks.spectral(  # noqa: E731
        keras.layers.Conv2D(filters, kernel, padding="same", name=layer_name), spectral_norm)
    for index, filters in enumerate(discriminator_widths(resolution, width)):
        block = f"down{index}"
        if index == 0:  # SN-GAN's optimized block: no ReLU on the input, pool before the 1x1.
            shortcut = keras.layers.AveragePooling2D(2, name=f"{block}_shortcut_pool")(x)
            shortcut = conv(filters, 1, f"{block}_shortcut")(shortcut)
            x = conv(filters, 3, f"{block}_conv0")(x)
        else:
            shortcut = conv(filters, 1, f"{block}_shortcut")(x)
            shortcut = keras.layers.AveragePooling2D(2, name=f"{block}_shortcut_pool")(shortcut)
            x = keras.layers.ReLU(name=f"{block}_relu0")(x)
            x = conv(filters, 3, f"{block}_conv0")(x)
        x = keras.layers.ReLU(name=f"{block}_relu1")(x)
        x = conv(filters, 3, f"{block}_conv1")(x)
        x = keras.layers.AveragePooling2D(2, name=f"{block}_pool")(x)
        x = keras.layers.Add(name=f"{block}_add")([shortcut, x])
    x = keras.layers.ReLU(name="features_relu")(x)
    features = GlobalSumPooling2D(dtype="float32", name=FEATURES_LAYER)(x)
    logits = networks.spectral(keras.layers.Dense(1, dtype="float32", name="logits"),
                               spectral_norm)(features)
    return keras.Model(images, logits, name=name)


def projection_discriminator(*, resolution: int, channels: int, num_classes: int, width: int = 64,
                             spectral_norm: bool = True, name: str = "discriminator") -> keras.Model:
    """cGAN: the ResNet discriminator plus `conditional.add_projection` on its pooled features
    (SN-GAN's projection discriminator); inputs ``[images, labels]``."""
    conditional.require_classes(num_classes)
    body = discriminator(resolution=resolution, channels=channels, width=width,
                         spectral_norm=spectral_norm, name=name)
    return conditional.add_projection(body, body.get_layer(FEATURES_LAYER).output, num_classes)


def acgan_discriminator(*, resolution: int, channels: int, num_classes: int, width: int = 64,
                        spectral_norm: bool = False, name: str = "discriminator") -> keras.Model:
    """AC-GAN: the ResNet discriminator plus `conditional.add_class_head` on its pooled
    features; outputs ``[logits, class_logits]``."""
    conditional.require_classes(num_classes)
    body = discriminator(resolution=resolution, channels=channels, width=width,
                         spectral_norm=spectral_norm, name=name)
    return conditional.add_class_head(body, body.get_layer(FEATURES_LAYER).output, num_classes,
                                      spectral_norm=spectral_norm)
