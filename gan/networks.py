"""Keras 3 functional generators and discriminators: DCGAN for images, MLPs for 2-D toys
(the ResNet image networks are `gan.resnet`; `gan.architectures` maps `--arch` to either).

Contracts shared by every builder:
- Generators map latents of shape (latent_dim,) to samples; image generators end in tanh so
  samples lie in [-1, 1] like the data.
- Discriminators and critics return logits of shape (batch, 1).
- The last layer of every model has dtype "float32", so under a mixed-precision global policy
  the body computes in (b)float16 while outputs, and hence losses, stay float32.

The resampling convolutions use kernel 4 with stride 2: a kernel divisible by the stride keeps
transposed convolutions free of checkerboard artifacts (Odena et al., 2016), and "same" padding
makes every block exactly halve or double the spatial size. Optional `extra_blocks` add 3x3
stride-1 convolutions at each resolution, which deepen a network without resampling (as the
"standard CNN" of SN-GAN does in its discriminator). The generator can instead upsample by
resizing, then convolving 3x3 (`upsample="nearest"` or `"bilinear"`, Odena et al.'s other cure for
checkerboards, used by the ResNet generators of SN-GAN and BigGAN). That convolution runs at the
doubled side, so it costs about twice the multiply-adds of a 4x4 transposed convolution, which
touches each input pixel once per kernel tap.
"""

import math

import keras

from gan.spectral_norm import SpectralNormalization

# Every image network's sides: 28 (Fashion-MNIST's own) and the powers of two from 32 to 256.
SUPPORTED_RESOLUTIONS = (28, 32, 64, 128, 256)
NORMALIZATIONS = ("none", "batch", "layer")
UPSAMPLINGS = ("transposed", "nearest", "bilinear")

_KERNEL_SIZE = 4
_EXTRA_KERNEL_SIZE = 3
_LEAKY_SLOPE = 0.2

# The widest DCGAN layer is this many times `width` (DCGAN's 64 px networks: 1024 = 8 x 128).
MAX_WIDTH_MULTIPLIER = 8


def require_positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value!r}.")


def _require_non_negative(name: str, value: int) -> None:
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}.")


def require_resolution(resolution: int) -> None:
    if resolution not in SUPPORTED_RESOLUTIONS:
        raise ValueError(
            f"Unsupported --resolution {resolution!r}; supported resolutions are "
            f"{SUPPORTED_RESOLUTIONS}. Resize the data to one of them."
        )


def width_multipliers(resolution: int) -> tuple[int, ...]:
    """Channel multipliers of `width`, from the lowest side up, for the generator's seed and its
    hidden transposed convolutions; the discriminator uses them reversed.

    One level per doubling from a 4x4 seed (7x7 at 28 px), each doubling halving the channels
    down to `width`; multipliers are capped at `MAX_WIDTH_MULTIPLIER`, so at 128 and 256 px the
    lowest levels all have 8 x width channels (28: 2, 1; 32: 4, 2, 1; 64: 8, 4, 2, 1; 128:
    8, 8, 4, 2, 1; 256: 8, 8, 8, 4, 2, 1).
    """
    require_resolution(resolution)
    levels = 2 if resolution == 28 else int(math.log2(resolution)) - 2
    return tuple(min(2 ** (levels - 1 - level), MAX_WIDTH_MULTIPLIER) for level in range(levels))


