"""Conditional networks: conditional batch norm, projection and AC-GAN discriminators, the
label-conditioned generators, and the auxiliary classification loss, against closed forms."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from gan import conditional, networks

EPSILON = 1e-3  # Keras BatchNormalization's default, which ConditionalBatchNorm keeps


def test_conditional_batch_norm_applies_each_class_its_own_affine_transform():
    rng = np.random.default_rng(0)
    features = rng.normal(2.0, 3.0, size=(6, 2, 2, 3)).astype(np.float32)
    labels = np.array([0, 1, 1, 0, 1, 0])
    layer = conditional.ConditionalBatchNorm(2)
    layer([features, labels])
    gamma = np.array([[2.0, 0.5, -1.0], [3.0, 1.0, 0.25]], np.float32)
    beta = np.array([[1.0, 0.0, -2.0], [0.0, 4.0, 0.5]], np.float32)
    layer.gamma.assign(gamma)
    layer.beta.assign(beta)

    output = layer([features, labels], training=True).numpy()

    mean = features.mean(axis=(0, 1, 2))
    variance = features.var(axis=(0, 1, 2))
    normalized = (features - mean) / np.sqrt(variance + EPSILON)
    expected = normalized * gamma[labels][:, None, None, :] + beta[labels][:, None, None, :]
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


def test_conditional_batch_norm_starts_as_plain_batch_norm_and_counts_its_weights():
    features = np.random.default_rng(1).normal(size=(4, 5)).astype(np.float32)
    layer = conditional.ConditionalBatchNorm(3)
    output = layer([features, np.array([0, 1, 2, 1])], training=True).numpy()
    expected = (features - features.mean(0)) / np.sqrt(features.var(0) + EPSILON)
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)
    assert [v.shape for v in layer.trainable_variables] == [(3, 5), (3, 5)]
    assert sorted(v.path.split("/")[-1] for v in layer.non_trainable_variables) == [
        "moving_mean", "moving_variance"]


def test_conditional_batch_norm_rejects_no_classes():
    with pytest.raises(ValueError, match="num_classes >= 1, got 0"):
        conditional.ConditionalBatchNorm(0)


def test_projection_term_is_the_dot_product_of_class_embedding_and_features():
    discriminator = conditional.projection_discriminator(resolution=28, channels=1, num_classes=3,
                                                         width=2)
    features = keras.Model(discriminator.inputs[0], discriminator.get_layer("flatten").output)
    rng = np.random.default_rng(2)
    images = rng.uniform(-1, 1, size=(4, 28, 28, 1)).astype(np.float32)
    labels = np.array([2, 0, 1, 2])
    embedding = rng.normal(size=(3, 196)).astype(np.float32)
    psi_kernel = rng.normal(size=(196, 1)).astype(np.float32)
    discriminator.get_layer("embed").kernel.assign(embedding)
    discriminator.get_layer("logits_sn").layer.kernel.assign(psi_kernel)
    discriminator.get_layer("logits_sn").layer.bias.assign([0.5])

    logits = discriminator([images, labels], training=False).numpy()

    phi = features(images, training=False).numpy()
    # The logits layer computes with psi / sigma(psi) (spectral norm).
    psi = discriminator.get_layer("logits_sn").normalized_weights(training=False)[1].numpy()
    expected = phi @ psi + 0.5 + np.sum(embedding[labels] * phi, axis=1, keepdims=True)
    assert logits.shape == (4, 1) and logits.dtype == np.float32
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4)


def test_projection_discriminator_without_the_projection_is_the_dcgan_discriminator():
    conditioned = conditional.projection_discriminator(resolution=32, channels=3, num_classes=4,
                                                       width=2, spectral_norm=False)
    plain = networks.dcgan_discriminator(resolution=32, channels=3, width=2)
    extra = [v.path for v in conditioned.weights if v.path not in {w.path for w in plain.weights}]
    assert extra == ["embed/kernel"]
    assert conditioned.get_layer("embed").kernel.shape == (4, 4 * 4 * 8)


def test_spectral_norm_covers_the_heads_but_not_the_class_embedding():
    projection = conditional.projection_discriminator(resolution=28, channels=1, num_classes=3,
                                                      width=2)
    acgan = conditional.acgan_discriminator(resolution=28, channels=1, num_classes=3, width=2,
                                            spectral_norm=True)
    names = {layer.name for layer in projection.layers}
    assert {"down0_sn", "down1_sn", "logits_sn", "embed"} <= names and "embed_sn" not in names
    assert {"class_logits_sn", "logits_sn"} <= {layer.name for layer in acgan.layers}


@pytest.mark.parametrize("resolution, channels", [(28, 1), (32, 3), (64, 1)])
def test_acgan_discriminator_has_an_adversarial_and_a_class_head(resolution, channels):
    discriminator = conditional.acgan_discriminator(resolution=resolution, channels=channels,
                                                    num_classes=5, width=2)
    logits, class_logits = discriminator(tf.zeros([3, resolution, resolution, channels]))
    assert logits.shape == (3, 1) and class_logits.shape == (3, 5)
    assert logits.dtype == class_logits.dtype == tf.float32


@pytest.mark.parametrize("build", [conditional.conditional_generator, conditional.acgan_generator])
@pytest.mark.parametrize("resolution, channels", [(28, 1), (32, 3), (64, 3)])
def test_generators_make_images_in_range(build, resolution, channels):
    generator = build(resolution=resolution, channels=channels, latent_dim=6, num_classes=4, width=2)
    images = generator([tf.random.normal([4, 6], seed=1), tf.constant([0, 1, 2, 3])], training=True)
    assert images.shape == (4, resolution, resolution, channels)
    assert float(tf.reduce_max(tf.abs(images))) <= 1.0


def test_extra_blocks_reach_the_conditional_networks():
    generator = conditional.conditional_generator(resolution=28, channels=1, latent_dim=6,
                                                  num_classes=3, width=2, extra_blocks=1)
    # The extra blocks' batch norms are conditional too: the label reaches every level.
    assert isinstance(generator.get_layer("seed_extra0_bn"), conditional.ConditionalBatchNorm)
    assert isinstance(generator.get_layer("up0_extra0_bn"), conditional.ConditionalBatchNorm)
    acgan = conditional.acgan_generator(resolution=28, channels=1, latent_dim=6, num_classes=3,
                                        width=2, extra_blocks=1)
    assert acgan.get_layer("up0_extra0").kernel.shape == (3, 3, 2, 2)
    for build in (conditional.projection_discriminator, conditional.acgan_discriminator):
        discriminator = build(resolution=28, channels=1, num_classes=3, width=2, dropout=0.3,
                              extra_blocks=1, spectral_norm=False)
        names = [layer.name for layer in discriminator.layers]
        assert "down1_extra0" in names and "down1_extra0_dropout" in names


@pytest.mark.parametrize("build", [conditional.conditional_generator, conditional.acgan_generator])
def test_resize_upsampling_reaches_the_conditional_generators(build):
    generator = build(resolution=28, channels=1, latent_dim=6, num_classes=3, width=2,
                      upsample="nearest")
    assert generator.get_layer("up0_resize").interpolation == "nearest"
    assert generator.get_layer("to_image").kernel.shape == (3, 3, 2, 1)
    images = generator([tf.random.normal([3, 6], seed=2), tf.constant([0, 1, 2])], training=True)
    assert images.shape == (3, 28, 28, 1)


def test_the_label_changes_the_conditional_generator_output():
    generator = conditional.conditional_generator(resolution=28, channels=1, latent_dim=6,
                                                  num_classes=2, width=2)
    noise = tf.random.normal([1, 6], seed=3)
    generator([noise, tf.constant([0])], training=False)

    def sample(label):
        return generator([noise, tf.constant([label])], training=False).numpy()

    # gamma = 1 and beta = 0 for every class at initialisation: no class is preferred yet.
    np.testing.assert_array_equal(sample(0), sample(1))
    generator.get_layer("seed_bn").beta.assign([[0.0] * 4, [1.0] * 4])
    assert np.abs(sample(0) - sample(1)).max() > 1e-3


def test_the_label_changes_the_acgan_generator_output():
    generator = conditional.acgan_generator(resolution=28, channels=1, latent_dim=6,
                                            num_classes=3, width=2)
    noise = tf.random.normal([1, 6], seed=3)
    samples = [generator([noise, tf.constant([label])], training=False).numpy() for label in range(3)]
    assert min(np.abs(a - b).max() for i, a in enumerate(samples) for b in samples[i + 1:]) > 1e-4
    assert generator.get_layer("seed").kernel.shape[0] == 6 + 3


def test_classification_loss_and_accuracy_on_known_logits():
    logits = tf.constant([[0.0, math.log(3.0)], [math.log(4.0), 0.0], [0.0, 0.0]])
    labels = tf.constant([1, 1, 0], tf.int64)
    np.testing.assert_allclose(conditional.classification_loss(labels, logits).numpy(),
                               [math.log(4 / 3), math.log(5.0), math.log(2.0)], rtol=1e-6)
    # Ties go to the first class (arg-max), so the last example counts as correct.
    np.testing.assert_array_equal(conditional.classification_accuracy(labels, logits).numpy(),
                                  [1.0, 0.0, 1.0])
