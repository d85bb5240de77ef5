import math

import numpy as np
import pytest
import tensorflow as tf

from datasets import stacked
from gan import evaluator, evaluation, mode_coverage, per_channel
from gan.features import keras_features

ALL_TRIPLES = stacked.mode_classes(np.arange(1000))


def test_mode_index_reads_a_class_triple_as_one_number():
    assert stacked.mode_index([[0, 0, 0], [3, 7, 1], [9, 9, 9]]).tolist() == [0, 371, 999]
    assert stacked.mode_classes([371, 5]).tolist() == [[3, 7, 1], [0, 0, 5]]
    assert sorted(stacked.mode_index(ALL_TRIPLES).tolist()) == list(range(1000))


def test_every_mode_equally_often_covers_1000_modes_with_zero_kl():
    modes = stacked.mode_index(np.repeat(ALL_TRIPLES, 26, axis=0))
    found = mode_coverage.coverage(modes, 1000)
    assert found.covered == 1000 and found.kl == 0.0


def test_a_collapsed_sampler_covers_one_mode_with_kl_log_1000():
    found = mode_coverage.coverage(stacked.mode_index([[4, 1, 8]] * 26_000), 1000)
    assert found.covered == 1 and found.kl == pytest.approx(math.log(1000), rel=1e-12)


def test_kl_of_a_skewed_histogram_is_its_closed_form():
    """Modes 0 and 1 of 4, three samples to one: 3/4 log(3/4 * 4) + 1/4 log(1/4 * 4)."""
    found = mode_coverage.coverage([0, 0, 0, 1], 4)
    assert found.covered == 2 and found.kl == pytest.approx(0.75 * math.log(3), rel=1e-12)


def test_modes_outside_the_range_are_refused():
    with pytest.raises(ValueError, match=r"\[0, 1000\); got 0..1000"):
        mode_coverage.histogram([0, 1000], 1000)


def _classifier(seed=0):
    return evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                      feature_dim=8, seed=seed)


def test_the_per_channel_classifier_sums_the_channels_logits_and_joins_their_features():
    classifier = _classifier()
    one = keras_features(classifier)
    stacked_extractor = keras_features(per_channel.per_channel_classifier(classifier, 3))
    images = np.random.default_rng(0).uniform(-1, 1, (6, 28, 28, 3)).astype(np.float32)
    channels = [one.outputs(images[..., [index]]) for index in range(3)]
    features, logits = stacked_extractor.outputs(images)
    assert stacked_extractor.num_classes == 1000 and features.shape == (6, 24)
    np.testing.assert_allclose(features, np.concatenate([f for f, _ in channels], axis=1))
    expected = (channels[0][1][:, :, None, None] + channels[1][1][:, None, :, None]
                + channels[2][1][:, None, None, :]).reshape(6, 1000)
    np.testing.assert_allclose(logits, expected, atol=1e-4)
    per_channel_classes = np.stack([np.argmax(l, axis=1) for _, l in channels], axis=1)
    assert mode_coverage.classified_modes(images, stacked_extractor).tolist() == (
        stacked.mode_index(per_channel_classes).tolist())


def test_generated_coverage_counts_the_modes_of_the_samples():
    """A sampler repeating one image covers one mode, whatever the noise."""
    extractor = keras_features(per_channel.per_channel_classifier(_classifier(), 3))
    image = np.random.default_rng(1).uniform(-1, 1, (1, 28, 28, 3)).astype(np.float32)
    found = mode_coverage.generated_coverage(
        lambda noise: tf.repeat(tf.constant(image), tf.shape(noise)[0], axis=0),
        latent_shape=(4,), extractor=extractor, num_samples=300, batch_size=128)
    assert found.covered == 1 and found.kl == pytest.approx(math.log(1000))
    images = np.random.default_rng(2).uniform(-1, 1, (300, 28, 28, 3)).astype(np.float32)
    replayed = mode_coverage.generated_coverage(
        evaluation.replay_sampler(images), latent_shape=(4,), extractor=extractor,
        num_samples=300, batch_size=128)
    assert replayed == mode_coverage.coverage(
        mode_coverage.classified_modes(images, extractor), 1000)
