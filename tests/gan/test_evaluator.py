import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from datasets import registry
from datasets.toys import toy_modes
from gan import evaluator, metrics

SETTINGS = evaluator.TrainSettings(epochs=1, batch_size=64, width=4, feature_dim=16,
                                   learning_rate=1e-2, max_train_examples=2000)
SIZES = {"train": 2400, "test": 500}


def _synthetic(split: str, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST-shaped images whose class is which pair of rows is bright."""
    count = count or SIZES[split]
    rng = np.random.default_rng(len(split))
    labels = rng.permutation(np.arange(count) % 10)
    images = np.full((count, 28, 28, 1), -1.0, np.float32)
    for index, label in enumerate(labels):
        images[index, 4 + 2 * label : 6 + 2 * label] = 1.0
    images += rng.normal(0.0, 0.2, images.shape).astype(np.float32)
    return images, labels.astype(np.int64)


def _dataset(split: str) -> tf.data.Dataset:
    images, labels = _synthetic(split)
    return tf.data.Dataset.from_tensor_slices({"x": images, "label": labels})


class FakeRegistry:
    """Stands in for registry.load_split with synthetic splits and counts the loads."""

    def __init__(self):
        self.loads = []

    def __call__(self, name, *, split, data_dir, fashion_mnist_dir, resolution, seed):
        self.loads.append((name, split, resolution))
        return _dataset(split)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The synthetic-data evaluator, trained once for this module, and its cache dir."""
    cache_dir = str(tmp_path_factory.mktemp("evaluators"))
    loads = FakeRegistry()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "load_split", loads)
        loaded = evaluator.load_or_train_evaluator(
            "fashion_mnist", resolution=None, data_dir=None, fashion_mnist_dir=None,
            cache_dir=cache_dir, train_if_missing=True, settings=SETTINGS)
    return loaded, cache_dir, loads


def _load(cache_dir, **kwargs):
    return evaluator.load_or_train_evaluator(
        "fashion_mnist", resolution=kwargs.pop("resolution", None), data_dir=None,
        fashion_mnist_dir=None, cache_dir=cache_dir, settings=SETTINGS, **kwargs)


def test_classifier_layout_per_resolution():
    small = evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                       feature_dim=16)
    large = evaluator.build_classifier(input_shape=(64, 64, 3), num_classes=7, width=4,
                                       feature_dim=16)
    assert small.get_layer("conv2").output.shape[1:] == (7, 7, 16)
    assert large.get_layer("conv3").output.shape[1:] == (8, 8, 32)
    assert small.output.shape[1:] == (10,) and large.output.shape[1:] == (7,)
    assert small.get_layer("features").output.shape[1:] == (16,)


def test_classifier_weights_are_a_function_of_the_seed():
    def fingerprint(seed):
        return evaluator.weights_fingerprint(evaluator.build_classifier(
            input_shape=(28, 28, 1), num_classes=10, width=4, seed=seed))

    assert fingerprint(1) == fingerprint(1)
    assert fingerprint(1) != fingerprint(2)


def test_missing_evaluator_names_the_mode_that_trains_it(tmp_path):
    with pytest.raises(evaluator.EvaluatorMissingError,
                       match="--mode=train_evaluator --dataset=fashion_mnist --resolution=32"):
        _load(str(tmp_path), resolution=32)
    assert not os.listdir(tmp_path)


def test_training_saves_the_evaluator_and_its_record(trained):
    loaded, cache_dir, loads = trained
    directory = os.path.join(cache_dir, "fashion_mnist-28")
    assert loaded.trained and loaded.directory == directory
    assert sorted(os.listdir(directory)) == ["evaluator.json", "evaluator.keras"]
    assert loads.loads == [("fashion_mnist", "train", None), ("fashion_mnist", "test", None)]
    record = loaded.record
    assert record["dataset"] == "fashion_mnist"
    assert (record["resolution"], record["num_classes"]) == (28, 10)
    assert record["settings"]["max_train_examples"] == 2000 and record["feature_dim"] == 16
    assert record["fingerprint"] == evaluator.weights_fingerprint(loaded.extractor.model)
    assert record["test_accuracy"] > 0.9
    images, labels = _synthetic("test")
    predicted = np.argmax(loaded.extractor.logits(images), axis=1)
    assert np.mean(predicted == labels) == pytest.approx(record["test_accuracy"], abs=1e-6)


