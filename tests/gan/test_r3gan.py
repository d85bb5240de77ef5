"""gan.r3gan: the R3GAN networks: shapes, fix-up initialisation, the low-pass resampling, the
grouped convolution against a dense reference, gradients of one training step, the flags."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from gan import architectures, r3gan
from tests.trainers.tiny import IMAGE_INFO, tiny_config
from trainers.config.flags import ConfigError
from trainers.config.validation import validate
from trainers.setups import registry

LATENT_DIM, CLASSES, BATCH = 8, 3, 4
# Tiny networks: 4 channels at full resolution, groups of 4 of the 8 expanded channels.
TINY = dict(width=4, blocks_per_stage=1, expansion=2, group_width=4)


def _latents(batch=BATCH):
    return tf.random.stateless_normal((batch, LATENT_DIM), seed=(0, 1))


def _labels():
    return tf.constant([0, 2, 1, 0], tf.int32)


def test_low_pass_filter_is_the_normalised_outer_product_of_1_2_1():
    np.testing.assert_array_equal(r3gan.low_pass_filter(),
                                  np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.float32) / 16)


def test_resampling_interpolates_up_and_averages_down_on_one_grid():
    ramp = tf.reshape(tf.range(16, dtype=tf.float32), (1, 4, 4, 1))  # x[i, j] = 4 i + j
    up = r3gan.LowPassResample("up")(ramp)[0, :, :, 0].numpy()
    down = r3gan.LowPassResample("down")(ramp)[0, :, :, 0].numpy()
    # Up: x[i, j] lands on (2i, 2j); pixels between are the mean of their neighbours, so the
    # interior is the ramp at half steps (the last row and column meet the zero border).
    np.testing.assert_array_equal(up[:7, :7], np.add.outer(2 * np.arange(7), np.arange(7) / 2))
    # Down: pixel (i, j) is the [1, 2, 1] average centred on x[2i, 2j]; inside, a ramp's value.
    assert down.shape == (2, 2) and down[1, 1] == 10.0
    assert down[0, 0] == pytest.approx((4 * 0 + 2 * 1 + 2 * 4 + 5) / 16)  # the zero border
    ones = r3gan.LowPassResample("down")(tf.ones((1, 8, 8, 1)))[0, 1:, 1:, 0]
    np.testing.assert_array_equal(ones, np.ones((3, 3)))


@pytest.mark.parametrize("training", [False, True], ids=["split", "native"])
@pytest.mark.parametrize("channels, groups", [(8, 2), (32, 8), (16, 16), (12, 1)])
def test_grouped_convolution_matches_a_block_diagonal_dense_convolution(channels, groups,
                                                                         training):
    layer = r3gan.GroupedConv2D(channels, groups, kernel_initializer="random_normal")
    inputs = tf.random.stateless_normal((2, 6, 6, channels), seed=(3, 4))
    layer.build(inputs.shape)
    layer.bias.assign(tf.random.stateless_normal((channels,), seed=(5, 6)))
    weights = tf.random.stateless_normal((2, 6, 6, channels), seed=(7, 8))
    size = channels // groups
    mask = np.kron(np.eye(groups), np.ones((size, size)))[None, None]  # (1, 1, in, out)

    def dense(x, kernel):  # the same convolution as one ungrouped kernel, zero off the groups
        blocks = tf.tile(kernel, (1, 1, groups, 1)) * mask
        return tf.nn.conv2d(x, blocks, 1, "SAME") + layer.bias

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(inputs)
        grouped, reference = layer(inputs, training=training), dense(inputs, layer.kernel)
        loss, reference_loss = (tf.reduce_sum(grouped * weights),
                                tf.reduce_sum(reference * weights))
    np.testing.assert_allclose(grouped, reference, rtol=1e-5, atol=1e-5)
    for got, want in zip(tape.gradient(loss, [inputs, layer.kernel, layer.bias]),
                         tape.gradient(reference_loss, [inputs, layer.kernel, layer.bias])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def _convolutions(layer, inputs, training):
    """Conv2D ops in the graph of the layer's forward pass."""
    graph = tf.function(lambda x: layer(x, training=training)).get_concrete_function(inputs).graph
    return sum(op.type == "Conv2D" for op in graph.get_operations())


