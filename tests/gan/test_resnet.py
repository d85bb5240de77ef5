import keras
import numpy as np
import pytest
import tensorflow as tf

from gan import architecture_names, architectures, conditional, networks, resnet
from trainers.setups import adversarial_flags

RESOLUTIONS = (28, 32, 64, 128, 256)
LATENT_DIM, CLASSES, WIDTH, BATCH = 8, 3, 2, 2


def _latents():
    return tf.random.stateless_normal((BATCH, LATENT_DIM), seed=(0, 1))


def _labels():
    return tf.constant([0, 2], tf.int32)


def test_arch_choices_are_the_names_module_and_the_table_is_checked_against_it():
    assert adversarial_flags.ARCHS is architecture_names.NAMES == tuple(architectures.ARCHITECTURES)
    family = architectures.ARCHITECTURES["dcgan"]
    with pytest.raises(ImportError, match=r"builds the families \('dcgan',\) but .*NAMES lists "
                                          r"\('dcgan', 'resnet', 'r3gan'\)"):
        architectures.check_names({"dcgan": family})
    with pytest.raises(ImportError, match="NAMES lists"):
        architectures.check_names({"resnet": family, "dcgan": family})


# The families with spectral normalization (r3gan's own tests are tests/gan/test_r3gan.py).
SPECTRAL_ARCHS = ("dcgan", "resnet")


@pytest.mark.parametrize("resolution", RESOLUTIONS)
@pytest.mark.parametrize("arch", SPECTRAL_ARCHS)
def test_generator_and_discriminator_of_both_archs_at_every_resolution(arch, resolution):
    family = architectures.ARCHITECTURES[arch]
    shared = dict(resolution=resolution, channels=3, width=WIDTH)

    images = family.generator(latent_dim=LATENT_DIM, **shared)(_latents())
    logits = family.discriminator(spectral_norm=True, pack=1, **shared)(images, training=True)

    assert images.shape == (BATCH, resolution, resolution, 3)
    assert np.abs(images.numpy()).max() <= 1.0
    assert logits.shape == (BATCH, 1) and logits.dtype == tf.float32


@pytest.mark.parametrize("resolution", (28, 128))
@pytest.mark.parametrize("arch", SPECTRAL_ARCHS)
def test_conditional_builders_of_both_archs(arch, resolution):
    family = architectures.ARCHITECTURES[arch]
    shared = dict(resolution=resolution, channels=1, width=WIDTH, num_classes=CLASSES)

    cgan_images = family.conditional_generator(latent_dim=LATENT_DIM, **shared)(
        [_latents(), _labels()])
    acgan_images = family.acgan_generator(latent_dim=LATENT_DIM, **shared)([_latents(), _labels()])
    projected = family.projection_discriminator(spectral_norm=True, **shared)(
        [cgan_images, _labels()])
    adversarial, classes = family.acgan_discriminator(spectral_norm=False, **shared)(acgan_images)

    assert cgan_images.shape == acgan_images.shape == (BATCH, resolution, resolution, 1)
    assert projected.shape == adversarial.shape == (BATCH, 1)
    assert classes.shape == (BATCH, CLASSES)