def test_a_cached_evaluator_is_reused_without_training(trained, monkeypatch):
    loaded, cache_dir, _ = trained
    model_path = os.path.join(loaded.directory, evaluator.EVALUATOR_FILE)
    modified = os.stat(model_path).st_mtime_ns
    loads = FakeRegistry()
    monkeypatch.setattr(registry, "load_split", loads)
    again = _load(cache_dir, train_if_missing=True)
    assert not again.trained and loads.loads == []
    assert os.stat(model_path).st_mtime_ns == modified
    assert again.record == loaded.record
    assert evaluator.weights_fingerprint(again.extractor.model) == loaded.record["fingerprint"]
    images = _synthetic("test", 20)[0]
    np.testing.assert_allclose(again.extractor.features(images), loaded.extractor.features(images),
                               rtol=1e-6)


def test_cache_directories_and_datasets_without_evaluator(tmp_path):
    directory = evaluator.evaluator_dir("tfds:cifar10", resolution=32, cache_dir="/c")
    assert directory == "/c/tfds_cifar10-32"
    with pytest.raises(ValueError, match="2-D toys use the mode metrics"):
        evaluator.load_or_train_evaluator("ring8", resolution=None, data_dir=None,
                                          fashion_mnist_dir=None, cache_dir=str(tmp_path))


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


def test_a_generator_that_reproduces_the_real_set_scores_perfectly(trained):
    extractor = trained[0].extractor
    images, labels = _synthetic("test", 300)
    real = tf.data.Dataset.from_tensor_slices({"x": images, "label": labels})
    replay = Replay(images)
    result = evaluator.evaluate_images(real, replay, latent_shape=(8,), extractor=extractor,
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


def test_a_generator_that_drops_half_the_classes(trained):
    extractor = trained[0].extractor
    images, labels = _synthetic("test", 400)
    reference = evaluator.real_reference(tf.data.Dataset.from_tensor_slices(images), extractor,
                                         num_samples=400)
    assert reference.count == 400 and np.bincount(reference.classes).tolist() == [40] * 10
    half = images[labels < 5]
    result = evaluator.evaluate_generator(Replay(half), latent_shape=(8,), reference=reference,
                                          extractor=extractor, num_samples=200, kid_subsets=3,
                                          kid_subset_size=100, is_splits=2)
    assert result["coverage"] == 0.5
    assert result["class_kl"] == pytest.approx(math.log(2.0), rel=1e-9)
    assert result["precision"] == 1.0 and result["recall"] == 0.5
    assert result["fid"] > 1.0
    assert result["kid"] > 5 * result["kid_std"]


def test_generator_evaluation_depends_on_the_seed_not_the_batch_size(trained):
    extractor = trained[0].extractor
    reference = evaluator.real_reference(_dataset("test"), extractor, num_samples=200)
    latents = keras.Input(shape=(8,))
    pixels = keras.layers.Dense(784, activation="tanh",
                                kernel_initializer=keras.initializers.GlorotUniform(5))(latents)
    generator = keras.Model(latents, keras.layers.Reshape((28, 28, 1))(pixels))

    def run(batch_size, seed):
        return evaluator.evaluate_generator(
            lambda noise: generator(noise, training=False), latent_shape=(8,), reference=reference,
            extractor=extractor, num_samples=120, batch_size=batch_size, seed=seed,
            kid_subsets=2, kid_subset_size=50, is_splits=2)

    first = run(40, 0)
    assert run(120, 0) == pytest.approx(first, rel=1e-4)
    assert run(40, 1)["fid"] != pytest.approx(first["fid"], rel=1e-4)


def test_evaluation_refuses_bad_inputs(trained):
    extractor = trained[0].extractor
    with pytest.raises(ValueError, match="only 500 examples"):
        evaluator.real_reference(_dataset("test"), extractor, num_samples=600)
    reference = evaluator.real_reference(_dataset("test"), extractor, num_samples=50)
    with pytest.raises(ValueError, match="NaN or Inf"):
        evaluator.evaluate_generator(lambda noise: tf.fill([noise.shape[0], 28, 28, 1], np.nan),
                                     latent_shape=(8,), reference=reference, extractor=extractor,
                                     num_samples=50)
    other = evaluator.real_reference(_dataset("test"), extractor, num_samples=50)
    wide = evaluator.Reference(np.zeros((50, 32), np.float32), other.stats, other.classes)
    with pytest.raises(ValueError, match="32-d features"):
        evaluator.evaluate_generator(Replay(np.zeros((50, 28, 28, 1), np.float32)),
                                     latent_shape=(8,), reference=wide, extractor=extractor,
                                     num_samples=50)


def test_toy_generator_evaluation_on_2500_points():
    modes, std = toy_modes("grid25")
    drawn = []

    def sample(noise):
        drawn.append(noise.shape[0])
        return tf.gather(modes[:5], tf.range(noise.shape[0]) % 5)

    assert evaluator.evaluate_toy_generator(sample, latent_shape=(2,), modes=modes, std=std) == {
        "modes": 5, "high_quality": 1.0}
    assert sum(drawn) == 2500