def test_training_computes_one_grouped_convolution_and_inference_one_per_group():
    layer = r3gan.GroupedConv2D(16, 4)
    inputs = tf.zeros((1, 5, 5, 16))
    assert _convolutions(layer, inputs, training=True) == 1
    assert _convolutions(layer, inputs, training=False) == 4  # what export and TF.js trace
    half = r3gan.GroupedConv2D(16, 4, dtype="mixed_float16")  # --precision=mixed_float16
    assert _convolutions(half, tf.zeros((1, 5, 5, 16), tf.float16), training=True) == 4


def test_native_grouped_convolution_only_where_tensorflow_has_its_gradients():
    from tensorflow.python.util import _pywrap_util_port
    assert r3gan.native_grouped_convolution("float32")
    assert not r3gan.native_grouped_convolution(tf.float16)
    assert r3gan.native_grouped_convolution(tf.bfloat16) == _pywrap_util_port.IsMklEnabled()


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_native_and_split_forms_agree_to_second_order(dtype):
    """R1 and R2 differentiate the input gradient again: both forms give the same penalty
    gradient on the kernel, in float32 and bfloat16 (where the native form is used)."""
    if not r3gan.native_grouped_convolution(dtype):
        pytest.skip("TensorFlow does not compute this dtype's grouped convolution here")
    layer = r3gan.GroupedConv2D(32, 4, kernel_initializer="random_normal", dtype=dtype.name)
    inputs = tf.cast(tf.random.stateless_normal((2, 7, 7, 32), seed=(1, 2)), dtype)
    layer.build(inputs.shape)

    def penalty_gradient(training):
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                inner.watch(inputs)
                score = tf.reduce_sum(tf.cast(layer(inputs, training=training), tf.float32) ** 2)
            penalty = tf.reduce_sum(tf.cast(inner.gradient(score, inputs), tf.float32) ** 2)
        return outer.gradient(penalty, layer.kernel)

    native, split = penalty_gradient(True), penalty_gradient(False)
    scale = float(tf.reduce_max(tf.abs(split)))
    tolerance = 1e-5 if dtype == tf.float32 else 2e-2
    np.testing.assert_allclose(np.asarray(native, np.float32) / scale,
                               np.asarray(split, np.float32) / scale, atol=tolerance)


@pytest.mark.parametrize("resolution, widths", [
    (28, (16, 8, 4)), (32, (32, 16, 8, 4)), (64, (32, 32, 16, 8, 4)),
    (128, (32, 32, 32, 16, 8, 4)), (256, (32, 32, 32, 32, 16, 8, 4))])