@pytest.mark.parametrize("resolution,blocks", [(28, 2), (32, 3), (64, 4), (128, 5), (256, 6)])
def test_depth_and_widths_scale_with_resolution(resolution, blocks):
    generator = resnet.generator(resolution=resolution, channels=1, latent_dim=LATENT_DIM,
                                 width=WIDTH)
    discriminator = resnet.discriminator(resolution=resolution, channels=1, width=WIDTH)
    g_widths = resnet.generator_widths(resolution, WIDTH)
    d_widths = resnet.discriminator_widths(resolution, WIDTH)
    seed = 7 if resolution == 28 else 4

    assert resnet.blocks(resolution) == blocks == len(g_widths) - 1 == len(d_widths)
    assert generator.get_layer("seed").units == seed * seed * g_widths[0]
    assert [generator.get_layer(f"up{i}_add").output.shape[1:] for i in range(blocks)] == [
        (seed * 2 ** (i + 1), seed * 2 ** (i + 1), g_widths[i + 1]) for i in range(blocks)]
    assert [discriminator.get_layer(f"down{i}_add").output.shape[1:] for i in range(blocks)] == [
        (resolution // 2 ** (i + 1), resolution // 2 ** (i + 1), d_widths[i]) for i in range(blocks)]
    adds = [layer for model in (generator, discriminator) for layer in model.layers
            if isinstance(layer, keras.layers.Add)]
    assert len(adds) == 2 * blocks  # one residual sum per block, nothing else


def test_width_rule_follows_biggan_and_caps_at_sixteen():
    # BigGAN's 64 and 128 px generator (16, 8, 4, 2, 1 and 16, 16, 8, 4, 2, 1) x ch.
    assert resnet.generator_widths(64, 1) == (16, 8, 4, 2, 1)
    assert resnet.generator_widths(128, 1) == (16, 16, 8, 4, 2, 1)
    assert resnet.discriminator_widths(128, 1) == (1, 2, 4, 8, 16)
    # At 256 px the cap keeps the seed at 16 x width, not 64 x.
    assert resnet.generator_widths(256, 64) == (1024, 1024, 1024, 512, 256, 128, 64)
    assert resnet.discriminator_widths(256, 64) == (64, 128, 256, 512, 1024, 1024)
    assert resnet.generator_widths(28, 64) == (256, 128, 64)


def test_discriminator_parameter_count_28px_width4():
    discriminator = resnet.discriminator(resolution=28, channels=1, width=4)
    # Optimized block to 4 channels: 1x1 shortcut 1*4+4, 3x3 convs 9*1*4+4 and 9*4*4+4; block
    # to 8: 1x1 4*8+8, 3x3 9*4*8+8 and 9*8*8+8; logits 8+1.
    assert discriminator.count_params() == 8 + 40 + 148 + 40 + 296 + 584 + 9


def test_spectral_norm_wraps_every_discriminator_layer_when_asked():
    def wrapped(model):
        return [layer for layer in model.layers
                if isinstance(layer, keras.layers.SpectralNormalization)]

    plain = resnet.discriminator(resolution=32, channels=1, width=WIDTH)
    spectral = resnet.discriminator(resolution=32, channels=1, width=WIDTH, spectral_norm=True)
    projection = resnet.projection_discriminator(resolution=32, channels=1, width=WIDTH,
                                                 num_classes=CLASSES, spectral_norm=True)

    assert wrapped(plain) == []
    # Three convolutions per block (two 3x3, the 1x1 shortcut) and the logits.
    assert len(wrapped(spectral)) == 3 * 3 + 1
    assert not [layer for layer in spectral.layers
                if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense))]
    assert {layer.layer.name for layer in wrapped(projection)} >= {"logits", "down0_shortcut"}
    assert isinstance(projection.get_layer("embed"), keras.layers.Dense)  # not normalized


def test_cgan_generator_conditions_every_batch_norm_on_the_label():
    generator = resnet.conditional_generator(resolution=32, channels=1, latent_dim=LATENT_DIM,
                                             num_classes=CLASSES, width=WIDTH)
    norms = [layer for layer in generator.layers
             if isinstance(layer, conditional.ConditionalBatchNorm)]
    assert len(norms) == 2 * resnet.blocks(32) + 1
    assert not [layer for layer in generator.layers
                if isinstance(layer, keras.layers.BatchNormalization)]
    final = generator.get_layer("to_image_bn")
    final.gamma.assign(tf.constant([[1.0] * WIDTH, [3.0] * WIDTH, [1.0] * WIDTH]))
    latents = tf.repeat(_latents()[:1], 2, axis=0)
    same_noise = generator([latents, tf.constant([0, 1])], training=False).numpy()
    assert not np.allclose(same_noise[0], same_noise[1])


def test_outputs_stay_float32_under_mixed_precision():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        generator = resnet.generator(resolution=32, channels=1, latent_dim=LATENT_DIM, width=WIDTH)
        discriminator = resnet.discriminator(resolution=32, channels=1, width=WIDTH,
                                             spectral_norm=True)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    images = generator(_latents())
    assert images.dtype == tf.float32
    assert discriminator(images).dtype == tf.float32
    assert generator.get_layer("up0_conv0").compute_dtype == "bfloat16"
    assert discriminator.get_layer(resnet.FEATURES_LAYER).compute_dtype == "float32"


def test_packed_discriminator_gives_one_logit_per_pack():
    discriminator = resnet.discriminator(resolution=28, channels=1, width=WIDTH, pack=2)
    images = tf.zeros((4, 28, 28, 1))
    assert discriminator(images).shape == (2, 1)


def test_unsupported_resolution_is_refused_with_the_supported_list():
    with pytest.raises(ValueError, match=r"--resolution 48.*\(28, 32, 64, 128, 256\)"):
        resnet.generator(resolution=48, channels=1, latent_dim=LATENT_DIM)
    assert networks.SUPPORTED_RESOLUTIONS == RESOLUTIONS