def dcgan_generator(
    *, resolution: int, channels: int, latent_dim: int, width: int = 64, extra_blocks: int = 0,
    upsample: str = "transposed", name: str = "generator"
) -> keras.Model:
    """DCGAN generator: Dense seed, then blocks that double the side up to `resolution`.

    Seed and hidden blocks are bias-free (batch norm's beta replaces the bias), batch-normalized
    per channel and ReLU-activated; the output block is a biased transposed convolution to
    `channels` followed by tanh. At 28 px the seed is 7x7x(2*width) and the single hidden block
    has `width` channels; at 32 px 4x4x(4w) -> 8x8x(2w) -> 16x16x(w); at 64 px
    4x4x(8w) -> ... -> 32x32x(w); `width_multipliers` gives every resolution's. Each level
    doubles the side. `extra_blocks` 3x3 stride-1
    convolution blocks (same channels, batch norm, ReLU; named "<level>_extra<j>") follow the
    seed and every hidden block: more layers per resolution, the side unchanged. `upsample`
    "transposed" doubles the side with 4x4 stride-2 transposed convolutions (DCGAN); "nearest" or
    "bilinear" resizes 2x (layer "<block>_resize") and then convolves 3x3 with stride 1, with the
    same channels and layer names as the transposed convolutions it replaces.
    """
    require_resolution(resolution)
    require_positive("channels", channels)
    require_positive("latent_dim", latent_dim)
    require_positive("width", width)
    _require_non_negative("extra_blocks", extra_blocks)
    if upsample not in UPSAMPLINGS:
        raise ValueError(f"Unknown upsample {upsample!r}; choose one of {UPSAMPLINGS}.")
    multipliers = width_multipliers(resolution)
    seed_side = resolution // 2 ** len(multipliers)
    seed_channels = multipliers[0] * width

    latents = keras.Input(shape=(latent_dim,), name="latents")
    x = keras.layers.Dense(seed_side * seed_side * seed_channels, use_bias=False, name="seed")(
        latents
    )
    x = keras.layers.Reshape((seed_side, seed_side, seed_channels), name="seed_reshape")(x)
    x = batch_norm("seed_bn")(x)
    x = keras.layers.ReLU(name="seed_relu")(x)
    x = _generator_extra_blocks(x, "seed", extra_blocks)
    for index, multiplier in enumerate(multipliers[1:]):
        x = _upsampling(x, multiplier * width, upsample, use_bias=False, name=f"up{index}")
        x = batch_norm(f"up{index}_bn")(x)
        x = keras.layers.ReLU(name=f"up{index}_relu")(x)
        x = _generator_extra_blocks(x, f"up{index}", extra_blocks)
    x = _upsampling(x, channels, upsample, use_bias=True, name="to_image")
    images = keras.layers.Activation("tanh", dtype="float32", name="tanh")(x)
    return keras.Model(latents, images, name=name)


def _upsampling(x, filters: int, upsample: str, *, use_bias: bool, name: str):
    if upsample == "transposed":
        return keras.layers.Conv2DTranspose(filters, _KERNEL_SIZE, strides=2, padding="same",
                                            use_bias=use_bias, name=name)(x)
    x = Resize2x(upsample, name=f"{name}_resize")(x)
    return keras.layers.Conv2D(filters, _EXTRA_KERNEL_SIZE, padding="same", use_bias=use_bias,
                               name=name)(x)


@keras.saving.register_keras_serializable(package="gantry")
class Resize2x(keras.layers.Layer):
    """Doubles height and width by `interpolation` ("nearest" or "bilinear"), keeping static
    output shapes.

    `keras.layers.UpSampling2D` repeats pixels with `ops.repeat` for "nearest", and its graph
    loses the static height after two of them: the TFLite converter then cannot lower the next
    convolution, so such generators did not convert. One image resize gives the same pixels
    and converts.
    """

    size = (2, 2)

    def __init__(self, interpolation: str, **kwargs):
        super().__init__(**kwargs)
        self.interpolation = interpolation

    def call(self, inputs):
        height, width = inputs.shape[1:3]
        return keras.ops.image.resize(inputs, (2 * height, 2 * width),
                                      interpolation=self.interpolation)

    def compute_output_shape(self, input_shape):
        batch, height, width, channels = input_shape
        return batch, 2 * height, 2 * width, channels

    def get_config(self):
        return {**super().get_config(), "interpolation": self.interpolation}


def _generator_extra_blocks(x, level: str, count: int):
    for index in range(count):
        name = f"{level}_extra{index}"
        x = keras.layers.Conv2D(x.shape[-1], _EXTRA_KERNEL_SIZE, padding="same", use_bias=False,
                                name=name)(x)
        x = batch_norm(f"{name}_bn")(x)
        x = keras.layers.ReLU(name=f"{name}_relu")(x)
    return x


def batch_norm(name: str) -> keras.layers.Layer:
    # Statistics over the global batch, not each replica's share: training then does not depend
    # on how many replicas split the batch (one replica takes the same code path).
    return keras.layers.BatchNormalization(synchronized=True, name=name)


def _normalization_layer(normalization: str, name: str) -> keras.layers.Layer:
    if normalization == "batch":
        return batch_norm(name)
    # Normalizes each example over its whole feature map (H, W, C), as in WGAN-GP's critic.
    return keras.layers.LayerNormalization(axis=(1, 2, 3), name=name)