def test_generator_and_discriminator_shapes_at_every_resolution(resolution, widths):
    assert r3gan.widths(resolution, 4) == widths
    generator = r3gan.generator(resolution=resolution, channels=3, latent_dim=LATENT_DIM, **TINY)
    discriminator = r3gan.discriminator(resolution=resolution, channels=3, pack=2, **TINY)

    images = generator(_latents())
    logits = discriminator(images)

    assert images.shape == (BATCH, resolution, resolution, 3) and images.dtype == tf.float32
    assert np.abs(images.numpy()).max() <= 1.0
    assert logits.shape == (BATCH // 2, 1) and logits.dtype == tf.float32
    side = 7 if resolution == 28 else 4
    assert generator.get_layer("basis").output.shape == (None, side, side, widths[0])
    assert discriminator.get_layer("basis").kernel.shape == (side, side, widths[0], 1)
    assert discriminator.get_layer(r3gan.FEATURES_LAYER).output.shape == (None, widths[0])


def _blocks(model):
    return [layer.name[:-len("_add")] for layer in model.layers if layer.name.endswith("_add")]


@pytest.mark.parametrize("network", ["generator", "discriminator"])
def test_fixup_initialisation_makes_every_block_its_shortcut(network):
    shared = dict(resolution=32, channels=3, width=8, blocks_per_stage=2, expansion=2,
                  group_width=4)
    if network == "generator":
        model = r3gan.generator(latent_dim=LATENT_DIM, **shared)
        inputs = _latents()
    else:
        model = r3gan.discriminator(**shared)
        inputs = tf.random.stateless_uniform((BATCH, 32, 32, 3), seed=(1, 2), minval=-1)
    blocks = _blocks(model)
    assert len(blocks) == 4 * 2  # stages 4, 8, 16, 32 x 2 blocks
    adds = [model.get_layer(f"{block}_add") for block in blocks]
    probe = keras.Model(model.inputs, [(add.input[0], add.output) for add in adds])
    for shortcut, output in probe(inputs):
        assert np.abs(shortcut.numpy()).max() > 0
        np.testing.assert_array_equal(output, shortcut)
    # The branch's other convolutions: He-normal for the leaky ReLU, times L^(-1/4), L = 8.
    expected = 2 / 1.04 * 8 ** -0.5
    for block in blocks:
        assert not np.any(model.get_layer(f"{block}_project").kernel.numpy())
        for name in ("expand", "conv"):
            initializer = model.get_layer(f"{block}_{name}").kernel_initializer
            assert initializer.scale == pytest.approx(expected) and initializer.mode == "fan_in"


def _step_gradients(generator, discriminator, images):
    """Gradients of the non-saturating losses of one step, by variable path."""
    with tf.GradientTape(persistent=True) as tape:
        fakes = generator(_latents(), training=True)
        real, fake = discriminator(images, training=True), discriminator(fakes, training=True)
        d_loss = tf.reduce_mean(tf.nn.softplus(-real) + tf.nn.softplus(fake))
        g_loss = tf.reduce_mean(tf.nn.softplus(-fake))
    gradients = {}
    for model, loss in ((generator, g_loss), (discriminator, d_loss)):
        variables = model.trainable_variables
        for variable, gradient in zip(variables, tape.gradient(loss, variables)):
            gradients[f"{model.name}/{variable.path}"] = gradient
    return gradients


def test_one_training_step_reaches_every_variable_but_the_branches_behind_zero_projections():
    generator = r3gan.generator(resolution=28, channels=1, latent_dim=LATENT_DIM, **TINY)
    discriminator = r3gan.discriminator(resolution=28, channels=1, **TINY)
    images = tf.random.stateless_uniform((BATCH, 28, 28, 1), seed=(1, 2), minval=-1)
    gradients = _step_gradients(generator, discriminator, images)

    assert len(gradients) == len(generator.trainable_variables) + len(
        discriminator.trainable_variables)
    assert all(gradient is not None for gradient in gradients.values())
    # A branch's expand and grouped convolutions reach the loss only through its projection,
    # zero at step 0: exactly zero gradient. Everything else, projections included, has one.
    behind_zero = {path for path in gradients if "_block" in path
                   and ("_expand/" in path or "_conv/" in path)}
    assert len(behind_zero) == 2 * 2 * 3 * 2  # networks x convolutions x stages x (kernel, bias)
    for path, gradient in gradients.items():
        assert np.any(gradient.numpy()) != (path in behind_zero), path

    # One update makes the projections nonzero: then every variable has a gradient.
    for model in (generator, discriminator):
        for variable in model.trainable_variables:
            variable.assign_sub(0.01 * gradients[f"{model.name}/{variable.path}"])
    for path, gradient in _step_gradients(generator, discriminator, images).items():
        assert np.any(gradient.numpy()), path


@pytest.mark.parametrize("resolution", (28, 64))
def test_conditional_builders(resolution):
    family = architectures.ARCHITECTURES["r3gan"]
    shared = dict(resolution=resolution, channels=3, num_classes=CLASSES, **TINY)

    cgan_images = family.conditional_generator(latent_dim=LATENT_DIM, **shared)(
        [_latents(), _labels()])
    acgan_images = family.acgan_generator(latent_dim=LATENT_DIM, **shared)([_latents(), _labels()])
    projected = family.projection_discriminator(**shared)([cgan_images, _labels()])
    adversarial, classes = family.acgan_discriminator(**shared)(acgan_images)

    assert cgan_images.shape == acgan_images.shape == (BATCH, resolution, resolution, 3)
    assert projected.shape == adversarial.shape == (BATCH, 1)
    assert classes.shape == (BATCH, CLASSES)
    # The label reaches the image: the same noise under two labels draws two images.
    generator = family.conditional_generator(latent_dim=LATENT_DIM, **shared)
    first, second = (generator([_latents(1), tf.constant([label])]) for label in (0, 1))
    assert np.abs(first.numpy() - second.numpy()).max() > 0


def test_outputs_stay_float32_under_mixed_precision():
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        generator = r3gan.generator(resolution=28, channels=1, latent_dim=LATENT_DIM, **TINY)
        discriminator = r3gan.discriminator(resolution=28, channels=1, **TINY)
        logits = discriminator(generator(_latents()))
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert generator.get_layer("stage0_block0_conv").compute_dtype == "bfloat16"
    assert generator.output.dtype == logits.dtype == "float32"


@pytest.mark.parametrize("flag, value, default", [
    ("r3gan_blocks", 3, 2), ("r3gan_expansion", 4, 2), ("r3gan_group_width", 8, 16)])
@pytest.mark.parametrize("arch", ["dcgan", "resnet"])
def test_r3gan_flags_are_refused_with_other_archs(arch, flag, value, default):
    config = tiny_config(arch=arch, **{flag: value})
    with pytest.raises(ConfigError) as error:
        registry.get(config.setup).check_data(config, IMAGE_INFO)
    assert str(error.value) == (f"--{flag}={value!r} is not an option of the --arch={arch} "
                                f"networks; use --{flag}={default!r} or --arch=r3gan.")
    accepted = tiny_config(arch="r3gan", **{"r3gan_group_width": 4, flag: value})
    registry.get(config.setup).check_data(accepted, IMAGE_INFO)


@pytest.mark.parametrize("setup", ["sngan", "cgan"])
def test_spectral_norm_is_refused_with_r3gan_even_from_a_preset(setup):
    # Zero-initialised kernels would stop the power iteration at a zero vector.
    config = tiny_config(setup=setup, arch="r3gan", r3gan_group_width=4)
    assert config.d_spectral_norm is True
    with pytest.raises(ConfigError) as error:
        registry.get(config.setup).check_data(config, IMAGE_INFO)
    assert str(error.value) == ("--d_spectral_norm=True is not an option of the --arch=r3gan "
                                "networks; use --d_spectral_norm=False or --arch=dcgan or resnet.")
    registry.get(setup).check_data(dataclasses.replace(config, d_spectral_norm=False), IMAGE_INFO)


def test_group_width_must_divide_the_expanded_channels():
    config = tiny_config(arch="r3gan", g_width=12, d_width=8, r3gan_group_width=8)
    with pytest.raises(ConfigError) as error:
        validate(dataclasses.replace(config, r3gan_group_width=16))
    assert str(error.value) == ("--r3gan_group_width=16 is invalid: it must divide the 24 channels "
                                "of --r3gan_expansion=2 x --g_width=12; use a divisor such as 8.")
    # Other families do not read it: their widths need not fit it.
    validate(dataclasses.replace(config, arch="dcgan", r3gan_group_width=16))
