import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from datasets.toys import toy_modes
from gan import evaluation, metrics
from tests.gan.synthetic_evaluator import dataset, synthetic, train_synthetic_evaluator


@pytest.fixture(scope="module")
def extractor(tmp_path_factory):
    """The synthetic-data evaluator's extractor, trained once for this module."""
    return train_synthetic_evaluator(str(tmp_path_factory.mktemp("evaluators")))[0].extractor


class Replay:
    """A 'generator' that returns the given images in order, ignoring the noise."""

    def __init__(self, images):
        self.images, self.position, self.noise_rows = images, 0, 0

    def __call__(self, noise):
        count = noise.shape[0]
        self.noise_rows += count
        batch = self.images[self.position : self.position + count]
        self.position += count
        return tf.constant(batch)


def test_a_generator_that_reproduces_the_real_set_scores_perfectly(extractor):
    images, labels = synthetic("test", 300)
    real = tf.data.Dataset.from_tensor_slices({"x": images, "label": labels})
    replay = Replay(images)
    result = evaluation.evaluate_images(real, replay, latent_shape=(8,), extractor=extractor,
                                       num_samples=300, batch_size=64, kid_subsets=5,
                                       kid_subset_size=100, is_splits=3)
    assert replay.noise_rows == 300
    assert set(result) == {"fid", "kid", "kid_std", "precision", "recall", "inception_score",
                           "inception_score_std", "coverage", "class_kl"}
    assert result["fid"] == pytest.approx(0.0, abs=1e-6)
    assert (result["precision"], result["recall"], result["coverage"]) == (1.0, 1.0, 1.0)
    assert result["class_kl"] == pytest.approx(0.0, abs=1e-12)
    logits = extractor.logits(images)
    assert result["inception_score"] == pytest.approx(metrics.inception_score(logits, splits=3)[0])
    # Unbiased: subsets of one set give values around 0, within their spread.
    assert abs(result["kid"]) < 2 * result["kid_std"]


def test_a_generator_that_drops_half_the_classes(extractor):
    images, labels = synthetic("test", 400)
    reference = evaluation.real_reference(tf.data.Dataset.from_tensor_slices(images), extractor,
                                         num_samples=400)
    assert reference.count == 400 and np.bincount(reference.classes).tolist() == [40] * 10
    half = images[labels < 5]
    result = evaluation.evaluate_generator(Replay(half), latent_shape=(8,), reference=reference,
                                          extractor=extractor, num_samples=200, kid_subsets=3,
                                          kid_subset_size=100, is_splits=2)
    assert result["coverage"] == 0.5
    assert result["class_kl"] == pytest.approx(math.log(2.0), rel=1e-9)
    assert result["precision"] == 1.0 and result["recall"] == 0.5
    assert result["fid"] > 1.0
    assert result["kid"] > 5 * result["kid_std"]


def test_generator_evaluation_depends_on_the_seed_not_the_batch_size(extractor):
    reference = evaluation.real_reference(dataset("test"), extractor, num_samples=200)
    latents = keras.Input(shape=(8,))
    pixels = keras.layers.Dense(784, activation="tanh",
                                kernel_initializer=keras.initializers.GlorotUniform(5))(latents)
    generator = keras.Model(latents, keras.layers.Reshape((28, 28, 1))(pixels))

    def run(batch_size, seed):
        return evaluation.evaluate_generator(
            lambda noise: generator(noise, training=False), latent_shape=(8,), reference=reference,
            extractor=extractor, num_samples=120, batch_size=batch_size, seed=seed,
            kid_subsets=2, kid_subset_size=50, is_splits=2)

    first = run(40, 0)
    assert run(120, 0) == pytest.approx(first, rel=1e-4)
    assert run(40, 1)["fid"] != pytest.approx(first["fid"], rel=1e-4)


def test_evaluation_refuses_bad_inputs(extractor):
    with pytest.raises(ValueError, match="only 500 examples"):
        evaluation.real_reference(dataset("test"), extractor, num_samples=600)
    reference = evaluation.real_reference(dataset("test"), extractor, num_samples=50)
    with pytest.raises(ValueError, match="NaN or Inf"):
        evaluation.evaluate_generator(lambda noise: tf.fill([noise.shape[0], 28, 28, 1], np.nan),
                                     latent_shape=(8,), reference=reference, extractor=extractor,
                                     num_samples=50)
    other = evaluation.real_reference(dataset("test"), extractor, num_samples=50)
    wide = evaluation.Reference(np.zeros((50, 32), np.float32), other.stats, other.classes)
    with pytest.raises(ValueError, match="32-d features"):
        evaluation.evaluate_generator(Replay(np.zeros((50, 28, 28, 1), np.float32)),
                                     latent_shape=(8,), reference=wide, extractor=extractor,
                                     num_samples=50)


def test_toy_generator_evaluation_on_2500_points():
    modes, std = toy_modes("grid25")
    drawn = []

    def sample(noise):
        drawn.append(noise.shape[0])
        return tf.gather(modes[:5], tf.range(noise.shape[0]) % 5)

    assert evaluation.evaluate_toy_generator(sample, latent_shape=(2,), modes=modes, std=std) == {
        "modes": 5, "high_quality": 1.0}
    assert sum(drawn) == 2500