def dcgan_discriminator(
    *,
    resolution: int,
    channels: int,
    width: int = 64,
    normalization: str = "none",
    dropout: float = 0.0,
    spectral_norm: bool = False,
    pack: int = 1,
    extra_blocks: int = 0,
    name: str = "discriminator",
) -> keras.Model:
    """DCGAN discriminator: stride-2 convolutions with LeakyReLU(0.2), then Dense(1) logits.

    Channels grow width, 2*width, ... (two convolutions at 28 px, three at 32, four at 64, ...:
    `width_multipliers` reversed).
    `normalization` ("none", "batch" or "layer") follows every convolution but the first, as in
    DCGAN; normalized convolutions are bias-free. Use "none" or "layer" with a gradient penalty:
    batch norm mixes examples, so per-example input gradients would be wrong. `dropout` in
    [0, 1) is applied after each LeakyReLU when positive (active only with training=True).
    `spectral_norm` wraps every convolution and the logits layer in spectral normalization
    (see `spectral`); it requires normalization "none", as in SN-GAN, since a normalization
    layer rescales activations by data-dependent amounts and undoes the Lipschitz bound.
    With `pack` > 1 it takes N images and returns N / pack logits: packs of `pack` images
    stacked along the channels (`PackSamples`). `extra_blocks` 3x3 stride-1 convolutions (same
    channels; named "down<i>_extra<j>", normalized, activated, dropped out and spectrally
    normalized like the stride-2 ones) follow every stride-2 convolution.
    """
    require_resolution(resolution)
    require_positive("channels", channels)
    require_positive("width", width)
    _check_discriminator_options(normalization, dropout, spectral_norm, extra_blocks)

    images = keras.Input(shape=(resolution, resolution, channels), name="images")
    x = PackSamples(pack, name="pack")(images) if pack > 1 else images
    for index, multiplier in enumerate(reversed(width_multipliers(resolution))):
        # DCGAN leaves the first convolution unnormalized; extra blocks are normalized.
        blocks = [(f"down{index}", _KERNEL_SIZE, 2, index > 0)]
        blocks += [(f"down{index}_extra{j}", _EXTRA_KERNEL_SIZE, 1, True) for j in range(extra_blocks)]
        for block, kernel_size, strides, may_normalize in blocks:
            x = _discriminator_block(
                x, multiplier * width, kernel_size, strides, name=block,
                normalization=normalization if may_normalize else "none", dropout=dropout,
                spectral_norm=spectral_norm)
    x = keras.layers.Flatten(name="flatten")(x)
    logits = spectral(keras.layers.Dense(1, dtype="float32", name="logits"), spectral_norm)(x)
    return keras.Model(images, logits, name=name)


def _check_discriminator_options(normalization: str, dropout: float, spectral_norm: bool,
                                 extra_blocks: int) -> None:
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"Unknown normalization {normalization!r}; choose one of {NORMALIZATIONS}."
        )
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")
    _require_non_negative("extra_blocks", extra_blocks)
    if spectral_norm and normalization != "none":
        raise ValueError(
            f"spectral_norm=True needs normalization 'none', got {normalization!r}; "
            "spectrally normalized discriminators use no normalization layers."
        )


def _discriminator_block(x, filters: int, kernel_size: int, strides: int, *, name: str,
                         normalization: str, dropout: float, spectral_norm: bool):
    """One convolution of the DCGAN discriminator (bias-free when normalized), then its
    normalization layer, LeakyReLU and dropout; layers named "<name>", "<name>_norm", ..."""
    normalized = normalization != "none"
    x = spectral(keras.layers.Conv2D(
        filters,
        kernel_size,
        strides=strides,
        padding="same",
        use_bias=not normalized,
        name=name,
    ), spectral_norm)(x)
    if normalized:
        x = _normalization_layer(normalization, name=f"{name}_norm")(x)
    x = keras.layers.LeakyReLU(negative_slope=_LEAKY_SLOPE, name=f"{name}_lrelu")(x)
    if dropout > 0.0:
        x = keras.layers.Dropout(dropout, name=f"{name}_dropout")(x)
    return x


def spectral(layer: keras.layers.Layer, enabled: bool) -> keras.layers.Layer:
    """`layer` wrapped in spectral normalization (named "<layer>_sn") when `enabled`.

    The wrapper is `gan.spectral_norm.SpectralNormalization`: one power iteration per
    training-mode call, as in Miyato et al. 2018, with the gradient through sigma (Keras's own
    wrapper has none; that module says why it matters). Every training-mode call -- including
    the generator step's call of the discriminator -- updates the power-iteration vector
    `vector_u` (a non-trainable variable, so checkpoints hold it), identically on every
    replica; training=False uses the stored vector.

    The wrapper computes in float32 (dtype "float32"): under a mixed policy the power iteration
    and sigma would otherwise run in bfloat16. The wrapped layer keeps the global policy.
    """
    if not enabled:
        return layer
    return SpectralNormalization(layer, dtype="float32", name=f"{layer.name}_sn")


def wgan_critic(
    *, resolution: int, channels: int, width: int = 64, name: str = "critic"
) -> keras.Model:
    """WGAN critic: the DCGAN discriminator without normalization or dropout.

    No batch norm in the critic: the gradient penalty is per example, and batch statistics
    would make each example's score depend on the rest of the batch.
    """
    return dcgan_discriminator(
        resolution=resolution, channels=channels, width=width, normalization="none", name=name
    )


def mlp_generator(
    *,
    latent_dim: int,
    output_dim: int = 2,
    width: int = 128,
    depth: int = 3,
    name: str = "generator",
) -> keras.Model:
    """MLP generator for 2-D toy data: `depth` x (Dense(width) + ReLU), then a linear output.

    The output is unbounded (no tanh): toy distributions are not confined to [-1, 1].
    """
    require_positive("latent_dim", latent_dim)
    require_positive("output_dim", output_dim)
    require_positive("width", width)
    require_positive("depth", depth)
    latents = keras.Input(shape=(latent_dim,), name="latents")
    x = latents
    for index in range(depth):
        x = keras.layers.Dense(width, name=f"hidden{index}")(x)
        x = keras.layers.ReLU(name=f"hidden{index}_relu")(x)
    samples = keras.layers.Dense(output_dim, dtype="float32", name="samples")(x)
    return keras.Model(latents, samples, name=name)


class PackSamples(keras.layers.Layer):
    """PacGAN packing (Lin et al. 2018): `pack` consecutive samples become one input.

    [N, *dims, C] -> [N / pack, *dims, pack * C], sample-major along the last axis, so a
    discriminator judges `pack` samples jointly and one logit answers "are these all real?".
    A generator that drops modes makes packs of look-alike samples, which real packs never are,
    so the discriminator can punish collapse it cannot see one sample at a time. N must be a
    multiple of `pack` (each replica's batch, under a strategy).
    """

    def __init__(self, pack: int, **kwargs):
        super().__init__(**kwargs)
        require_positive("pack", pack)
        self.pack = pack

    def call(self, samples):
        rank = len(samples.shape)
        grouped = keras.ops.reshape(samples, (-1, self.pack, *samples.shape[1:]))
        grouped = keras.ops.transpose(grouped, (0, *range(2, rank), 1, rank))
        return keras.ops.reshape(grouped, (-1, *samples.shape[1:-1], self.pack * samples.shape[-1]))

    def compute_output_shape(self, input_shape):
        batch = None if input_shape[0] is None else input_shape[0] // self.pack
        return (batch, *input_shape[1:-1], self.pack * input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pack": self.pack}


def mlp_discriminator(
    *, input_dim: int = 2, width: int = 128, depth: int = 3, pack: int = 1,
    name: str = "discriminator"
) -> keras.Model:
    """MLP discriminator for 2-D toy data: `depth` x (Dense(width) + LeakyReLU(0.2)), Dense(1).

    No normalization, so it also serves as a critic with a gradient penalty. With `pack` > 1
    it takes N samples and returns N / pack logits, one per pack (`PackSamples`).
    """
    require_positive("input_dim", input_dim)
    require_positive("width", width)
    require_positive("depth", depth)
    samples = keras.Input(shape=(input_dim,), name="samples")
    x = PackSamples(pack, name="pack")(samples) if pack > 1 else samples
    for index in range(depth):
        x = keras.layers.Dense(width, name=f"hidden{index}")(x)
        x = keras.layers.LeakyReLU(negative_slope=_LEAKY_SLOPE, name=f"hidden{index}_lrelu")(x)
    logits = keras.layers.Dense(1, dtype="float32", name="logits")(x)
    return keras.Model(samples, logits, name=name)
